package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/jsonstring"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The relay reads newline-delimited JSON-RPC (a command's stdio, or any
// reader and writer) itself, in place of go-sdk's connection for
// mcp.CommandTransport and mcp.IOTransport: go-sdk decodes each message it
// reads twice (once as a batch, then as a message), each time with a fresh
// 32 KiB buffer, and hands it from its reading goroutine to the session's.
// Here each message is decoded once by go-sdk (jsonrpc.DecodeMessage), and
// the answer to a call the relay sent itself (mux.go) is read by a scan of
// its bytes and goes from the reading goroutine to its caller. The
// process is started and stopped as go-sdk's CommandTransport does.

// linesTransport is a transport whose connections are lineConns.
type linesTransport struct {
	open    func() (io.ReadWriteCloser, error)
	maxLine int // bytes of one message at most; 0: mcp.DefaultMaxLineLength, negative: no limit
}

// ownLines returns the relay's own transport for a go-sdk command or
// I/O transport, and t itself for any other.
func ownLines(t mcp.Transport) mcp.Transport {
	switch t := t.(type) {
	case *mcp.CommandTransport:
		td := t.TerminateDuration
		if td <= 0 {
			td = defaultTerminate
		}
		return &linesTransport{open: func() (io.ReadWriteCloser, error) { return startCommand(t.Command, td) }}
	case *mcp.IOTransport:
		return &linesTransport{open: func() (io.ReadWriteCloser, error) { return readWriter{t.Reader, t.Writer}, nil }, maxLine: t.MaxLineLength}
	}
	return t
}

func (t *linesTransport) Connect(context.Context) (mcp.Connection, error) {
	rwc, err := t.open()
	if err != nil {
		return nil, err
	}
	limit := t.maxLine
	if limit == 0 {
		limit = mcp.DefaultMaxLineLength
	}
	return &lineConn{rwc: rwc, limit: limit, incoming: make(chan lineMsg), closed: make(chan struct{})}, nil
}

// A lineConn is one newline-delimited JSON-RPC connection.
type lineConn struct {
	rwc   io.ReadWriteCloser
	limit int

	// answer, if set before the first Read, is offered every response
	// whose id is a string: it reports whether it took it.
	answer func(id string, resp *jsonrpc.Response) bool

	start    sync.Once
	incoming chan lineMsg
	queue    []jsonrpc.Message // the rest of a batch; only Read touches it

	writeMu   sync.Mutex
	closeOnce sync.Once
	closeErr  error
	closed    chan struct{}
}

type lineMsg struct {
	msgs []jsonrpc.Message
	err  error
}

// errFrameTooLarge ends a connection whose peer sent a message longer than
// its limit, as go-sdk's does.
var errFrameTooLarge = errors.New("relay: the upstream's message is too long")

// read decodes the messages of the connection, one value at a time, as
// go-sdk reads them (a value may span lines; what follows it on its line
// must be nothing), until an error.
func (c *lineConn) read() {
	var r io.Reader = c.rwc
	var lim *frameLimit
	if c.limit > 0 {
		lim = &frameLimit{r: c.rwc, limit: c.limit}
		r = lim
	}
	dec := json.NewDecoder(r)
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == nil {
			var tr [1]byte
			if n, rerr := dec.Buffered().Read(tr[:]); n > 0 {
				if tr[0] != '\n' && tr[0] != '\r' {
					err = errors.New("relay: invalid trailing data after the upstream's message")
				}
			} else if rerr != nil && rerr != io.EOF {
				err = rerr
			}
		}
		var m lineMsg
		if err == nil {
			m.msgs, m.err = c.decode(raw)
			if m.err == nil && len(m.msgs) == 0 {
				if lim != nil {
					lim.reset()
				}
				continue // an answer its caller took
			}
		} else {
			m.err = err
		}
		select {
		case c.incoming <- m:
		case <-c.closed:
			return
		}
		if m.err != nil {
			return
		}
		if lim != nil {
			lim.reset()
		}
	}
}

// decode returns the messages of one value read: a batch's, or one; an
// answer that c.answer took is not returned.
func (c *lineConn) decode(raw json.RawMessage) ([]jsonrpc.Message, error) {
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		var batch []json.RawMessage
		if err := json.Unmarshal(raw, &batch); err != nil {
			return nil, err
		}
		if len(batch) == 0 {
			return nil, errors.New("relay: the upstream sent an empty batch")
		}
		msgs := make([]jsonrpc.Message, 0, len(batch))
		for _, b := range batch {
			msg, err := jsonrpc.DecodeMessage(b)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, msg)
		}
		return msgs, nil
	}
	if c.answer != nil {
		if id, resp, ok := relayAnswer(raw); ok && c.answer(id, resp) {
			return nil, nil
		}
	}
	msg, err := jsonrpc.DecodeMessage(raw)
	if err != nil {
		return nil, err
	}
	return []jsonrpc.Message{msg}, nil
}

// relayAnswer reads raw as the answer to a call the relay sent: a response
// whose id is a string starting with callPrefix. Keys are matched exactly,
// as go-sdk matches them; anything else is not such an answer and is left
// to go-sdk. raw is one valid JSON value (the decoder read it), so its
// members are found by a scan of its bytes, without a second decoder. A
// result with a null input request is refused when it is decoded
// (decodeResult), as the guard refuses it (guard.go).
func relayAnswer(raw json.RawMessage) (string, *jsonrpc.Response, bool) {
	var (
		version, id    string
		haveID         bool
		result, errRaw json.RawMessage
	)
	ok := members(raw, func(k, v []byte) bool {
		key, ok := unquote(k)
		if !ok {
			return false
		}
		switch key {
		case "jsonrpc":
			return json.Unmarshal(v, &version) == nil
		case "id":
			if v[0] != '"' || json.Unmarshal(v, &id) != nil {
				return false
			}
			haveID = true
		case "result":
			result = v
		case "error":
			errRaw = v
		case "method", "params":
			return false
		}
		return true
	})
	if !ok || version != "2.0" || !haveID || len(id) <= len(callPrefix) || id[:len(callPrefix)] != callPrefix ||
		(result == nil) == (errRaw == nil) {
		return "", nil, false
	}
	jid, err := jsonrpc.MakeID(id)
	if err != nil {
		return "", nil, false
	}
	resp := &jsonrpc.Response{ID: jid}
	if errRaw != nil {
		var werr jsonrpc.Error
		if json.Unmarshal(errRaw, &werr) != nil {
			return "", nil, false
		}
		resp.Error = &werr
	} else {
		resp.Result = result
	}
	return id, resp, true
}

// members calls f with the key (as written, quotes included) and the value
// of each member of raw, one valid JSON value, in order, until f returns
// false. It reports whether raw is an object and f accepted every member.
func members(raw []byte, f func(key, value []byte) bool) bool {
	i := skipSpace(raw, 0)
	if i == len(raw) || raw[i] != '{' {
		return false
	}
	if i = skipSpace(raw, i+1); raw[i] == '}' {
		return true
	}
	for {
		end := jsonStringEnd(raw, i)
		key := raw[i:end]
		i = skipSpace(raw, skipSpace(raw, end)+1) // past the colon
		end = jsonValueEnd(raw, i)
		if !f(key, raw[i:end]) {
			return false
		}
		if i = skipSpace(raw, end); raw[i] == '}' {
			return true
		}
		i = skipSpace(raw, i+1) // past the comma
	}
}

// elements calls f with each element of the JSON array raw (valid JSON),
// in order, until f returns false. It reports whether f accepted every
// element.
func elements(raw []byte, f func(value []byte) bool) bool {
	i := skipSpace(raw, 1)
	if raw[i] == ']' {
		return true
	}
	for {
		end := jsonValueEnd(raw, i)
		if !f(raw[i:end]) {
			return false
		}
		if i = skipSpace(raw, end); raw[i] == ']' {
			return true
		}
		i = skipSpace(raw, i+1) // past the comma
	}
}

// unquote returns the JSON string q (quotes included) as encoding/json,
// and so go-sdk's decoder, reads it: escapes decoded, each byte that is
// not UTF-8 read as U+FFFD (package jsonstring); false if q is not one
// string. Attack stopped: a key or value spelt with bytes that are not
// UTF-8 read by the relay as other than the client reads it.
func unquote(q []byte) (string, bool) {
	s, err := jsonstring.Unquote(q)
	return s, err == nil
}

// skipSpace returns the offset of the first byte at or after i of b that is
// not JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// jsonStringEnd returns the offset just past the string that starts at
// offset i of the valid JSON b.
func jsonStringEnd(b []byte, i int) int {
	for j := i + 1; ; j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
}

// jsonValueEnd returns the offset just past the value that starts at
// offset i of the valid JSON b.
func jsonValueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return jsonStringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; ; j++ {
			switch b[j] {
			case '"':
				j = jsonStringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j
}

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(c.queue) > 0 {
		next := c.queue[0]
		c.queue = c.queue[1:]
		return next, nil
	}
	c.start.Do(func() { go c.read() })
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case m := <-c.incoming:
		if m.err != nil {
			return nil, m.err
		}
		c.queue = m.msgs[1:]
		return m.msgs[0], nil
	case <-c.closed:
		return nil, io.EOF
	}
}

func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	return c.writeLine(ctx, append(data, '\n'))
}

// writeLine writes line, one encoded message and its newline, whole.
func (c *lineConn) writeLine(ctx context.Context, line []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, err := c.rwc.Write(line)
	return err
}

func (c *lineConn) Close() error {
	c.closeOnce.Do(func() {
		c.closeErr = c.rwc.Close()
		close(c.closed)
	})
	return c.closeErr
}

func (c *lineConn) SessionID() string { return "" }

// frameLimit fails a read past limit bytes since the last reset.
type frameLimit struct {
	r            io.Reader
	limit, count int
}

func (f *frameLimit) Read(p []byte) (int, error) {
	if f.count >= f.limit {
		return 0, errFrameTooLarge
	}
	if len(p) > f.limit-f.count {
		p = p[:f.limit-f.count]
	}
	n, err := f.r.Read(p)
	f.count += n
	return n, err
}

func (f *frameLimit) reset() { f.count = 0 }

// readWriter closes both its halves, as go-sdk's IOTransport does.
type readWriter struct {
	r io.ReadCloser
	w io.WriteCloser
}

func (rw readWriter) Read(p []byte) (int, error)  { return rw.r.Read(p) }
func (rw readWriter) Write(p []byte) (int, error) { return rw.w.Write(p) }
func (rw readWriter) Close() error {
	err := rw.r.Close()
	if rw.w != nil {
		err = errors.Join(err, rw.w.Close())
	}
	return err
}

// defaultTerminate is go-sdk's CommandTransport default: how long Close
// waits for the process after closing its stdin before SIGTERM.
const defaultTerminate = 5 * time.Second

// startCommand starts cmd with pipes to its stdin and stdout.
func startCommand(cmd *exec.Cmd, terminate time.Duration) (io.ReadWriteCloser, error) {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &process{cmd: cmd, stdout: stdout, stdin: stdin, terminate: terminate}, nil
}

// process is a running command's stdio. Close ends it as MCP's stdio
// transport says, and as go-sdk's CommandTransport does: close its stdin,
// wait; SIGTERM, wait; SIGKILL.
type process struct {
	cmd       *exec.Cmd
	stdout    io.Reader
	stdin     io.WriteCloser
	terminate time.Duration
}

func (p *process) Read(b []byte) (int, error)  { return p.stdout.Read(b) }
func (p *process) Write(b []byte) (int, error) { return p.stdin.Write(b) }

func (p *process) Close() error {
	if err := p.stdin.Close(); err != nil {
		return fmt.Errorf("closing stdin: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	wait := func() (error, bool) {
		select {
		case err := <-exited:
			return err, true
		case <-time.After(p.terminate):
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if p.cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := p.cmd.Process.Kill(); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return errors.New("relay: the upstream process does not exit")
}
