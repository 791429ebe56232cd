package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// decodeResultSeeds are results of every shape decodeResult reads itself
// or leaves to go-sdk, and the spellings where a scan could part from
// go-sdk's decoding: case, duplicate keys, escapes, invalid UTF-8, nulls.
var decodeResultSeeds = []string{
	`{"content":[{"type":"text","text":"hello"}]}`,
	`{"content":[{"type":"text","text":""}],"isError":true}`,
	`{"content":[{"type":"text","text":"a","_meta":{"k":1},"annotations":{"audience":["user"],"priority":0.5}},{"type":"text","text":"b"}]}`,
	`{"_meta":{"x":"y","io.modelcontextprotocol/serverInfo":{"name":"u"}},"content":[],"structuredContent":{"n":1.5,"l":[1,"two",null]}}`,
	`{"content":[{"type":"text","text":"t"}],"resultType":"complete","ttlMs":5}`,
	`{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"}]}`,
	`{"content":[{"type":"text","text":"t"},{"type":"resource_link","uri":"file:///a","name":"a"}]}`,
	`{"content":[{"type":"text","text":"t","unknown":1}]}`,
	`{"content":[{"type":"text","text":"t","data":"aGk=","mimeType":"image/png"}]}`,
	`{"content":[{"type":"text","text":1}]}`,
	`{"content":[{"type":"image","text":"t","data":"aGk=","mimeType":"image/png"}]}`,
	`{"content":[{"type":"text"}]}`,
	`{"content":null}`,
	`{}`,
	`{"resultType":"input_required","inputRequests":{"q":{"method":"elicitation/create","params":{"message":"ok?","requestedSchema":{"type":"object"}}}},"requestState":"s"}`,
	`{"content":[{"type":"text","text":"t"}],"requestState":"s","inputRequests":null}`,
	// What scanTextResult reads, and what it must leave to the rest.
	"{ \"content\" : [ { \"type\" : \"text\" , \"text\" : \"a \\\"q\\\" \\u00e9 \\n ]}\" } , {\"text\":\"b\",\"type\":\"text\"} ] ,\n\"isError\" : false , \"resultType\":\"complete\" }",
	"{\"content\":[{\"type\":\"text\",\"text\":\"bad \xff\xfe utf-8\"}],\"requestState\":\"s\\u0041\"}",
	`{"content":[],"isError":true}`,
	`{"Content":[{"type":"text","text":"case"}]}`,
	`{"content":[{"Type":"text","text":"case"}]}`,
	`{"content":[{"type":"text","TEXT":"case"}]}`,
	`{"content":[{"type":"text","text":"first"}],"content":[{"type":"text","text":"second"}]}`,
	`{"content":[{"type":"text","text":"first","text":"second"}]}`,
	`{"content":[{"type":"text","text":"t"}],"isError":null}`,
	`{"content":[{"type":"text","text":"t"}],"isError":true,"isError":false}`,
	`{"content":[{"type":"text","text":"t"}],"isError":1}`,
	`{"content":[{"type":"text","text":"t"}],"isError":"true"}`,
	`{"content":[{"type":"text","text":"t"}],"requestState":null}`,
	`{"content":[{"type":"text","text":"t"}],"_meta":{"k":"v"}}`,
	`{"content":[{"type":"text","text":"t"}],"structuredContent":{"k":[1,{"a":"]"}]}}`,
	`{"content":[{"type":"text","text":"t"}],"inputRequests":{"q":{"method":"elicitation/create","params":{"message":"m"}}}}`,
	`{"content":{"type":"text","text":"not an array"}}`,
	`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"u","version":"1"},"k":{"n":[1,2]},"io.modelcontextprotocol/x":1},"content":[{"type":"text","text":"t"}]}`,
	`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"u"}},"content":[{"type":"text","text":"t"}]}`,
	`{"_meta":null,"content":[{"type":"text","text":"t"}]}`,
	`{"_meta":{"k":1,"k":2},"content":[{"type":"text","text":"t"}]}`,
	`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"u"}},"content":[{"type":"image","data":"aGk=","mimeType":"image/png"}]}`,
	`{"content":["text"]}`,
}

// asGoSDK returns "" if decodeResult reads raw as go-sdk's client would:
// both refuse it, or the wire form of the relay's fresh copy of its result
// equals that of go-sdk's own decoding of the same bytes (less the
// protocol's own _meta keys, which the relay leaves out of every result).
// Otherwise it says how they differ.
func asGoSDK(decode func(json.RawMessage) (*mcp.CallToolResult, error), raw []byte) string {
	got, err := decode(json.RawMessage(raw))
	if nullInputRequest(raw) {
		// go-sdk's decoding crashes on it; the relay must refuse it.
		if err == nil {
			return fmt.Sprintf("%q: a null input request read as a result", raw)
		}
		return ""
	}
	var want mcp.CallToolResult
	werr := json.Unmarshal(raw, &want)
	if (err != nil) != (werr != nil) {
		return fmt.Sprintf("%q: err %v, go-sdk's %v", raw, err, werr)
	}
	if err != nil {
		return ""
	}
	wf := fresh(&want)
	wf.Meta = withoutProtocolKeys(wf.Meta)
	g, gerr := json.Marshal(fresh(got))
	w, werr := json.Marshal(wf)
	if string(g) != string(w) || (gerr != nil) != (werr != nil) {
		return fmt.Sprintf("%q:\n got  %s (%v)\n want %s (%v)", raw, g, gerr, w, werr)
	}
	return ""
}

// decodeResult returns what go-sdk's client would have, for text results
// read cheaply and for everything it leaves to go-sdk.
func TestDecodeResultAsGoSDK(t *testing.T) {
	for _, raw := range decodeResultSeeds {
		if msg := asGoSDK(decodeResult, []byte(raw)); msg != "" {
			t.Error(msg)
		}
	}
	// The control: the comparison sees a difference in one character.
	a, _ := decodeResult(json.RawMessage(`{"content":[{"type":"text","text":"hello"}]}`))
	var b mcp.CallToolResult
	json.Unmarshal([]byte(`{"content":[{"type":"text","text":"hellO"}]}`), &b)
	if x, y := mustJSON(t, a), mustJSON(t, &b); x == y {
		t.Fatalf("two different results marshal alike: %s", x)
	}
}

// FuzzDecodeResult asserts that decodeResult reads any result an upstream
// may send (one valid JSON value, as the framing decoder hands it over)
// as go-sdk's client would: the same refusal, or the same result. Attack
// stopped: an upstream spelling a result so that the relay's scan (and so
// the outcome it records) reads other than the client that shows it.
func FuzzDecodeResult(f *testing.F) {
	for _, raw := range decodeResultSeeds {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		if msg := asGoSDK(decodeResult, raw); msg != "" {
			t.Fatal(msg)
		}
	})
}

// TestAsGoSDKCatchesWrongDecoder is the negative control of the comparison
// FuzzDecodeResult makes: a decoder that reads text results through a
// mirror struct, as the relay once did (encoding/json matches keys in any
// case and takes the last of duplicates, go-sdk matches them exactly),
// must differ from go-sdk's on the seeds.
func TestAsGoSDKCatchesWrongDecoder(t *testing.T) {
	mirror := func(raw json.RawMessage) (*mcp.CallToolResult, error) {
		var m struct {
			Content []struct{ Type, Text string }
			IsError bool
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		res := &mcp.CallToolResult{IsError: m.IsError, Content: []mcp.Content{}}
		for _, c := range m.Content {
			res.Content = append(res.Content, &mcp.TextContent{Text: c.Text})
		}
		return res, nil
	}
	caught := 0
	for _, raw := range decodeResultSeeds {
		if asGoSDK(mirror, []byte(raw)) != "" {
			caught++
		}
	}
	if caught == 0 {
		t.Fatal("a decoder that matches keys in any case read every seed as go-sdk does")
	}
	if msg := asGoSDK(mirror, []byte(`{"Content":[{"type":"text","text":"case"}]}`)); msg == "" {
		t.Fatal(`the comparison missed a decoder that reads "Content" as "content"`)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// scanTextResult reads the commonest results itself (or the relay would
// decode them twice as slowly, and nothing would say so).
func TestScanTextResultTakes(t *testing.T) {
	for _, raw := range []string{
		`{"content":[{"type":"text","text":"hello"}]}`,
		`{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"isError":true,"resultType":"complete"}`,
		`{"resultType":"complete","content":[]}`,
		`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"u","version":"1"}},"content":[{"type":"text","text":"t"}],"resultType":"complete"}`,
	} {
		if _, ok := scanTextResult([]byte(raw)); !ok {
			t.Errorf("%s: left to encoding/json", raw)
		}
	}
}

// appendCall writes what encoding/json writes for the same call (as JSON
// values: appendCall keeps the arguments' bytes), with the _meta members
// of the defaults whose key the call's own _meta lacks, and refuses
// arguments that are not one JSON value: such bytes could add members of
// their own to the request the upstream reads, another tool's name among
// them.
func TestAppendCall(t *testing.T) {
	yes := mcp.InputResponseMap{"q": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}}
	defaults := mcp.Meta{
		mcp.MetaKeyClientCapabilities: declaredMeta(&mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}),
		mcp.MetaKeyClientInfo:         &mcp.Implementation{Name: "relay <&>", Version: "1"},
		mcp.MetaKeyProtocolVersion:    "2026-07-28",
	}
	encoded, err := encodeMeta(defaults)
	if err != nil || len(encoded) != len(defaults) {
		t.Fatalf("encodeMeta: %d members of %d, %v", len(encoded), len(defaults), err)
	}
	for _, tt := range []struct {
		name      string
		meta      mcp.Meta
		modern    bool // the connection's defaults apply
		tool      string
		args      string
		state     string
		responses mcp.InputResponseMap
	}{
		{"bare", nil, false, "echo", `{}`, "", nil},
		{"meta", mcp.Meta{"progressToken": "t-1", "k": map[string]any{"n": 1.5}}, false, "write", `{"path":"/tmp/a<b>&c","n":[1,2.5e3,null]}`, "", nil},
		{"escapes", nil, false, "na\"me\u2028<x>", `{"s":"\u2028 \\ \"q\""}`, "st\"ate<>", nil},
		{"rounds", mcp.Meta{}, false, "write", ` { "a" : 1 } `, "opaque.state", yes},
		{"defaults", nil, true, "echo", `{}`, "", nil},
		{"defaults and meta", mcp.Meta{"progressToken": 7.0, "traceparent": "00-x"}, true, "echo", `{"a":1}`, "", nil},
		{"meta over defaults", mcp.Meta{mcp.MetaKeyClientCapabilities: map[string]any{}, "traceparent": "00-y"}, true, "echo", `{}`, "s", yes},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var d []metaMember
			meta := tt.meta
			if tt.modern {
				d = encoded
				meta = maps.Clone(tt.meta)
				if meta == nil {
					meta = mcp.Meta{}
				}
				for k, v := range defaults {
					if _, ok := meta[k]; !ok {
						meta[k] = v
					}
				}
			}
			got, err := appendCall(nil, tt.meta, d, tt.tool, json.RawMessage(tt.args), tt.state, tt.responses)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(&mcp.CallToolParams{Meta: meta, Name: tt.tool, Arguments: json.RawMessage(tt.args), InputResponses: tt.responses, RequestState: tt.state})
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("appendCall wrote invalid JSON %s: %v", got, err)
			}
			if err := json.Unmarshal(want, &w); err != nil {
				t.Fatal(err)
			}
			if mustJSON(t, g) != mustJSON(t, w) {
				t.Fatalf("appendCall wrote\n%s\nencoding/json writes\n%s", got, want)
			}
		})
	}
	for _, args := range []string{``, `{}, "name":"delete"`, `{"a":1}{"b":2}`, `{"a":`, `{"a":1}, "requestState":"x"`} {
		if b, err := appendCall(nil, nil, encoded, "write", json.RawMessage(args), "", nil); err == nil {
			t.Errorf("arguments %q: wrote %s, want an error", args, b)
		}
	}
	// A _meta value JSON cannot hold is an error, as encoding/json's.
	if b, err := appendCall(nil, mcp.Meta{"k": math.Inf(1)}, encoded, "write", json.RawMessage(`{}`), "", nil); err == nil {
		t.Errorf("an infinite _meta value: wrote %s, want an error", b)
	}
}

// lineCapture is the peer end of a lineConn in TestMuxWritesAsGoSDK: it
// keeps what was written.
type lineCapture struct{ bytes.Buffer }

func (*lineCapture) Close() error { return nil }

// The mux writes its calls on a newline-delimited connection itself, as
// one line holding the message go-sdk's encoding writes (as JSON values:
// the arguments keep their bytes); a call whose arguments hold a line
// break goes through go-sdk's encoding, which writes one line.
func TestMuxWritesAsGoSDK(t *testing.T) {
	for _, tt := range []struct {
		args string
		self bool // the mux writes the line itself
	}{
		{`{}`, true},
		{`{"path":"/tmp/a<b>&c","n":[1,2.5e3,null],"s":"\u2028 \\ \"q\""}`, true},
		{` { "a" : 1 } `, true},
		{"{\n  \"a\": [1,\r\n 2]\n}", false},
		{"{\"a\":\r1}", false},
	} {
		params, err := appendCall(nil, mcp.Meta{"progressToken": "t-1"}, nil, "write", json.RawMessage(tt.args), "st", nil)
		if err != nil {
			t.Fatal(err)
		}
		var ours, sdks, ref lineCapture
		m := &mux{inner: &lineConn{rwc: &sdks}, line: &lineConn{rwc: &ours}}
		id := callPrefix + "17"
		jid, err := jsonrpc.MakeID(id)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.write(context.Background(), id, jid, "tools/call", params); err != nil {
			t.Fatal(err)
		}
		if (ours.Len() > 0) != tt.self || (sdks.Len() > 0) == tt.self {
			t.Fatalf("arguments %q: the mux wrote %d bytes, go-sdk's encoding %d", tt.args, ours.Len(), sdks.Len())
		}
		got := append(ours.Bytes(), sdks.Bytes()...)
		req := &jsonrpc.Request{ID: jid, Method: "tools/call", Params: params}
		if err := (&lineConn{rwc: &ref}).Write(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		want := ref.Bytes()
		if i := bytes.IndexAny(got, "\r\n"); i != len(got)-1 || got[i] != '\n' {
			t.Fatalf("arguments %q: wrote %q, want one line", tt.args, got)
		}
		g, err := jsonrpc.DecodeMessage(got)
		if err != nil {
			t.Fatalf("arguments %q: go-sdk cannot read %q: %v", tt.args, got, err)
		}
		w, err := jsonrpc.DecodeMessage(want)
		if err != nil {
			t.Fatal(err)
		}
		gr, wr := g.(*jsonrpc.Request), w.(*jsonrpc.Request)
		var gp, wp any
		if err := json.Unmarshal(gr.Params, &gp); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(wr.Params, &wp); err != nil {
			t.Fatal(err)
		}
		if gr.ID != wr.ID || gr.Method != wr.Method || mustJSON(t, gp) != mustJSON(t, wp) {
			t.Fatalf("arguments %q: wrote\n%s\ngo-sdk writes\n%s", tt.args, got, want)
		}
	}
}
