package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// readAll reads messages from a connection of t over in until an error,
// and returns each encoded as go-sdk encodes it, and whether it ended in
// an error other than the end of input.
func readAll(t *testing.T, tr mcp.Transport) (msgs []string, failed bool) {
	t.Helper()
	c, err := tr.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for {
		m, err := c.Read(context.Background())
		if err != nil {
			return msgs, !errors.Is(err, io.EOF)
		}
		b, err := jsonrpc.EncodeMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, string(b))
	}
}

// The relay's own reading of newline-delimited JSON-RPC gives go-sdk's
// session what go-sdk's own IOTransport gives it, message for message, and
// fails where it fails: one message or several, a value over several
// lines, CRLF, batches, trailing data, what is not JSON-RPC, a message
// over the limit.
func TestLinesReadAsGoSDK(t *testing.T) {
	const (
		req   = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}`
		note  = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`
		resp  = `{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`
		sresp = `{"jsonrpc":"2.0","id":"mcp-confirm-relay-9","result":{"content":[]}}`
	)
	for _, tt := range []struct {
		name  string
		in    string
		limit int
	}{
		{"one", req + "\n", 0},
		{"several", req + "\n" + note + "\n" + resp + "\n", 0},
		{"relay's id, no hook", sresp + "\n", 0},
		{"over lines", "{\n\"jsonrpc\": \"2.0\",\n\"method\": \"notifications/initialized\"\n}\n", 0},
		{"CRLF", req + "\r\n" + resp + "\r\n", 0},
		{"no final newline", req, 0},
		{"blank lines", "\n\n" + req + "\n\n", 0},
		{"batch", "[" + req + "," + note + "]\n" + resp + "\n", 0},
		{"empty batch", "[]\n", 0},
		{"bad batch item", "[" + req + ",{\"x\":1}]\n", 0},
		{"trailing data", req + " " + note + "\n", 0},
		{"not JSON", "hello\n", 0},
		{"not JSON-RPC", `{"jsonrpc":"1.0","id":1,"method":"x"}` + "\n", 0},
		{"result and error", `{"jsonrpc":"2.0","id":2,"result":{},"error":{"code":1,"message":"m"}}` + "\n", 0},
		{"over the limit", req + "\n" + strings.Repeat(" ", 200) + req + "\n", 100},
		{"each under the limit, together over it", strings.Repeat(req+"\n"+note+"\n", 4), 120},
		{"over the default limit", req + "\n" + strings.Repeat(" ", 2*mcp.DefaultMaxLineLength) + req + "\n", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			theirs, theirFail := readAll(t, &mcp.IOTransport{Reader: io.NopCloser(strings.NewReader(tt.in)), Writer: nopWriteCloser{}, MaxLineLength: tt.limit})
			ours, ourFail := readAll(t, ownLines(&mcp.IOTransport{Reader: io.NopCloser(strings.NewReader(tt.in)), Writer: nopWriteCloser{}, MaxLineLength: tt.limit}))
			if strings.Join(ours, "\n") != strings.Join(theirs, "\n") || ourFail != theirFail {
				t.Errorf("read %q:\nrelay:  %q (failed: %v)\ngo-sdk: %q (failed: %v)", tt.in, ours, ourFail, theirs, theirFail)
			}
		})
	}
}

type nopWriteCloser struct{}

func (nopWriteCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriteCloser) Close() error                { return nil }

// Which messages the reading goroutine hands to the relay's callers: only
// a JSON-RPC 2.0 response (a result or an error, not both) to an id of the
// relay's, its keys spelt exactly; a null input request in its result
// becomes the guard's error. Everything else goes to go-sdk, in order.
func TestLinesRelayAnswers(t *testing.T) {
	for _, tt := range []struct {
		name    string
		line    string
		taken   bool
		wantErr bool // taken as an error
		refused bool // taken as a result decodeResult refuses
	}{
		{"result", `{"jsonrpc":"2.0","id":"mcp-confirm-relay-1","result":{"content":[]}}`, true, false, false},
		{"result first", `{"result":{"content":[]},"id":"mcp-confirm-relay-1","jsonrpc":"2.0"}`, true, false, false},
		{"error", `{"jsonrpc":"2.0","id":"mcp-confirm-relay-1","error":{"code":-32602,"message":"no"}}`, true, true, false},
		{"null input request", `{"jsonrpc":"2.0","id":"mcp-confirm-relay-1","result":{"inputRequests":{"a":null}}}`, true, false, true},
		{"null input request spelt otherwise", `{"jsonrpc":"2.0","id":"mcp-confirm-relay-1","result":{"content":[],"InputRequests":{"a":null}}}`, true, false, true},
		{"go-sdk's id", `{"jsonrpc":"2.0","id":1,"result":{}}`, false, false, false},
		{"another string id", `{"jsonrpc":"2.0","id":"x-1","result":{}}`, false, false, false},
		{"the prefix alone", `{"jsonrpc":"2.0","id":"mcp-confirm-relay-","result":{}}`, false, false, false},
		{"a request under the relay's id", `{"jsonrpc":"2.0","id":"mcp-confirm-relay-1","method":"ping"}`, false, false, false},
		{"key spelt otherwise", `{"jsonrpc":"2.0","ID":"mcp-confirm-relay-1","result":{}}`, false, false, false},
		{"Result spelt otherwise", `{"jsonrpc":"2.0","id":"mcp-confirm-relay-1","Result":{}}`, false, false, false},
		{"no version", `{"id":"mcp-confirm-relay-1","result":{}}`, false, false, false},
		{"result and error", `{"jsonrpc":"2.0","id":"mcp-confirm-relay-1","result":{},"error":{"code":1,"message":"m"}}`, false, false, false},
		{"not an object", `["mcp-confirm-relay-1"]`, false, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := ownLines(&mcp.IOTransport{Reader: io.NopCloser(strings.NewReader(tt.line + "\n" + `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")), Writer: nopWriteCloser{}})
			c, err := tr.Connect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var got *jsonrpc.Response
			c.(*lineConn).answer = func(id string, resp *jsonrpc.Response) bool {
				got = resp
				return true
			}
			var read []jsonrpc.Message
			for {
				m, err := c.Read(context.Background())
				if err != nil {
					break
				}
				read = append(read, m)
			}
			if (got != nil) != tt.taken {
				t.Fatalf("taken: %v, want %v (go-sdk read %d messages)", got != nil, tt.taken, len(read))
			}
			if tt.taken {
				if (got.Error != nil) != tt.wantErr {
					t.Errorf("answer %+v: error %v, want an error: %v", got, got.Error, tt.wantErr)
				}
				if got.Error == nil {
					// The result goes to its caller through decodeResult,
					// which refuses a null input request as guard.go
					// refuses it on go-sdk's messages.
					_, err := decodeResult(got.Result)
					if refused := errors.Is(err, errMalformedResult); refused != tt.refused {
						t.Errorf("decodeResult(%s): %v, want refused: %v", got.Result, err, tt.refused)
					}
				}
				if got.ID.Raw() != "mcp-confirm-relay-1" {
					t.Errorf("answer id %v", got.ID.Raw())
				}
				// go-sdk reads on: the next message is its.
				if len(read) != 1 {
					t.Errorf("go-sdk read %d messages after the answer, want 1", len(read))
				}
			}
		})
	}
}

// The limit on a message's length is per message also for the answers
// the relay's callers take, which go-sdk never sees: answers together
// longer than the limit, each shorter, are all taken, and go-sdk reads the
// message after them.
func TestLinesLimitPerAnswer(t *testing.T) {
	const answer = `{"jsonrpc":"2.0","id":"mcp-confirm-relay-1","result":{"content":[]}}` + "\n"
	in := strings.Repeat(answer, 5) + `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"
	c, err := ownLines(&mcp.IOTransport{Reader: io.NopCloser(strings.NewReader(in)), Writer: nopWriteCloser{}, MaxLineLength: 2 * len(answer)}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	taken := 0
	c.(*lineConn).answer = func(string, *jsonrpc.Response) bool {
		taken++
		return true
	}
	m, err := c.Read(context.Background())
	if n, ok := m.(*jsonrpc.Request); err != nil || !ok || n.Method != "notifications/initialized" || taken != 5 {
		t.Fatalf("read %v, %v after %d answers taken; want the notification after 5", m, err, taken)
	}
}

// relayAnswer reads what a decoder reading each member in turn reads: the
// same answers, ids, results and errors, and the same refusals, for
// answers in every spelling (white space, escaped keys, nested values,
// strings holding brackets and quotes), and for what is not an answer.
func TestRelayAnswerMembers(t *testing.T) {
	for _, tt := range []struct {
		raw    string
		want   bool
		result string
	}{
		{`{"jsonrpc":"2.0","id":"mcp-confirm-relay-1","result":{"content":[{"type":"text","text":"a]}\"{["}]}}`, true, `{"content":[{"type":"text","text":"a]}\"{["}]}`},
		{"{ \"jsonrpc\" : \"2.0\" ,\n\t\"id\" : \"mcp-confirm-relay-2\" , \"result\" : [ 1 , { } , [ ] , \"x\" , null , true , -1.5e3 ] }", true, `[ 1 , { } , [ ] , "x" , null , true , -1.5e3 ]`},
		{`{"\u006asonrpc":"2.0","i\u0064":"mcp-confirm-relay-3","result":null}`, true, `null`},
		{`{"jsonrpc":"2.0","id":"mcp-confirm-relay-4","result":1,"extra":{"a":[1,2,{"b":"}"}]}}`, true, `1`},
		{`{"jsonrpc":"2.0","id":"mcp-confirm-relay-5","error":{"code":-32000,"message":"no"}}`, true, ``},
		{`{"jsonrpc":"2.0","id":"mcp-confirm-relay-6","result":{},"error":{"code":1,"message":"m"}}`, false, ``},
		{`{"jsonrpc":"2.0","id":"mcp-confirm-relay-7"}`, false, ``},
		{`{"jsonrpc":"2.0","id":7,"result":{}}`, false, ``},
		{`{"jsonrpc":"2.0","id":"other-1","result":{}}`, false, ``},
		{`{"jsonrpc":"2.0","id":"mcp-confirm-relay-","result":{}}`, false, ``},
		{`{"jsonrpc":"1.0","id":"mcp-confirm-relay-8","result":{}}`, false, ``},
		{`{"jsonrpc":"2.0","ID":"mcp-confirm-relay-9","result":{}}`, false, ``},
		{`{"jsonrpc":"2.0","id":"mcp-confirm-relay-10","Result":{}}`, false, ``},
		{`{"jsonrpc":"2.0","id":"mcp-confirm-relay-11","method":"x","result":{}}`, false, ``},
		{`{"jsonrpc":"2.0","id":"mcp-confirm-relay-12","result":{},"params":{}}`, false, ``},
		{`{"jsonrpc":"2.0","id":"mcp-confirm-relay-13","error":"not an error object"}`, false, ``},
		{`["jsonrpc"]`, false, ``},
		{`"mcp-confirm-relay-14"`, false, ``},
		{`{}`, false, ``},
	} {
		id, resp, ok := relayAnswer(json.RawMessage(tt.raw))
		if ok != tt.want {
			t.Errorf("%s: taken %v, want %v", tt.raw, ok, tt.want)
			continue
		}
		if !ok {
			continue
		}
		if resp.ID.Raw() != id || !strings.HasPrefix(id, callPrefix) {
			t.Errorf("%s: id %q, response id %v", tt.raw, id, resp.ID.Raw())
		}
		if string(resp.Result) != tt.result || (tt.result == "") != (resp.Error != nil) {
			t.Errorf("%s: result %s, error %v; want result %s", tt.raw, resp.Result, resp.Error, tt.result)
		}
	}
}

// FuzzRelayAnswer asserts that relayAnswer's scan of an upstream's message
// takes exactly the answers, and reads from each exactly the id, result
// and error, that a second decoder over the same bytes takes and reads
// (relayAnswerByDecoder: the relay's reading before the scan, json.Decoder
// token by token). Attack stopped: an upstream message spelt so that the
// relay takes it as the answer to its own call, or reads another result
// from it, where a decoder would not.
func FuzzRelayAnswer(f *testing.F) {
	for _, raw := range relayAnswerSeeds {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // the framing decoder hands over one valid JSON value only
		}
		if msg := answerAsDecoder(relayAnswer, raw); msg != "" {
			t.Fatal(msg)
		}
	})
}

// relayAnswerSeeds are answers, and messages that are not answers to the
// relay's calls, in the spellings a scan could read otherwise.
var relayAnswerSeeds = []string{
	`{"jsonrpc":"2.0","id":"mcp-confirm-relay-1","result":{"content":[{"type":"text","text":"a]}\"{["}]}}`,
	"{ \"jsonrpc\" : \"2.0\" ,\n\t\"id\" : \"mcp-confirm-relay-2\" , \"result\" : [ 1 , { } , [ ] , \"x\" , null , true , -1.5e3 ] }",
	`{"\u006asonrpc":"2.0","i\u0064":"mcp-confirm-relay-3","result":null}`,
	`{"jsonrpc":"2.0","id":"mcp-confirm-relay-5","error":{"code":-32000,"message":"no"}}`,
	`{"jsonrpc":"2.0","id":"mcp-confirm-relay-6","result":{},"error":{"code":1,"message":"m"}}`,
	`{"jsonrpc":"2.0","id":7,"result":{}}`,
	`{"jsonrpc":"2.0","ID":"mcp-confirm-relay-9","result":{}}`,
	`{"jsonrpc":"2.0","id":"mcp-confirm-relay-11","method":"x","result":{}}`,
	`{"jsonrpc":"2.0","id":"mcp-confirm-relay-12","id":"other","result":{}}`,
	`{"jsonrpc":"2.0","id":"other","id":"mcp-confirm-relay-13","result":{}}`,
	`{"jsonrpc":"2.0","id":1,"id":"mcp-confirm-relay-14","result":{}}`,
	`{"jsonrpc":"2.0","id":"mcp-confirm-relay-15","result":1,"result":2}`,
	`{"jsonrpc":"2.0","jsonrpc":"1.0","id":"mcp-confirm-relay-16","result":{}}`,
	`{"jsonrpc":"2.0","id":"mcp-confirm-relay-17","result":{"inputRequests":{"q":null}}}`,
	"{\"jsonrpc\":\"2.0\",\"id\":\"mcp-confirm-relay-\xff\",\"result\":{}}",
	`{"jsonrpc":"2.0","id":"mcp-confirm-relay-18","error":{"code":1,"message":"m","data":[1]}}`,
	`{"jsonrpc":"2.0","id":"mcp-confirm-relay-19","error":null}`,
	`[{"jsonrpc":"2.0","id":"mcp-confirm-relay-20","result":{}}]`,
}

// answerAsDecoder returns "" if read takes raw as relayAnswerByDecoder
// does, with the same id, result and error; otherwise how they differ. A
// result with a null input request, which the decoder refused on the spot
// and the scan leaves to decodeResult to refuse, counts as the same.
func answerAsDecoder(read func(json.RawMessage) (string, *jsonrpc.Response, bool), raw []byte) string {
	id, resp, ok := read(json.RawMessage(raw))
	wid, want, wok := relayAnswerByDecoder(json.RawMessage(raw))
	if ok != wok {
		return fmt.Sprintf("%q: taken %v, by a decoder %v", raw, ok, wok)
	}
	if !ok {
		return ""
	}
	if errors.Is(want.Error, errMalformedResult) && resp.Error == nil && nullInputRequest(resp.Result) {
		want = &jsonrpc.Response{ID: want.ID, Result: resp.Result}
	}
	g, _ := json.Marshal(resp.Error)
	w, _ := json.Marshal(want.Error)
	if id != wid || resp.ID != want.ID || string(resp.Result) != string(want.Result) || string(g) != string(w) {
		return fmt.Sprintf("%q:\n got  %q %v result %s error %s\n want %q %v result %s error %s", raw, id, resp.ID.Raw(), resp.Result, g, wid, want.ID.Raw(), want.Result, w)
	}
	return ""
}

// relayAnswerByDecoder is how the relay read an answer before it scanned
// the bytes (the reference FuzzRelayAnswer holds the scan to): json.Decoder
// token by token, keys matched exactly.
func relayAnswerByDecoder(raw json.RawMessage) (string, *jsonrpc.Response, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", nil, false
	}
	var (
		version, id    string
		haveID         bool
		result, errRaw json.RawMessage
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", nil, false
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "", nil, false
		}
		switch key {
		case "jsonrpc":
			if json.Unmarshal(v, &version) != nil {
				return "", nil, false
			}
		case "id":
			if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &id) != nil {
				return "", nil, false
			}
			haveID = true
		case "result":
			result = v
		case "error":
			errRaw = v
		case "method", "params":
			return "", nil, false
		}
	}
	if version != "2.0" || !haveID || len(id) <= len(callPrefix) || id[:len(callPrefix)] != callPrefix ||
		(result == nil) == (errRaw == nil) {
		return "", nil, false
	}
	jid, err := jsonrpc.MakeID(id)
	if err != nil {
		return "", nil, false
	}
	resp := &jsonrpc.Response{ID: jid}
	switch {
	case errRaw != nil:
		var werr jsonrpc.Error
		if json.Unmarshal(errRaw, &werr) != nil {
			return "", nil, false
		}
		resp.Error = &werr
	case nullInputRequest(result):
		resp.Error = errMalformedResult
	default:
		resp.Result = result
	}
	return id, resp, true
}

// TestAnswerAsDecoderCatchesWrongScan is the negative control of the
// comparison FuzzRelayAnswer makes: a scan that reads keys in any case
// (here, of the message lowered) must differ from the decoder on the seeds.
func TestAnswerAsDecoderCatchesWrongScan(t *testing.T) {
	caseless := func(raw json.RawMessage) (string, *jsonrpc.Response, bool) {
		return relayAnswer(bytes.ToLower(raw))
	}
	if msg := answerAsDecoder(caseless, []byte(`{"jsonrpc":"2.0","ID":"mcp-confirm-relay-9","result":{}}`)); msg == "" {
		t.Fatal(`the comparison missed a scan that reads "ID" as "id"`)
	}
	for _, raw := range relayAnswerSeeds {
		if msg := answerAsDecoder(relayAnswer, []byte(raw)); msg != "" {
			t.Error(msg)
		}
	}
}
