package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioOptions configures [Stdio]. A zero field means its default.
type StdioOptions struct {
	// MaxMessageBytes is the longest line accepted, its line ending not
	// counted; a longer one is refused (-32600) without being buffered.
	// Default [DefaultMaxMessageBytes].
	MaxMessageBytes int
	// Logger receives the refusals (reason and length, never the line);
	// nil means slog.Default().
	Logger *slog.Logger
}

// Stdio serves s over newline-delimited JSON-RPC on in and out until in
// ends or ctx is done. Each line is checked first: a malformed one is
// answered with the JSON-RPC error it deserves (id null) and skipped, and
// the session goes on; every other line goes to go-sdk's IOTransport as it
// was (surrounding whitespace trimmed).
func Stdio(ctx context.Context, s *mcp.Server, in io.Reader, out io.Writer, opts StdioOptions) error {
	if s == nil {
		return errors.New("serve: nil server")
	}
	if opts.MaxMessageBytes < 0 {
		return fmt.Errorf("serve: MaxMessageBytes %d is negative", opts.MaxMessageBytes)
	}
	if opts.MaxMessageBytes == 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	w := &lineWriter{w: out}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(filter(in, pw, w, opts.MaxMessageBytes, opts.Logger))
	}()
	// The filter enforces the limit; go-sdk's own would end the session.
	err := s.Run(ctx, &mcp.IOTransport{Reader: pr, Writer: w, MaxLineLength: -1})
	pr.Close() // a filter blocked on the pipe returns
	return err
}

// lineWriter serializes whole-line writes: go-sdk writes each message in
// one Write, and so do the refusals, so lines never interleave.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (*lineWriter) Close() error { return nil }

// filter copies the well-formed lines of in to pw and answers the others on
// w. It returns when in ends (nil at EOF) or pw is closed.
func filter(in io.Reader, pw io.Writer, w io.Writer, max int, log *slog.Logger) error {
	br := bufio.NewReaderSize(in, 64<<10)
	for n := 1; ; n++ {
		line, long, err := readLine(br, max)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		eof := err != nil
		line = bytes.TrimSpace(line)
		switch code, reason := check(line, long, max); {
		case code != 0:
			log.Warn("stdio: refused a malformed line", "line", n, "reason", reason)
			if _, err := w.Write(errorLine(code, reason)); err != nil {
				return err
			}
		case len(line) > 0:
			if _, err := pw.Write(append(line, '\n')); err != nil {
				return err
			}
		}
		if eof {
			return nil
		}
	}
}

// readLine reads one line. A line longer than max (plus its "\r\n") is
// consumed to its end but not kept: long reports it.
func readLine(br *bufio.Reader, max int) (line []byte, long bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !long {
			if len(line)+len(chunk) > max+2 {
				long, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if long {
				return nil, true, err
			}
			if trimmed := bytes.TrimRight(line, "\r\n"); len(trimmed) > max {
				return nil, true, err
			}
			return line, false, err
		}
	}
}

// check classifies a trimmed line: 0 if go-sdk can take it, else the
// JSON-RPC error code and message it deserves.
func check(line []byte, long bool, max int) (code int, message string) {
	switch {
	case long:
		return jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: the line is longer than %d bytes", max)
	case len(line) == 0:
		return 0, ""
	case !json.Valid(line):
		return jsonrpc.CodeParseError, "Parse error: the line is not one JSON value"
	case line[0] == '[':
		// go-sdk ends the session on a batch after 2025-03-26, and no
		// client sends one.
		return jsonrpc.CodeInvalidRequest, "Invalid Request: batches are not supported"
	case line[0] != '{':
		return jsonrpc.CodeInvalidRequest, "Invalid Request: not a JSON-RPC message object"
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		return jsonrpc.CodeParseError, "Parse error: the line is not one JSON value"
	}
	raw, ok := fields["jsonrpc"]
	if !ok {
		return jsonrpc.CodeInvalidRequest, `Invalid Request: missing "jsonrpc": "2.0"`
	}
	var v string
	if json.Unmarshal(raw, &v) != nil || v != "2.0" {
		return jsonrpc.CodeInvalidRequest, `Invalid Request: "jsonrpc" must be "2.0"`
	}
	// What go-sdk itself decodes: anything it refuses here would end the
	// session.
	if _, err := jsonrpc.DecodeMessage(line); err != nil {
		return jsonrpc.CodeInvalidRequest, "Invalid Request: not a JSON-RPC 2.0 request, notification or response"
	}
	return 0, ""
}

// errorLine is a JSON-RPC error response with id null, newline-terminated.
func errorLine(code int, message string) []byte {
	type wireError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	b, _ := json.Marshal(struct {
		JSONRPC string    `json:"jsonrpc"`
		ID      *int      `json:"id"`
		Error   wireError `json:"error"`
	}{"2.0", nil, wireError{code, message}})
	return append(b, '\n')
}
