package fuzz

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/serve"
	"github.com/mcp-confirm/mcp-confirm/internal/keyfile"
)

// FuzzStdioLine: whatever a client writes on stdio, every line the server
// writes back is one JSON-RPC message, and the ping that follows is
// answered: no input ends the session (go-sdk alone ends it on the first
// line it cannot decode).
func FuzzStdioLine(f *testing.F) {
	for _, seed := range []string{
		`hello`,
		`{"jsonrpc":"2.0","id":1,`,
		`{"id":1,"method":"ping"}`,
		`{"jsonrpc":"1.0","id":1,"method":"ping"}`,
		`{"jsonrpc":2.0,"id":1,"method":"ping"}`,
		`{"JSONRPC":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2\u002e0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","jsonrpc":"1.0","id":1,"method":"ping"}`,
		`[]`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`null`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":[1],"method":"ping"}`,
		`{"jsonrpc":"2.0"}`,
		`{"jsonrpc":"2.0","id":7,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\r",
		`{"jsonrpc":"2.0","id":1,"method":"ping"} {"x":1}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xffing\"}",
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"fuzz-ping","method":"ping"}`,
		strings.Repeat("[", 10000),
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 5000) + `"}}`,
	} {
		f.Add([]byte(seed))
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "fuzz", Version: "1"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	quiet := slog.New(slog.DiscardHandler)
	f.Fuzz(func(t *testing.T, line []byte) {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- serve.Stdio(ctx, s, inR, outW, serve.StdioOptions{MaxMessageBytes: 4096, Logger: quiet})
			outW.Close()
		}()
		go func() {
			inW.Write(append(append(bytes.Clone(line), '\n'), `{"jsonrpc":"2.0","id":"fuzz-ping","method":"ping"}`+"\n"...))
		}()
		replies := make(chan string)
		go func() {
			sc := bufio.NewScanner(outR)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				replies <- sc.Text()
			}
			close(replies)
		}()
		timeout := time.After(10 * time.Second)
		for answered := false; !answered; {
			select {
			case r, ok := <-replies:
				if !ok {
					t.Fatalf("the server hung up after %q", line)
				}
				var m struct {
					JSONRPC string          `json:"jsonrpc"`
					ID      json.RawMessage `json:"id"`
				}
				if err := json.Unmarshal([]byte(r), &m); err != nil || m.JSONRPC != "2.0" {
					t.Fatalf("reply %q to %q is not a JSON-RPC message", r, line)
				}
				answered = string(m.ID) == `"fuzz-ping"`
			case <-timeout:
				t.Fatalf("no answer to the ping after %q", line)
			}
		}
		inW.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Stdio did not return at end of input")
		}
		outR.Close()
	})
}

// FuzzKeyFile: a key file either yields keys that each re-encode to one of
// its lines, or an error that quotes none of its lines (beyond what the
// error messages say of every file).
func FuzzKeyFile(f *testing.F) {
	good := keyfile.Encode([]byte("0123456789abcdefghijklmnopqrstuv"))
	seeds := []string{
		good + "\n",
		"# comment\n\n" + good + "\r\n",
		"correct horse battery staple\n",
		"VGhpcyBpcyBub3QgYSByYW5kb20ga2V5IGJ1dCBpdCBsb29rcyBsaWtlIG9uZSEhIQ==\n",
		good + "=\n",
		keyfile.Prefix + "\n",
		keyfile.Prefix + "AAAA\n",
		keyfile.Encode(make([]byte, 32)) + "\n",
		good[:len(good)-1] + "A\n",
		good + "\n" + good + "\n",
		strings.Repeat("x", 5000) + "\n",
		"",
	}
	// Everything the messages say of any file: a line that is part of it
	// may appear in an error without being quoted.
	var vocabulary strings.Builder
	for _, seed := range seeds {
		f.Add([]byte(seed))
		if _, err := keyfile.Parse(strings.NewReader(seed)); err != nil {
			vocabulary.WriteString(err.Error() + "\n")
		}
	}
	f.Fuzz(func(t *testing.T, file []byte) {
		keys, err := keyfile.Parse(bytes.NewReader(file))
		if err != nil {
			for line := range strings.Lines(string(file)) {
				line = strings.TrimRight(line, "\r\n")
				if len(line) >= 8 && strings.Contains(err.Error(), line) && !strings.Contains(vocabulary.String(), line) {
					t.Fatalf("error %q quotes the line %q", err, line)
				}
			}
			return
		}
		for _, k := range keys {
			if len(k) < keyfile.MinKeyLen || !bytes.Contains(file, []byte(keyfile.Encode(k))) {
				t.Fatalf("key %x is not one of the file's lines", k)
			}
		}
	})
}
