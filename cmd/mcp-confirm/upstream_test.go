package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// helperUpstream, as the test binary's first argument, makes it an MCP
// server over stdio for the binary under test to start as its upstream (see
// TestMain): a real upstream process whose every request the tests can
// see. Its arguments: the file it appends each request's method (and a
// call's tool name) to, one line each.
//
// Its tools: echo (returns its text argument) and env (returns its own
// environment, one NAME=VALUE a line).
const helperUpstream = "mcp-confirm-test-upstream"

// runHelperUpstream serves the helper upstream on stdio until stdin ends.
func runHelperUpstream(args []string) int {
	if len(args) != 1 {
		fmt.Fprintf(os.Stderr, "%s: want LOGFILE\n", helperUpstream)
		return 2
	}
	logFile := args[0]
	s := mcp.NewServer(&mcp.Implementation{Name: "helper-upstream", Version: "1"}, nil)
	var mu sync.Mutex
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			line := method
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok {
				line += " " + p.Name
			}
			mu.Lock()
			f, err := os.OpenFile(logFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err == nil {
				fmt.Fprintln(f, line)
				f.Close()
			}
			mu.Unlock()
			return next(ctx, method, req)
		}
	})
	type echoArgs struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "env"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(os.Environ(), "\n")}}}, nil, nil
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", helperUpstream, err)
		return 1
	}
	return 0
}

// helper is one helper upstream's command line and the log of the requests
// it received.
type helper struct {
	log string
}

func newHelper(t *testing.T) *helper {
	t.Helper()
	return &helper{log: filepath.Join(t.TempDir(), "requests")}
}

// argv is the command that starts the helper upstream.
func (h *helper) argv(t *testing.T) []string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{self, helperUpstream, h.log}
}

// requests returns the requests the helper received, in order.
func (h *helper) requests(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(h.log)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// calls returns the tools/call requests the helper received.
func (h *helper) calls(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, r := range h.requests(t) {
		if strings.HasPrefix(r, "tools/call") {
			out = append(out, r)
		}
	}
	return out
}

// stdioProxy connects a go-sdk client of era, answering every question
// with answer, to the built binary running as a proxy over stdio with args.
func stdioProxy(t *testing.T, era string, answer *mcptest.Answerer, args ...string) (*mcp.ClientSession, *mcptest.SyncBuffer) {
	t.Helper()
	stderr := &mcptest.SyncBuffer{}
	cmd := exec.Command(binary(t), args...)
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "proxy-test", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: answer.Handle})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		t.Fatalf("connect to the proxy over stdio: %v; stderr:\n%s", err, stderr.String())
	}
	t.Cleanup(func() { cs.Close() })
	return cs, stderr
}

// TestProxyUnknownToolRefused: a tools/call of a tool the upstream does
// not list (the default policy asks every tool) gets a tool error saying it
// is unknown, from the proxy; nothing is asked and the upstream receives no
// call; the proxy process lives on and serves the next call. Both eras,
// over stdio and over streamable HTTP behind the generated token, whose
// file is gone once the proxy stops. (The proxy used to dereference the
// missing definition and die.)
func TestProxyUnknownToolRefused(t *testing.T) {
	unknownThenEcho := func(t *testing.T, cs *mcp.ClientSession, answer *mcptest.Answerer, h *helper) {
		t.Helper()
		ctx := context.Background()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{"x": 1}})
		mcptest.WantToolRefusal(t, res, err, "Unknown tool")
		if q := answer.Questions(); len(q) != 0 {
			t.Fatalf("the person was asked about an unknown tool: %q", q)
		}
		if c := h.calls(t); len(c) != 0 {
			t.Fatalf("the upstream received %q", c)
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "still here"}})
		if err != nil || res.IsError || !strings.Contains(mcptest.Text(res), "echo: still here") {
			t.Fatalf("the next call: err=%v res=%s", err, mcptest.Describe(res))
		}
		if c := h.calls(t); !slices.Equal(c, []string{"tools/call echo"}) {
			t.Fatalf("the upstream received %q, want the one echo", c)
		}
		if q := answer.Questions(); len(q) != 1 {
			t.Fatalf("want one question (echo's), got %q", q)
		}
	}

	t.Run("stdio", func(t *testing.T) {
		for _, era := range []string{mcptest.EraMRTR, mcptest.EraLegacy} {
			t.Run(era, func(t *testing.T) {
				h := newHelper(t)
				answer := mcptest.Accept()
				cs, stderr := stdioProxy(t, era, answer, append([]string{"proxy", "--"}, h.argv(t)...)...)
				unknownThenEcho(t, cs, answer, h)
				if err := cs.Ping(context.Background(), nil); err != nil {
					t.Fatalf("the proxy no longer answers: %v; stderr:\n%s", err, stderr.String())
				}
				if strings.Contains(stderr.String(), "panic") {
					t.Fatalf("the proxy panicked:\n%s", stderr.String())
				}
			})
		}
	})

	t.Run("http", func(t *testing.T) {
		runtimeDir := filepath.Join(t.TempDir(), "run")
		if err := os.Mkdir(runtimeDir, 0o700); err != nil {
			t.Fatal(err)
		}
		h := newHelper(t)
		p := startBinary(t, []string{"XDG_RUNTIME_DIR=" + runtimeDir}, append([]string{"proxy", "--http", "127.0.0.1:0", "--"}, h.argv(t)...)...)
		tokenFile, token := generatedToken(t, p)
		for _, era := range []string{mcptest.EraMRTR, mcptest.EraLegacy} {
			t.Run(era, func(t *testing.T) {
				os.Remove(h.log)
				answer := mcptest.Accept()
				cs := httpClient(t, p.url, token, era, answer)
				unknownThenEcho(t, cs, answer, h)
				if err := p.cmd.Process.Signal(syscall.Signal(0)); err != nil {
					t.Fatalf("the proxy process is gone: %v; stderr:\n%s", err, p.stderr.String())
				}
			})
		}
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.cmd.Wait()
		if code := p.cmd.ProcessState.ExitCode(); code != 0 || strings.Contains(p.stderr.String(), "panic") {
			t.Fatalf("the proxy exited %d; stderr:\n%s", code, p.stderr.String())
		}
		if _, err := os.Stat(tokenFile); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("token file left after the proxy stopped: %v", err)
		}
	})
}

// httpClient connects a go-sdk client of era that sends token and answers
// every question with answer to the proxy at url.
func httpClient(t *testing.T, url, token, era string, answer *mcptest.Answerer) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "proxy-test", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: answer.Handle})
	hc := &http.Client{Transport: bearerTransport{token}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		t.Fatalf("connect to the proxy over HTTP: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestProxyUpstreamEnvironment: the upstream command the proxy starts gets
// a minimal environment, not the proxy's: the inherited variables (PATH,
// HOME, the locale, TZ, …) and what --upstream-env passes or sets, never
// $MCP_CONFIRM_LEDGER (here a PostgreSQL URL with a password the proxy
// really uses) nor any other variable of the proxy's, nor a shell
// function export. The helper upstream reports its own environment, in
// both eras (an older-era session's upstream is a process of its own).
func TestProxyUpstreamEnvironment(t *testing.T) {
	pg := os.Getenv("MCP_CONFIRM_POSTGRES_URL")
	if pg == "" {
		t.Skip("set MCP_CONFIRM_POSTGRES_URL (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable): the proxy's ledger URL carries the password the upstream must not see")
	}
	u, err := url.Parse(pg)
	if err != nil {
		t.Fatal(err)
	}
	// Trust authentication ignores the password; the proxy still holds it.
	const password = "ledger-password-0f3c9a"
	u.User = url.UserPassword(u.User.Username(), password)
	home := t.TempDir()
	proxyEnv := []string{
		"PATH=/usr/bin:/bin",
		"HOME=" + home,
		"LANG=C.UTF-8",
		"LC_MESSAGES=fr_FR.UTF-8",
		"TZ=Europe/Paris",
		"TMPDIR=" + home,
		"USER=tester",
		"MCP_CONFIRM_LEDGER=" + u.String(),
		"MCP_CONFIRM_OTHER=proxy-only",
		"GITHUB_TOKEN=ghp_passed_by_name",
		"AWS_SECRET_ACCESS_KEY=not-for-the-upstream",
		"TERM=() { :; }; echo shellshock",
		"API_MODE=from-the-proxy",
	}
	for _, era := range []string{mcptest.EraMRTR, mcptest.EraLegacy} {
		t.Run(era, func(t *testing.T) {
			h := newHelper(t)
			answer := mcptest.Accept()
			stderr := &mcptest.SyncBuffer{}
			args := append([]string{"proxy", "--name", "env-" + strconv.FormatInt(time.Now().UnixNano(), 36), "--allow-ledger-rollback",
				"--upstream-env", "GITHUB_TOKEN", "--upstream-env", "API_MODE=set-by-flag", "--upstream-env", "NOT_SET_ANYWHERE", "--"}, h.argv(t)...)
			cmd := exec.Command(binary(t), args...)
			cmd.Env = proxyEnv
			cmd.Stderr = stderr
			client := mcp.NewClient(&mcp.Implementation{Name: "env-test", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: answer.Handle})
			cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: era})
			if err != nil {
				t.Fatalf("connect: %v; stderr:\n%s", err, stderr.String())
			}
			defer cs.Close()
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "env", Arguments: map[string]any{}})
			if err != nil || res.IsError {
				t.Fatalf("env: err=%v res=%s; stderr:\n%s", err, mcptest.Describe(res), stderr.String())
			}
			got := strings.Split(mcptest.Text(res), "\n")
			slices.Sort(got)
			want := []string{
				"API_MODE=set-by-flag",
				"GITHUB_TOKEN=ghp_passed_by_name",
				"HOME=" + home,
				"LANG=C.UTF-8",
				"LC_MESSAGES=fr_FR.UTF-8",
				"PATH=/usr/bin:/bin",
				"TMPDIR=" + home,
				"TZ=Europe/Paris",
				"USER=tester",
			}
			if !slices.Equal(got, want) {
				t.Fatalf("the upstream's environment:\n%s\nwant exactly:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if strings.Contains(mcptest.Text(res), password) || strings.Contains(stderr.String(), password) {
				t.Fatal("the ledger's password reached the upstream or the log")
			}
			if !strings.Contains(stderr.String(), "name=NOT_SET_ANYWHERE") {
				t.Fatalf("no warning for the variable the proxy does not hold; stderr:\n%s", stderr.String())
			}
		})
	}
}

// The environment an upstream command gets, as a function of the proxy's
// and the flags, on Linux and Windows (where names are case-insensitive).
func TestUpstreamEnv(t *testing.T) {
	for _, tt := range []struct {
		name          string
		goos          string
		environ, pass []string
		want, unset   []string
	}{
		{"inherited only", "linux",
			[]string{"PATH=/bin", "HOME=/h", "SECRET=x", "MCP_CONFIRM_LEDGER=redis://:pw@h/0", "LC_ALL=C", "LCX=no", "path=lower"}, nil,
			[]string{"PATH=/bin", "HOME=/h", "LC_ALL=C"}, nil},
		{"shell function exports dropped", "linux", []string{"TERM=() { :; }; id", "SHELL=/bin/sh"}, nil, []string{"SHELL=/bin/sh"}, nil},
		{"passed by name, set, replaced", "linux",
			[]string{"PATH=/bin", "TOKEN=t", "EMPTY="}, []string{"TOKEN", "EMPTY", "PATH=/opt/bin", "X=1", "X=2", "MISSING"},
			[]string{"PATH=/opt/bin", "TOKEN=t", "EMPTY=", "X=2"}, []string{"MISSING"}},
		{"a passed function export is the operator's choice", "linux", []string{"F=() { :; }"}, []string{"F"}, []string{"F=() { :; }"}, nil},
		{"nothing", "linux", []string{"SECRET=x"}, nil, nil, nil},
		{"windows", "windows",
			[]string{"Path=C:\\bin", "SystemRoot=C:\\Windows", "TEMP=C:\\t", "HOME=C:\\h", "Secret=x", "token=t"}, []string{"TOKEN", "PATH=D:\\bin"},
			[]string{"PATH=D:\\bin", "SystemRoot=C:\\Windows", "TEMP=C:\\t", "TOKEN=t"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env, unset := upstreamEnv(tt.environ, tt.goos, tt.pass)
			if !slices.Equal(env, tt.want) || !slices.Equal(unset, tt.unset) {
				t.Fatalf("upstreamEnv = %q, unset %q; want %q, unset %q", env, unset, tt.want, tt.unset)
			}
		})
	}
}
