package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The relay sends tools/call upstream itself, beside the go-sdk client
// session on the same connection, and keeps the result's bytes as they came:
// go-sdk decodes a result three times on its way to the caller (the message,
// the call's result, the content), each with a fresh 32 KiB buffer, and a
// pass-through is most of what the relay does. Everything else on the
// connection (initialization, lists, notifications, the upstream's own
// requests) stays go-sdk's.

// errConnClosed reports that the upstream connection ended before the
// answer to a call came: the call may or may not have been acted on.
var errConnClosed = errors.New("relay: the upstream connection closed")

// cancelNoticeTimeout bounds sending notifications/cancelled for a call
// whose caller gave up.
const cancelNoticeTimeout = 5 * time.Second

// callPrefix starts the ids of the calls the relay sends itself: strings,
// where go-sdk's are numbers, so the two never meet.
const callPrefix = "mcp-confirm-relay-"

// A mux is a connection to the upstream shared by a go-sdk client session
// and the relay's own calls: it hands the session every message but the
// answers to the relay's calls, which it delivers to their callers.
type mux struct {
	inner mcp.Connection
	next  atomic.Uint64

	// line, if set, is the newline-delimited connection under inner:
	// the mux writes its calls on it as lines it encodes itself.
	line *lineConn

	mu      sync.Mutex
	waiting map[string]chan *jsonrpc.Response
	err     error // set once the connection failed or closed
}

// muxTransport connects through inner and puts a mux on the connection.
type muxTransport struct {
	inner mcp.Transport
	mux   *mux // set by Connect
}

// muxable reports whether the relay may put a mux on t's connections.
// go-sdk's streamable and SSE client connections must be handed to go-sdk
// as they are (it tells them the session's protocol version through a
// method of theirs that a wrapper cannot have).
func muxable(t mcp.Transport) bool {
	switch t.(type) {
	case *mcp.StreamableClientTransport, *mcp.SSEClientTransport:
		return false
	}
	return true
}

func (t *muxTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.mux = &mux{inner: c, waiting: map[string]chan *jsonrpc.Response{}}
	if g, ok := c.(guardedConn); ok {
		if lc, ok := g.Connection.(*lineConn); ok {
			// The relay's own connection hands over the answers to its
			// calls as it reads them (lines.go), guarded as guardedConn
			// guards the rest.
			lc.answer = t.mux.deliver
			t.mux.line = lc
		}
	}
	return t.mux, nil
}

// deliver gives resp, the answer to the relay's call id, to its caller; an
// answer to no call in flight is dropped. It reports that resp was taken.
func (m *mux) deliver(id string, resp *jsonrpc.Response) bool {
	m.mu.Lock()
	ch := m.waiting[id]
	delete(m.waiting, id)
	m.mu.Unlock()
	if ch != nil {
		ch <- resp // buffered: never blocks
	}
	return true
}

// Read returns the next message for the go-sdk session: it delivers the
// answers to the relay's own calls on the way.
func (m *mux) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := m.inner.Read(ctx)
		if err != nil {
			m.fail(err)
			return nil, err
		}
		if resp, ok := msg.(*jsonrpc.Response); ok {
			if id, ok := resp.ID.Raw().(string); ok && len(id) > len(callPrefix) && id[:len(callPrefix)] == callPrefix {
				// An answer to no call in flight (late, after its
				// caller gave up, or made up) is dropped.
				m.deliver(id, resp)
				continue
			}
		}
		return msg, nil
	}
}

func (m *mux) Write(ctx context.Context, msg jsonrpc.Message) error { return m.inner.Write(ctx, msg) }

func (m *mux) Close() error {
	m.fail(errConnClosed)
	return m.inner.Close()
}

func (m *mux) SessionID() string { return m.inner.SessionID() }

// fail ends every call in flight: the connection is gone.
func (m *mux) fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err == nil {
		m.err = fmt.Errorf("%w: %v", errConnClosed, err)
	}
	for id, ch := range m.waiting {
		close(ch)
		delete(m.waiting, id)
	}
}

// call sends one request and returns the result's bytes, or the upstream's
// error as a *jsonrpc.Error. If ctx ends first, the upstream is told the
// request was cancelled, as go-sdk's client tells it.
func (m *mux) call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	id := callPrefix + strconv.FormatUint(m.next.Add(1), 10)
	jid, err := jsonrpc.MakeID(id)
	if err != nil {
		return nil, err
	}
	ch := make(chan *jsonrpc.Response, 1)
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		return nil, m.err
	}
	m.waiting[id] = ch
	m.mu.Unlock()
	if err := m.write(ctx, id, jid, method, params); err != nil {
		m.mu.Lock()
		delete(m.waiting, id)
		m.mu.Unlock()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %v", errConnClosed, err)
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			m.mu.Lock()
			err := m.err
			m.mu.Unlock()
			return nil, err
		}
		if resp.Error != nil {
			var werr *jsonrpc.Error
			if errors.As(resp.Error, &werr) {
				return nil, werr
			}
			return nil, resp.Error
		}
		return resp.Result, nil
	case <-ctx.Done():
		m.mu.Lock()
		delete(m.waiting, id)
		m.mu.Unlock()
		note, _ := json.Marshal(&mcp.CancelledParams{RequestID: id, Reason: ctx.Err().Error()})
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelNoticeTimeout)
		defer cancel()
		m.inner.Write(wctx, &jsonrpc.Request{Method: "notifications/cancelled", Params: note})
		return nil, ctx.Err()
	}
}

// write sends the request id (jid as go-sdk holds it) of method with
// params. On a newline-delimited connection it writes the line as go-sdk
// encodes it, without encoding/json: the id and method are ASCII the relay
// chose, without quotes or escapes, and params are one JSON value the
// caller built (appendCall), which go-sdk's encoding would only scan and
// copy once more. Params with a line break (whitespace between tokens:
// JSON strings hold none) go through go-sdk's encoding, which removes it:
// a message must be one line.
func (m *mux) write(ctx context.Context, id string, jid jsonrpc.ID, method string, params json.RawMessage) error {
	if m.line == nil || bytes.IndexByte(params, '\n') >= 0 || bytes.IndexByte(params, '\r') >= 0 {
		return m.inner.Write(ctx, &jsonrpc.Request{ID: jid, Method: method, Params: params})
	}
	line := make([]byte, 0, len(`{"jsonrpc":"2.0","id":"","method":"","params":}`)+len(id)+len(method)+len(params)+1)
	line = append(append(line, `{"jsonrpc":"2.0","id":"`...), id...)
	line = append(append(line, `","method":"`...), method...)
	line = append(append(line, `","params":`...), params...)
	return m.line.writeLine(ctx, append(line, '}', '\n'))
}

// decodeResult decodes a tools/call result: text content by a scan of its
// bytes, anything else (other content, input requests) by go-sdk, so that
// the result is what go-sdk's client would have returned, fresh: without
// the upstream hop's result type and the protocol's own _meta keys, which
// describe that hop (the relay leaves them out of every result).
func decodeResult(raw json.RawMessage) (*mcp.CallToolResult, error) {
	if res, ok := scanTextResult(raw); ok {
		return res, nil
	}
	if nullInputRequest(raw) {
		// As guard.go refuses it on go-sdk's own messages: go-sdk's
		// decoding would crash on it.
		return nil, errMalformedResult
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("relay: the upstream's tools/call result: %w", err)
	}
	out := fresh(&res)
	out.Meta = withoutProtocolKeys(out.Meta)
	return out, nil
}

// scanTextResult reads the commonest result, text content only, by a scan
// of raw's bytes (one valid JSON value: the decoder that framed the
// message has validated it): content whose items hold a type, "text", a
// text and perhaps _meta; perhaps isError, requestState, _meta and
// structuredContent (their values decoded by encoding/json, as go-sdk's
// client decodes them into maps and any; the protocol's own _meta keys
// left out: scanMeta). Keys are matched exactly, as go-sdk matches them,
// and each once; anything else it leaves to go-sdk.
func scanTextResult(raw []byte) (*mcp.CallToolResult, bool) {
	res := &mcp.CallToolResult{}
	var seen [5]bool
	once := func(i int) bool {
		ok := !seen[i]
		seen[i] = true
		return ok
	}
	ok := members(raw, func(k, v []byte) bool {
		switch string(k) {
		case `"content"`:
			if !once(0) || v[0] != '[' {
				return false
			}
			res.Content = []mcp.Content{}
			return elements(v, func(item []byte) bool {
				c, ok := scanText(item)
				if ok {
					res.Content = append(res.Content, c)
				}
				return ok
			})
		case `"isError"`:
			res.IsError = string(v) == "true"
			return once(1) && (res.IsError || string(v) == "false")
		case `"requestState"`:
			var ok bool
			res.RequestState, ok = unquote(v)
			return once(2) && ok
		case `"_meta"`:
			var ok bool
			res.Meta, ok = scanMeta(v)
			return once(3) && ok
		case `"structuredContent"`:
			return once(4) && json.Unmarshal(v, &res.StructuredContent) == nil
		case `"resultType"`:
			return true // the upstream hop's
		}
		return false
	})
	return res, ok && seen[0]
}

// scanMeta decodes a result's _meta as go-sdk's client does, but for the
// protocol's own keys, which describe the upstream's hop and which the
// relay leaves out of every result it returns (Relay.middleware): they are
// not decoded at all.
func scanMeta(v []byte) (mcp.Meta, bool) {
	if string(v) == "null" {
		return nil, true
	}
	var m mcp.Meta
	ok := members(v, func(k, v []byte) bool {
		key, ok := unquote(k)
		if !ok {
			return false
		}
		if strings.HasPrefix(key, metaPrefix) {
			return true
		}
		var x any
		if json.Unmarshal(v, &x) != nil {
			return false
		}
		if m == nil {
			m = mcp.Meta{}
		}
		m[key] = x
		return true
	})
	return m, ok
}

// scanText reads a content item that holds exactly a type, "text", a
// text, and perhaps _meta.
func scanText(item []byte) (*mcp.TextContent, bool) {
	c := &mcp.TextContent{}
	var typed, texted, meta bool
	ok := members(item, func(k, v []byte) bool {
		switch string(k) {
		case `"type"`:
			if typed || string(v) != `"text"` {
				return false
			}
			typed = true
			return true
		case `"text"`:
			if texted {
				return false
			}
			var ok bool
			c.Text, ok = unquote(v)
			texted = true
			return ok
		case `"_meta"`:
			if meta {
				return false
			}
			meta = true
			return json.Unmarshal(v, &c.Meta) == nil
		}
		return false
	})
	return c, ok && typed && texted
}

// callTool sends one tools/call through the mux (see the top of this file)
// and decodes its result.
func (c *conn) callTool(ctx context.Context, meta mcp.Meta, name string, args json.RawMessage, state string, responses mcp.InputResponseMap) (*mcp.CallToolResult, error) {
	var defaults []metaMember
	if c.modern() {
		var err error
		if defaults, err = c.requestMeta(); err != nil {
			return nil, err
		}
	}
	params, err := appendCall(nil, meta, defaults, name, args, state, responses)
	if err != nil {
		return nil, err
	}
	raw, err := c.mux.call(ctx, "tools/call", params)
	if err != nil {
		return nil, err
	}
	return decodeResult(raw)
}

// appendCall appends to b the params of a tools/call, as encoding/json
// would write mcp.CallToolParams's, with meta's members and those of
// defaults whose key meta lacks in its _meta; and with the arguments as
// they are: encoding/json would scan and copy them again (HTML-escaped) on
// every call, a second pass over what the client sent. They must still be
// one JSON value, or they could add members of their own to the request
// the upstream reads (another tool's name): that is checked here, whoever
// the caller is.
func appendCall(b []byte, meta mcp.Meta, defaults []metaMember, name string, args json.RawMessage, state string, responses mcp.InputResponseMap) ([]byte, error) {
	if !json.Valid(args) {
		return nil, fmt.Errorf("relay: the arguments of %q are not one JSON value", name)
	}
	b = append(b, '{')
	if len(meta) > 0 || len(defaults) > 0 {
		var err error
		if b, err = appendMeta(append(b, `"_meta":`...), meta, defaults); err != nil {
			return nil, err
		}
		b = append(b, ',')
	}
	n, err := json.Marshal(name)
	if err != nil {
		return nil, err
	}
	b = append(append(b, `"name":`...), n...)
	b = append(append(b, `,"arguments":`...), args...)
	if len(responses) > 0 {
		r, err := json.Marshal(responses)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"inputResponses":`...), r...)
	}
	if state != "" {
		st, err := json.Marshal(state)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"requestState":`...), st...)
	}
	return append(b, '}'), nil
}

// A metaMember is one member of a request's _meta, encoded.
type metaMember struct {
	key     string
	encoded []byte // "key":value
}

// appendMeta appends the _meta object of appendCall: meta's members, then
// those of defaults whose key meta lacks.
func appendMeta(b []byte, meta mcp.Meta, defaults []metaMember) ([]byte, error) {
	own, err := encodeMeta(meta)
	if err != nil {
		return nil, err
	}
	b = append(b, '{')
	for i, m := range own {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m.encoded...)
	}
	n := len(own)
	for _, d := range defaults {
		if _, ok := meta[d.key]; ok {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, d.encoded...)
	}
	return append(b, '}'), nil
}

// declaredMeta returns the capabilities declared, as go-sdk's client writes
// them in each request's _meta in the 2026-07-28 era; computed once per
// connection, and only read after.
func declaredMeta(d *mcp.ClientCapabilities) map[string]any {
	caps := map[string]any{}
	if d == nil {
		return caps
	}
	if d.Elicitation != nil {
		caps["elicitation"] = d.Elicitation
	}
	//lint:ignore SA1019 sampling (deprecated by SEP-2577) is still relayed to the older-era client that declared it
	if d.Sampling != nil {
		//lint:ignore SA1019 sampling (deprecated by SEP-2577) is still relayed to the older-era client that declared it
		caps["sampling"] = d.Sampling
	}
	//lint:ignore SA1019 roots (deprecated by SEP-2577) are still relayed for the older-era client that declared them
	if d.RootsV2 != nil {
		//lint:ignore SA1019 roots (deprecated by SEP-2577) are still relayed for the older-era client that declared them
		caps["roots"] = d.RootsV2
	}
	return caps
}

// requestMeta returns what go-sdk's client adds to the _meta of each
// request of the 2026-07-28 era, where the request's own _meta lacks it:
// the protocol version, the relay's clientInfo and the capabilities this
// connection declared. They are the same for every call on the
// connection, and encoded once (encoding/json took a few per cent of a
// pass-through's CPU encoding them again on each call).
func (c *conn) requestMeta() ([]metaMember, error) {
	c.metaOnce.Do(func() {
		c.metaDefaults, c.metaErr = encodeMeta(mcp.Meta{
			mcp.MetaKeyClientCapabilities: c.capsMeta,
			mcp.MetaKeyClientInfo:         c.r.opts.Implementation,
			mcp.MetaKeyProtocolVersion:    c.cs.InitializeResult().ProtocolVersion,
		})
	})
	return c.metaDefaults, c.metaErr
}

// encodeMeta returns m's members, encoded, in the order of their keys.
func encodeMeta(m mcp.Meta) ([]metaMember, error) {
	out := make([]metaMember, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		vb, err := json.Marshal(m[k])
		if err != nil {
			return nil, fmt.Errorf("relay: _meta %q: %w", k, err)
		}
		out = append(out, metaMember{k, append(append(kb, ':'), vb...)})
	}
	return out, nil
}
