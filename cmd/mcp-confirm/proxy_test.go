package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestProxyFlags(t *testing.T) {
	dir := t.TempDir()
	badPolicy := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(badPolicy, []byte("alow = [\"read_*\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A valid policy that allows everything, where others may write it:
	// refused before it is read, the upstream never started.
	openPolicy := filepath.Join(dir, "open.toml")
	if err := os.WriteFile(openPolicy, []byte("allow = [\"*\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(openPolicy, 0o666); err != nil {
		t.Fatal(err)
	}
	fifoPolicy := filepath.Join(dir, "fifo.toml")
	if err := syscall.Mkfifo(fifoPolicy, 0o600); err != nil {
		t.Fatal(err)
	}
	// An owner-only policy in a directory others may write: they could
	// rename an allow-everything policy into place.
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	sharedPolicy := filepath.Join(shared, "policy.toml")
	if err := os.WriteFile(sharedPolicy, []byte("ask = [\"*\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	started := filepath.Join(dir, "started")
	upstream := []string{"--", "sh", "-c", "touch " + started}
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"help", []string{"--help"}, 0, "--upstream URL"},
		{"no upstream", nil, 2, "no upstream"},
		{"both upstreams", []string{"--upstream", "http://127.0.0.1:1/", "--", "true"}, 2, "choose one"},
		{"bad upstream URL", []string{"--upstream", "ftp://x"}, 2, "http:// or https://"},
		{"missing policy", []string{"--policy", filepath.Join(dir, "nope"), "--", "true"}, 2, "--policy"},
		{"bad policy", []string{"--policy", badPolicy, "--", "true"}, 2, "unknown key alow"},
		{"policy others may write", append([]string{"--policy", openPolicy}, upstream...), 2, "group or others may write it (chmod 0644"},
		{"policy a FIFO", append([]string{"--policy", fifoPolicy}, upstream...), 2, "not a regular file"},
		{"policy in a directory others may write", append([]string{"--policy", sharedPolicy}, upstream...), 2, "group or others may replace"},
		{"bad ttl", []string{"--ttl", "-1s", "--", "true"}, 2, "must be positive"},
		{"bad ledger", []string{"--ledger", "ftp://x", "--", "true"}, 2, "--ledger"},
		{"bad lease", []string{"--lease", "0s", "--", "true"}, 2, "--lease 0s: must be positive"},
		{"no upstream sessions", []string{"--max-upstream-sessions", "0", "--", "true"}, 2, "must be positive"},
		{"empty name", []string{"--name", "", "--", "true"}, 2, "--name"},
		{"upstream that is not an MCP server", []string{"--", "true"}, 1, "upstream unavailable"},
		{"the ledger passed to the upstream", []string{"--upstream-env", "MCP_CONFIRM_LEDGER", "--", "true"}, 2, "never passed to the upstream"},
		{"a proxy variable set for the upstream", []string{"--upstream-env", "mcp_confirm_x=1", "--", "true"}, 2, "never passed to the upstream"},
		{"an upstream variable without a name", []string{"--upstream-env", "=1", "--", "true"}, 2, "want NAME or NAME=VALUE"},
		{"upstream variables for a URL", []string{"--upstream-env", "A=1", "--upstream", "http://127.0.0.1:1/"}, 2, "applies to an upstream COMMAND"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append([]string{"proxy"}, tt.args...), strings.NewReader(""), &stdout, &stderr)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("stderr does not mention %q:\n%s", tt.want, stderr.String())
			}
			if _, err := os.Stat(started); err == nil {
				t.Fatal("the upstream was started")
			}
		})
	}
}

// The built binary as a proxy in front of the built binary as the reference
// server, both over stdio: the person is asked by the proxy, then by the
// upstream itself (its own question relayed, as input_required to a
// 2026-07-28 client, in-process to an older one), and the file is deleted
// once.
func TestProxyInFrontOfReferenceServer(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "mcp-confirm")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	root := t.TempDir()
	policy := filepath.Join(t.TempDir(), "policy.toml")
	if err := os.WriteFile(policy, []byte("name = \"reference\"\nask = [\"delete_file\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, era := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(era, func(t *testing.T) {
			f := filepath.Join(root, "a.txt")
			if err := os.WriteFile(f, []byte("a"), 0o644); err != nil {
				t.Fatal(err)
			}
			var (
				mu    sync.Mutex
				asked []string
			)
			client := mcp.NewClient(&mcp.Implementation{Name: "proxy-test", Version: "1"}, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					asked = append(asked, req.Params.Message)
					mu.Unlock()
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
				},
			})
			cmd := exec.Command(bin, "proxy", "--policy", policy, "--", bin, "--root", root)
			cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: era})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": f}})
			if err != nil || res.IsError {
				t.Fatalf("delete_file through the proxy: err=%v res=%+v", err, res)
			}
			if _, err := os.Lstat(f); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s not deleted: %v", f, err)
			}
			if len(asked) != 2 || !strings.Contains(asked[0], "Run the tool «\u2068delete_file\u2069» of «\u2068reference\u2069»") {
				t.Fatalf("want the proxy's question, then the upstream's; got %q", asked)
			}
		})
	}
}
