package relay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The guard stands between an upstream and go-sdk's decoder, for results
// that decoder cannot take: go-sdk v1.8.0 dereferences a null member of a
// result's inputRequests (InputRequestMap.UnmarshalJSON), so one line from
// an upstream would crash the proxy. Such a response becomes a JSON-RPC
// error before go-sdk decodes it. For a streamable HTTP upstream the guard
// reads the HTTP bodies (JSON, or server-sent events); for any other
// transport, the connection's messages.

// errMalformedResult is what the guarded response becomes.
var errMalformedResult = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the upstream's result is malformed: an input request is null"}

// guard returns t with the guard in front of its decoder.
func guard(t mcp.Transport) mcp.Transport {
	// go-sdk's streamable and SSE client connections have methods of
	// go-sdk's own, which a wrapper would hide: guard their HTTP responses
	// instead.
	switch ht := t.(type) {
	case *mcp.StreamableClientTransport:
		cp := *ht
		cp.HTTPClient = guardedClient(ht.HTTPClient)
		return &cp
	case *mcp.SSEClientTransport:
		cp := *ht
		cp.HTTPClient = guardedClient(ht.HTTPClient)
		return &cp
	}
	return guardedTransport{t}
}

// guardedClient returns a copy of hc (nil: http.DefaultClient) whose
// responses are guarded.
func guardedClient(hc *http.Client) *http.Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	cp := *hc
	next := cp.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	cp.Transport = guardedRoundTripper{next}
	return &cp
}

// nullInputRequest reports whether a result (raw JSON) has an inputRequests
// member that is null. encoding/json merges duplicate keys, and matches
// them regardless of case, so it sees every member any spelling adds.
func nullInputRequest(result []byte) bool {
	var r struct {
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
	}
	if json.Unmarshal(result, &r) != nil {
		return false // go-sdk's decoder refuses it too, without crashing
	}
	for _, v := range r.InputRequests {
		if v == nil || string(bytes.TrimSpace(v)) == "null" {
			return true
		}
	}
	return false
}

// guardMessage returns the message go-sdk may decode in place of raw (a
// JSON-RPC message, or a batch of them): raw itself, or, for a response
// whose result has a null input request, an error response with its id.
func guardMessage(raw []byte) []byte {
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(t, &batch) != nil {
			return raw
		}
		changed := false
		for i, m := range batch {
			if g := guardMessage(m); !bytes.Equal(g, m) {
				batch[i], changed = g, true
			}
		}
		if !changed {
			return raw
		}
		b, err := json.Marshal(batch)
		if err != nil {
			return raw
		}
		return b
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(raw, &m) != nil || m.Result == nil || !nullInputRequest(m.Result) {
		return raw
	}
	msg, err := jsonrpc.DecodeMessage(raw)
	if err != nil {
		return raw // not a message go-sdk takes
	}
	r, ok := msg.(*jsonrpc.Response)
	if !ok {
		return raw
	}
	b, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: r.ID, Error: errMalformedResult})
	if err != nil {
		return raw
	}
	return b
}

// guardedTransport guards the messages of a connection.
type guardedTransport struct{ mcp.Transport }

func (t guardedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return guardedConn{c}, nil
}

type guardedConn struct{ mcp.Connection }

func (c guardedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if r, ok := msg.(*jsonrpc.Response); ok && err == nil && r.Result != nil && nullInputRequest(r.Result) {
		return &jsonrpc.Response{ID: r.ID, Error: errMalformedResult}, nil
	}
	return msg, err
}

// guardedRoundTripper guards the bodies of a streamable HTTP upstream's
// responses: a JSON body whole, an event stream event by event.
type guardedRoundTripper struct{ next http.RoundTripper }

func (g guardedRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := g.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			resp.Body = io.NopCloser(errReader{err})
			return resp, nil
		}
		body = guardMessage(body)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Del("Content-Length")
	case "text/event-stream":
		body := resp.Body
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(guardEvents(body, pw)) }()
		resp.Body = guardedBody{pr, body}
	}
	return resp, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// guardedBody is the guarded stream; closing it closes the upstream's.
type guardedBody struct {
	*io.PipeReader
	upstream io.Closer
}

func (b guardedBody) Close() error {
	b.PipeReader.Close()
	return b.upstream.Close()
}

// maxEventBytes bounds one event the guard holds, as go-sdk bounds it by
// default (mcp.DefaultMaxEventSize).
const maxEventBytes = mcp.DefaultMaxEventSize

var errEventTooLarge = errors.New("relay: an upstream event is larger than the limit")

// guardEvents copies a server-sent event stream from r to w, every line as
// it was but the data lines: an event's data, joined as go-sdk joins it,
// is guarded and written as data lines at the event's end.
func guardEvents(r io.Reader, w io.Writer) error {
	br := bufio.NewReader(r)
	var (
		data    [][]byte // the event's data lines, each trimmed as go-sdk trims it
		hasData bool
		size    int
	)
	flush := func() error {
		if !hasData {
			return nil
		}
		var b bytes.Buffer
		for l := range bytes.SplitSeq(guardMessage(bytes.Join(data, []byte("\n"))), []byte("\n")) {
			b.WriteString("data: ")
			b.Write(l)
			b.WriteByte('\n')
		}
		data, hasData, size = nil, false, 0
		_, err := w.Write(b.Bytes())
		return err
	}
	for {
		line, err := br.ReadBytes('\n')
		if size += len(line); size > maxEventBytes {
			return errEventTooLarge
		}
		trimmed := bytes.TrimRight(line, "\r\n")
		if key, value, ok := bytes.Cut(trimmed, []byte(":")); ok && string(key) == "data" {
			data, hasData = append(data, bytes.TrimSpace(value)), true
		} else if len(line) > 0 {
			if len(trimmed) == 0 { // the event ends
				if ferr := flush(); ferr != nil {
					return ferr
				}
				size = 0
			}
			if _, werr := w.Write(line); werr != nil {
				return werr
			}
		}
		if err != nil {
			if ferr := flush(); ferr != nil {
				return ferr
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
