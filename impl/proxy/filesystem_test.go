package proxy_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/proxy"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// filesystemPolicy is the README's policy for the filesystem server.
const filesystemPolicy = `name = "filesystem"
default = "ask"
allow = ["read_*", "list_*", "search_files", "get_file_info", "directory_tree"]
ask = ["write_file", "edit_file", "move_file"]
deny = ["create_directory"]
`

// The README's proxy policy is the one these tests run.
func TestReadmePolicy(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "<!-- proxy-policy")
	_, block, ok2 := strings.Cut(after, "```toml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README.md has no proxy-policy toml block")
	}
	if block != filesystemPolicy {
		t.Fatalf("README's policy:\n%s\ntests run:\n%s", block, filesystemPolicy)
	}
	if n := strings.Count(block, "\n"); n != 5 {
		t.Fatalf("README's policy has %d lines, want five", n)
	}
}

// filesystemServer returns the command line of the real
// @modelcontextprotocol/server-filesystem (the exact version pinned in
// .ci/clients/package.json), serving root, or skips saying what to set.
func filesystemServer(t *testing.T, root string) []string {
	t.Helper()
	nm := os.Getenv("MCP_CONFIRM_NODE_MODULES")
	if nm == "" {
		t.Skip("set MCP_CONFIRM_NODE_MODULES to a node_modules holding @modelcontextprotocol/server-filesystem (npm ci in .ci/clients)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("install node (>= 20) to run the filesystem server")
	}
	entry := filepath.Join(nm, "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		t.Fatalf("MCP_CONFIRM_NODE_MODULES is set but has no server-filesystem: %v", err)
	}
	return []string{node, entry, root}
}

// newFilesystemProxy starts the proxy in front of the real filesystem server
// over stdio, with the README's policy.
func newFilesystemProxy(t *testing.T, root string) *env {
	t.Helper()
	argv := filesystemServer(t, root)
	pol, err := proxy.ParsePolicy(strings.NewReader(filesystemPolicy))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, log: &mcptest.SyncBuffer{}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := proxy.New(ctx, proxy.Options{
		Connect: func(context.Context) (mcp.Transport, error) {
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Stderr = e.log
			return &mcp.CommandTransport{Command: cmd}, nil
		},
		Policy: pol,
		Setup: confirm.Setup{
			Keys:   [][]byte{testKey},
			Logger: slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		},
	})
	if err != nil {
		t.Fatalf("proxy.New in front of server-filesystem: %v\n%s", err, e.log.String())
	}
	t.Cleanup(func() { p.Close() })
	e.proxy = p
	return e
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func callTool(cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, error) {
	return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
}

// The real @modelcontextprotocol/server-filesystem behind the proxy, driven
// by the go-sdk client in both protocol eras: write_file, edit_file and
// move_file are asked once each and act once; reads pass without a
// question; create_directory is invisible and refused.
func TestProxyFilesystemServer(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			root, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("hello world\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			e := newFilesystemProxy(t, root)
			a := mcptest.Accept()
			cs := e.connect(clientOptions{era: era, answer: a})

			tools, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
			}
			for _, want := range []string{"read_text_file", "write_file", "edit_file", "move_file", "list_directory"} {
				if !slices.Contains(names, want) {
					t.Fatalf("tools/list %v lacks %s", names, want)
				}
			}
			if slices.Contains(names, "create_directory") {
				t.Fatalf("tools/list shows the denied create_directory: %v", names)
			}
			// The server (TypeScript SDK v1) scopes nothing for caching: the
			// proxy says "private", never letting a shared cache serve one
			// user's list to another.
			if tools.CacheScope != "private" {
				t.Fatalf("tools/list cacheScope = %q, want private", tools.CacheScope)
			}

			// Reads are allowed by the policy: no question.
			res, err := callTool(cs, "read_text_file", map[string]any{"path": filepath.Join(root, "notes.txt")})
			wantResult(t, res, err, "hello world")
			res, err = callTool(cs, "list_directory", map[string]any{"path": root})
			wantResult(t, res, err, "notes.txt")
			if q := a.Questions(); len(q) != 0 {
				t.Fatalf("a read was asked: %q", q)
			}

			// Writes are asked, once each, and act once.
			target := filepath.Join(root, "new.txt")
			res, err = callTool(cs, "write_file", map[string]any{"path": target, "content": "first line\n"})
			wantResult(t, res, err, "Successfully wrote")
			if got := readFile(t, target); got != "first line\n" {
				t.Fatalf("new.txt = %q", got)
			}
			res, err = callTool(cs, "edit_file", map[string]any{"path": target, "edits": []any{map[string]any{"oldText": "first", "newText": "edited"}}})
			wantResult(t, res, err, "edited")
			if got := readFile(t, target); got != "edited line\n" {
				t.Fatalf("after edit_file new.txt = %q", got)
			}
			moved := filepath.Join(root, "moved.txt")
			res, err = callTool(cs, "move_file", map[string]any{"source": target, "destination": moved})
			wantResult(t, res, err, "Successfully moved")
			if _, err := os.Stat(target); !os.IsNotExist(err) {
				t.Fatalf("move_file left the source: %v", err)
			}
			if got := readFile(t, moved); got != "edited line\n" {
				t.Fatalf("moved.txt = %q", got)
			}
			q := a.Questions()
			if len(q) != 3 {
				t.Fatalf("asked %d questions, want 3 (write, edit, move): %q", len(q), q)
			}
			for i, want := range []string{"write_file", "edit_file", "move_file"} {
				if v := visible(q[i]); !strings.Contains(v, "Run the tool «"+want+"» of «filesystem»") || strings.Contains(v, "Secure") {
					t.Errorf("question %d is not the proxy's for %s:\n%s", i, want, q[i])
				}
			}
			if !strings.Contains(visible(q[0]), "- «content»: string «first line\\n»") {
				t.Errorf("the write question does not show the content escaped:\n%s", q[0])
			}

			// The denied tool is refused even by name.
			res, err = callTool(cs, "create_directory", map[string]any{"path": filepath.Join(root, "d")})
			mcptest.WantToolRefusal(t, res, err, "not available")
			if _, err := os.Stat(filepath.Join(root, "d")); !os.IsNotExist(err) {
				t.Fatalf("create_directory acted: %v", err)
			}
		})
	}
}

// A 2026-07-28 client replays an approved write_file: the proxy answers
// with the first write's result, marked as the earlier execution's, sends
// nothing, and the file keeps what was written after the first, single
// write.
func TestProxyFilesystemReplayRefused(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newFilesystemProxy(t, root)
	cs := e.connect(clientOptions{manual: true, answer: mcptest.Accept()})
	target := filepath.Join(root, "a.txt")
	args := map[string]any{"path": target, "content": "approved\n"}
	res, err := callTool(cs, "write_file", args)
	if err != nil || !res.NeedsInput() {
		t.Fatalf("first round: err=%v res=%s", err, mcptest.Describe(res))
	}
	state := res.RequestState
	retry := func() (*mcp.CallToolResult, error) {
		return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "write_file", Arguments: args,
			InputResponses: mcp.InputResponseMap{"confirm": mcptest.Yes()}, RequestState: state})
	}
	res, err = retry()
	wantResult(t, res, err, "Successfully wrote")
	if err := os.WriteFile(target, []byte("changed since\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = retry()
	// Answered with the first execution's result, marked as such; nothing
	// is sent again.
	wantResult(t, res, err, "earlier execution")
	wantResult(t, res, err, "Successfully wrote")
	if got := readFile(t, target); got != "changed since\n" {
		t.Fatalf("the replay wrote again: a.txt = %q", got)
	}
}
