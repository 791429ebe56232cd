package mcptest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A Script is an upstream MCP server written line by line, as a stdio
// server speaks: for each line its client writes, it returns the lines to
// write back, in order (nil for none). Lines need not be valid JSON-RPC.
type Script func(line []byte) [][]byte

// Scripted returns an Options.Connect for a proxy or relay: each call opens
// a new newline-delimited JSON-RPC connection whose far end follows script.
// The script sees the lines of every connection, one at a time. The far end
// never stops reading: what it writes waits in a queue of its own while the
// client does not read (a client that stops reading cannot block it, as a
// pipe's buffer would not). A connection's far end ends when the client
// closes it.
func Scripted(script Script) func(context.Context) (mcp.Transport, error) {
	var mu sync.Mutex
	return func(context.Context) (mcp.Transport, error) {
		upR, upW := io.Pipe()     // the client writes, the script reads
		downR, downW := io.Pipe() // the script writes, the client reads
		out := newQueue()
		go func() {
			defer out.close()
			defer upR.Close()
			sc := bufio.NewScanner(upR)
			sc.Buffer(nil, 16<<20)
			for sc.Scan() {
				mu.Lock()
				lines := script(sc.Bytes())
				mu.Unlock()
				for _, l := range lines {
					out.push(append(append([]byte(nil), l...), '\n'))
				}
			}
		}()
		go func() {
			defer downW.Close()
			for {
				l, ok := out.pop()
				if !ok {
					return
				}
				if _, err := downW.Write(l); err != nil {
					upR.Close() // the client is gone: stop reading too
					return
				}
			}
		}()
		return &mcp.IOTransport{Reader: downR, Writer: upW}, nil
	}
}

// queue is an unbounded FIFO of lines.
type queue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	items  [][]byte
	closed bool
}

func newQueue() *queue {
	q := &queue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *queue) push(b []byte) {
	q.mu.Lock()
	q.items = append(q.items, b)
	q.mu.Unlock()
	q.cond.Signal()
}

func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Signal()
}

// pop returns the next line, waiting for one; false once the queue is
// closed and empty.
func (q *queue) pop() ([]byte, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) == 0 && !q.closed {
		q.cond.Wait()
	}
	if len(q.items) == 0 {
		return nil, false
	}
	b := q.items[0]
	q.items = q.items[1:]
	return b, true
}

// Incoming is a line a script reads, decoded loosely: a request has a
// Method and an ID, a notification a Method only, a response an ID only.
type Incoming struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// Decode decodes line loosely; ok is false if it is not a JSON object.
func Decode(line []byte) (m Incoming, ok bool) {
	return m, json.Unmarshal(line, &m) == nil
}

// IsRequest reports whether m is a request (it has a method and an id).
func (m Incoming) IsRequest() bool { return m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null" }

// Result is the line of a successful response to m with result (raw JSON).
func (m Incoming) Result(result string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`)
}

// InitializeResult is the result of an older-era upstream's initialize
// that declares tools whose list changes.
const InitializeResult = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"prompts":{"listChanged":true},"resources":{"listChanged":true,"subscribe":true}},"serverInfo":{"name":"scripted","version":"1"}}`

// Error is the line of an error response to m.
func (m Incoming) Error(code int, message string) []byte {
	msg, _ := json.Marshal(message)
	return []byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":` + strconv.Itoa(code) + `,"message":` + string(msg) + `}}`)
}
