package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
	"github.com/mcp-confirm/mcp-confirm/internal/redistest"
)

// The tests in this file run the built binary, as operators and attackers
// do: its flags, its transports and its start-up checks.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == helperUpstream {
		os.Exit(runHelperUpstream(os.Args[2:]))
	}
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// binary builds the production binary once per test run.
func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "mcp-confirm-bin-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "mcp-confirm")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is a running binary.
type proc struct {
	cmd    *exec.Cmd
	stderr *mcptest.SyncBuffer
	url    string // for --http 127.0.0.1:0
}

var addrLine = regexp.MustCompile(`addr=(http://\S+)`)

// startHTTP runs the binary with --http 127.0.0.1:0 and args, and waits
// for the address it serves. Without authentication (--insecure-no-auth,
// allowed on loopback): these tests are about the transport's limits.
func startHTTP(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startBinary(t, env, append(args, "--http", "127.0.0.1:0", "--insecure-no-auth")...)
}

// startBinary runs the binary with args, which serve HTTP, and waits for
// the address it serves.
func startBinary(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{stderr: &mcptest.SyncBuffer{}}
	p.cmd = exec.Command(binary(t), args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := addrLine.FindStringSubmatch(p.stderr.String()); m != nil {
			p.url = m[1]
			return p
		}
		if p.cmd.ProcessState != nil {
			break
		}
	}
	t.Fatalf("no address logged; stderr:\n%s", p.stderr.String())
	return nil
}

// metrics scrapes the --metrics endpoint the binary logged and returns its
// unlabelled samples by name.
func (p *proc) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	m := metricsLine.FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("no metrics address logged; stderr:\n%s", p.stderr.String())
	}
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", m[1], resp.Status)
	}
	samples := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			samples[name] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return samples
}

// liveHeapMB is the binary's live heap, in MB, as marked by a garbage
// collection that started after the call: unlike RSS (freed memory goes
// back to the OS when the runtime's scavenger gets to it, later under
// load) or the memstats gauges (which count garbage not yet collected),
// it is what the process holds. The runtime collects when its heap has
// grown enough, so the binary is made to allocate by scraping its metrics
// (a quarter of a MB each) until two more collections have finished.
func (p *proc) liveHeapMB(t *testing.T) float64 {
	t.Helper()
	const gcs = "go_gc_duration_seconds_count"
	first := p.metrics(t)[gcs]
	for deadline := time.Now().Add(2 * time.Minute); ; {
		var wg sync.WaitGroup
		for range 3 { // the handler serves at most 4 at once
			wg.Go(func() {
				for range 50 {
					p.metrics(t)
				}
			})
		}
		wg.Wait()
		if m := p.metrics(t); m[gcs] >= first+2 {
			live, ok := m["go_gc_heap_live_bytes"]
			if !ok {
				t.Fatal("no go_gc_heap_live_bytes in the metrics")
			}
			return live / (1 << 20)
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than 2 garbage collections in 2 minutes of scraping")
		}
	}
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// postJSON posts body with the headers a streamable HTTP client sends.
func postJSON(c *http.Client, url, session, body string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// openSessions opens n older-era sessions over 8 connections and returns
// their ids.
func openSessions(t *testing.T, url string, n int) []string {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	defer c.CloseIdleConnections()
	ids := make([]string, n)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				resp, err := postJSON(c, url, "", initBody)
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Errorf("initialize %d: %v %v", i, resp, err)
					return
				}
				ids[i] = resp.Header.Get("Mcp-Session-Id")
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return ids
}

// 10,000 sessions opened and abandoned leave the binary's memory bounded
// by --session-timeout; the control, whose timeout has not passed, holds
// all of them (the issue measured 123 MB). Both are read from --metrics:
// the live sessions exactly (mcp_confirm_http_sessions), and the live heap
// after a garbage collection, which neither load nor the runtime's lazy
// return of memory to the OS changes (RSS did both).
func TestBinaryHTTPSessionsBounded(t *testing.T) {
	// The comparison below needs both subtests to have run: built here, the
	// binary skips this test, not only its subtests, under -short.
	binary(t)
	const n, warm = 10_000, 50
	held := map[string]float64{}
	for _, tt := range []struct {
		name    string
		timeout string
	}{{"control", "1h"}, {"timeout", "1s"}} {
		t.Run(tt.name, func(t *testing.T) {
			p := startHTTP(t, nil, "--session-timeout", tt.timeout, "--max-sessions", "20000", "--metrics", "127.0.0.1:0")
			openSessions(t, p.url, warm)
			before := p.liveHeapMB(t)
			start := time.Now()
			ids := openSessions(t, p.url, n)
			opened := time.Since(start)
			want := float64(warm + n)
			if tt.name == "timeout" {
				// Every session has timed out once the last one has; the
				// gauge is read without touching a session (a request of a
				// session restarts its timer).
				want = 0
				for deadline := time.Now().Add(30 * time.Second); p.metrics(t)["mcp_confirm_http_sessions"] != 0; time.Sleep(500 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("%v sessions still live 30 s after the last was opened", p.metrics(t)["mcp_confirm_http_sessions"])
					}
				}
				for _, id := range []string{ids[0], ids[n-1]} {
					if resp, err := postJSON(http.DefaultClient, p.url, id, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); err != nil || resp.StatusCode != http.StatusNotFound {
						t.Fatalf("a session still answers after the timeout: %v %v", resp, err)
					}
				}
			}
			after := p.liveHeapMB(t)
			if got := p.metrics(t)["mcp_confirm_http_sessions"]; got != want {
				t.Fatalf("%v live sessions, want %v", got, want)
			}
			held[tt.name] = after - before
			t.Logf("%d sessions opened in %v; live heap %.1f MB -> %.1f MB", n, opened.Round(time.Millisecond), before, after)
		})
	}
	if len(held) != 2 {
		t.Fatalf("measured %d of the 2 runs: %v", len(held), held)
	}
	// A session holds about 7 KiB of heap (TestHTTPSessionTimeoutFreesMemory
	// measures it in-process): 10,000 hold some 70 MB.
	if held["control"] < n*4.0/1024 {
		t.Fatalf("control: 10,000 live sessions hold only %.1f MB of heap: the test cannot tell", held["control"])
	}
	// Closed sessions hold nothing; what is left (6% of the control,
	// measured: maps that do not shrink, pools) is the runtime's, and a
	// quarter of the control is generous for it. Without the timeout both
	// hold the same.
	if held["timeout"] > held["control"]/4 {
		t.Fatalf("with a 1 s timeout the live heap grew %.1f MB, without one %.1f MB: not bounded", held["timeout"], held["control"])
	}
}

// A connection that sends its body slowly is closed by --read-timeout; the
// server keeps serving others.
func TestBinaryHTTPSlowBody(t *testing.T) {
	p := startHTTP(t, nil, "--read-timeout", "500ms")
	host := strings.TrimPrefix(p.url, "http://")
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{", host)
	start := time.Now()
	c.SetReadDeadline(start.Add(10 * time.Second))
	// One byte a while, never the whole body.
	go func() {
		for range 20 {
			time.Sleep(100 * time.Millisecond)
			if _, err := c.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	_, err = io.Copy(io.Discard, c)
	took := time.Since(start)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the slow-body connection was kept open for 10 s")
	}
	if took > 3*time.Second {
		t.Fatalf("closed after %v, want about 500ms", took)
	}
	if resp, err := postJSON(http.DefaultClient, p.url, "", initBody); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the server no longer serves: %v %v", resp, err)
	}
}

// A body over --max-message-bytes (default 64 KiB) gets 413 in both eras.
func TestBinaryHTTPBodyLimit(t *testing.T) {
	p := startHTTP(t, nil)
	big := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 64<<10) + `"}}`
	for _, era := range []string{"", "2026-07-28"} {
		req, _ := http.NewRequest(http.MethodPost, p.url, strings.NewReader(big))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if era != "" {
			req.Header.Set("Mcp-Protocol-Version", era)
			req.Header.Set("Mcp-Method", "initialize")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("era %q: %d-byte body got %s, want 413", era, len(big), resp.Status)
		}
	}
}

// stdioBin is the binary run over stdio by a raw client.
type stdioBin struct {
	t      *testing.T
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *mcptest.SyncBuffer
}

// startStdio runs the binary with env and args over stdio.
func startStdio(t *testing.T, env []string, args ...string) *stdioBin {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &stdioBin{t: t, in: in, out: bufio.NewScanner(out), stderr: &mcptest.SyncBuffer{}}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	s.out.Buffer(nil, 1<<20)
	return s
}

// roundTrip sends line and returns the next message the binary writes.
func (s *stdioBin) roundTrip(line string) map[string]any {
	s.t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.t.Fatalf("write: %v (the binary exited?)", err)
	}
	got := make(chan bool, 1)
	go func() { got <- s.out.Scan() }()
	select {
	case ok := <-got:
		if !ok {
			s.t.Fatalf("the binary closed stdout after %.60q; stderr:\n%s", line, s.stderr.String())
		}
	case <-time.After(30 * time.Second):
		s.t.Fatalf("no reply to %.60q; stderr:\n%s", line, s.stderr.String())
	}
	var m map[string]any
	if err := json.Unmarshal(s.out.Bytes(), &m); err != nil {
		s.t.Fatalf("reply %q: %v", s.out.Bytes(), err)
	}
	return m
}

// A stdio session survives each malformed line: each gets its JSON-RPC
// error with id null, and the next ping is answered.
func TestBinaryStdioSurvivesBadLines(t *testing.T) {
	s := startStdio(t, nil, "--max-message-bytes", "2048")
	if m := s.roundTrip(initBody); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	io.WriteString(s.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	for i, tt := range []struct {
		line string
		code float64
	}{
		{`this is not json`, -32700},
		{`{"jsonrpc":"2.0","id":1,"method":`, -32700},
		{`{"id":1,"method":"ping"}`, -32600},
		{`{"jsonrpc":"1.0","id":1,"method":"ping"}`, -32600},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, -32600},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 2048) + `"}}`, -32600},
	} {
		m := s.roundTrip(tt.line)
		e, _ := m["error"].(map[string]any)
		if id, ok := m["id"]; !ok || id != nil || e == nil || e["code"] != tt.code {
			t.Fatalf("%.40q: got %v, want error %v with id null", tt.line, m, tt.code)
		}
		ping := s.roundTrip(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, 100+i))
		if ping["id"] != float64(100+i) || ping["result"] == nil {
			t.Fatalf("ping after %.40q: %v", tt.line, ping)
		}
	}
}

// runBinary runs the binary to completion (at most 30 s) and returns its
// exit code and output.
func runBinary(t *testing.T, env []string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%v did not exit within 30 s; stderr:\n%s", args, errb.String())
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// serves requires the binary, run with env and args over stdio, to answer
// an initialize, and returns what it logged so far.
func serves(t *testing.T, env []string, args ...string) string {
	t.Helper()
	s := startStdio(t, env, args...)
	if m := s.roundTrip(initBody); m["result"] == nil {
		t.Fatalf("initialize: %v; stderr:\n%s", m, s.stderr.String())
	}
	// exec copies stderr in a goroutine of its own, which may lag behind
	// the reply read from stdout: wait for the line logged after every
	// start-up warning, so that the caller sees all of them.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(s.stderr.String(), "serving MCP on stdio"); {
		if time.Now().After(deadline) {
			t.Fatalf("no start-up log line after initialize; stderr:\n%s", s.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s.stderr.String()
}

// keygen writes a key file, --key-file reads it; a second keygen never
// overwrites it, and a printed line appended to it is a second key.
func TestBinaryKeygen(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	if code, _, errOut := runBinary(t, nil, "", "keygen", keys); code != 0 {
		t.Fatalf("keygen: exit %d\n%s", code, errOut)
	}
	fi, err := os.Stat(keys)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v; want 0600", fi.Mode(), err)
	}
	serves(t, nil, "--key-file", keys)
	before, _ := os.ReadFile(keys)
	if code, _, errOut := runBinary(t, nil, "", "keygen", keys); code != 1 || !strings.Contains(errOut, "file exists") {
		t.Fatalf("keygen over an existing file: exit %d\n%s", code, errOut)
	}
	if after, _ := os.ReadFile(keys); !bytes.Equal(before, after) {
		t.Fatal("keygen changed an existing key file")
	}
	code, line, _ := runBinary(t, nil, "", "keygen")
	if code != 0 || !strings.HasPrefix(line, "mcp-confirm-key-v1:") {
		t.Fatalf("keygen to stdout: exit %d, %q", code, line)
	}
	f, _ := os.OpenFile(keys, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(line)
	f.Close()
	serves(t, nil, "--key-file", keys) // two keys now
}

// A key file others may read, and a typed passphrase, are refused at
// start-up with the reason and the line, never the key.
func TestBinaryKeyFileRefused(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	if code, _, errOut := runBinary(t, nil, "", "keygen", open); code != 0 {
		t.Fatal(errOut)
	}
	os.Chmod(open, 0o644)
	pass := filepath.Join(dir, "pass")
	os.WriteFile(pass, []byte("# typed by hand\ncorrect horse battery staple, sw0rdfish!\n"), 0o600)
	b64 := filepath.Join(dir, "b64")
	os.WriteFile(b64, []byte("U2VjcmV0S2V5VGhhdElzTm90UmVhbGx5UmFuZG9tQXRBbGxTb3JyeQ==\n"), 0o600)
	for _, tt := range []struct {
		file, want string
	}{
		{open, "has permissions 0644: group or others may read or write it"},
		{pass, "line 2: not a key"},
		{b64, "line 1: a bare base64 string"},
	} {
		code, _, errOut := runBinary(t, nil, "", "--key-file", tt.file)
		if code != 2 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: exit %d, want 2 and %q:\n%s", filepath.Base(tt.file), code, tt.want, errOut)
		}
		if strings.Contains(errOut, "horse") || strings.Contains(errOut, "U2Vjcm") {
			t.Errorf("%s: stderr shows the key:\n%s", filepath.Base(tt.file), errOut)
		}
	}
}

func redisURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("MCP_CONFIRM_REDIS_URL")
	if u == "" {
		t.Skip("set MCP_CONFIRM_REDIS_URL (e.g. redis://127.0.0.1:6379/0) to run this test against Redis")
	}
	return u
}

// The ledger URL from the environment is used (the confirmation lands in
// Redis under the --name namespace); a password on the command line draws
// a warning, the same URL from the environment or a file does not, and
// the password is never shown.
func TestBinaryLedgerFromEnvironment(t *testing.T) {
	rurl := redisURL(t)
	name := fmt.Sprintf("ops-env-%d", time.Now().UnixNano())
	root := t.TempDir()
	f := filepath.Join(root, "a.txt")
	os.WriteFile(f, []byte("a"), 0o644)
	env := []string{"MCP_CONFIRM_LEDGER=" + rurl}
	state, errOut := askOverStdio(t, env, f, "--root", root, "--name", name)
	if state == "" {
		t.Fatalf("no question asked:\n%s", errOut)
	}
	if n := redisKeys(t, rurl, "mcp-confirm:{"+name+"}:*"); n == 0 {
		t.Fatalf("nothing in Redis under the namespace of --name %s", name)
	}

	u, err := url.Parse(rurl)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("default", "s3cret-pw")
	withPW := u.String()
	code, _, errOut := runBinary(t, nil, "", "--ledger", withPW)
	if !strings.Contains(errOut, "--ledger carries a password on the command line") || strings.Contains(errOut, "s3cret-pw") {
		t.Fatalf("password in argv: exit %d, stderr:\n%s", code, errOut)
	}
	file := filepath.Join(t.TempDir(), "ledger")
	os.WriteFile(file, []byte(withPW+"\n"), 0o600)
	for _, run := range [][]string{{"MCP_CONFIRM_LEDGER=" + withPW}, nil} {
		args := []string{}
		if run == nil {
			args = []string{"--ledger-file", file}
		}
		_, _, errOut := runBinary(t, run, "", args...)
		if strings.Contains(errOut, "carries a password") || strings.Contains(errOut, "s3cret-pw") {
			t.Fatalf("%v %v: stderr:\n%s", run, args, errOut)
		}
	}
}

// mrtrClient connects a 2026-07-28 client that answers questions by hand
// to a binary started with args over stdio.
func mrtrClient(t *testing.T, env []string, args ...string) (*mcp.ClientSession, *mcptest.SyncBuffer) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	stderr := &mcptest.SyncBuffer{}
	cmd.Stderr = stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "ops-test", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return nil, errors.New("answered by hand")
		},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() { cs.Close() })
	return cs, stderr
}

// askOverStdio asks to delete path on a binary run with args, and returns
// the sealed requestState of the question ("" if none was asked).
func askOverStdio(t *testing.T, env []string, path string, args ...string) (string, string) {
	t.Helper()
	cs, stderr := mrtrClient(t, env, args...)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": path}})
	if err != nil || !res.NeedsInput() {
		return "", fmt.Sprintf("%v %+v\n%s", err, res, stderr.String())
	}
	return res.RequestState, stderr.String()
}

// answerOverStdio approves state on a binary run with args.
func answerOverStdio(t *testing.T, env []string, path, state string, args ...string) (*mcp.CallToolResult, error) {
	t.Helper()
	cs, _ := mrtrClient(t, env, args...)
	return cs.CallTool(context.Background(), &mcp.CallToolParams{
		Name:           "delete_file",
		Arguments:      map[string]any{"path": path},
		InputResponses: mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}},
		RequestState:   state,
	})
}

// redisKeys counts the keys matching pattern.
func redisKeys(t *testing.T, rawURL, pattern string) int {
	t.Helper()
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	keys, err := c.Keys(context.Background(), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}

// --name is the audience and the ledger's namespace: a replica of the same
// name (same key file, same Redis) redeems an approval; a service of
// another name sharing both refuses it at the boundary.
func TestBinaryName(t *testing.T) {
	rurl := redisURL(t)
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	if code, _, errOut := runBinary(t, nil, "", "keygen", keys); code != 0 {
		t.Fatal(errOut)
	}
	root := t.TempDir()
	f := filepath.Join(root, "a.txt")
	os.WriteFile(f, []byte("a"), 0o644)
	suffix := fmt.Sprint(time.Now().UnixNano())
	env := []string{"MCP_CONFIRM_LEDGER=" + rurl}
	replica := func(name string) []string {
		return []string{"--root", root, "--key-file", keys, "--name", name + suffix}
	}
	state, errOut := askOverStdio(t, env, f, replica("ops-a-")...)
	if state == "" {
		t.Fatalf("no question:\n%s", errOut)
	}
	_, err := answerOverStdio(t, env, f, state, replica("ops-b-")...)
	if werr, ok := errors.AsType[*jsonrpc.Error](err); !ok || werr.Code != requeststate.RejectCode {
		t.Fatalf("another --name: want the boundary's refusal, got %v", err)
	}
	if _, err := os.Stat(f); err != nil {
		t.Fatalf("another --name acted: %v", err)
	}
	res, err := answerOverStdio(t, env, f, state, replica("ops-a-")...)
	if err != nil || res.IsError {
		t.Fatalf("a replica of the same --name: %v %+v", err, res)
	}
	if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("not deleted by a replica of the same --name")
	}
	if redisKeys(t, rurl, "mcp-confirm:{ops-a-"+suffix+"}:*") == 0 || redisKeys(t, rurl, "mcp-confirm:{ops-b-"+suffix+"}:*") != 0 {
		t.Fatal("the confirmation is not kept under the namespace of its --name alone")
	}
}

// The durability check fires at start-up on a Redis that takes RDB
// snapshots: the binary exits naming the setting and the flag that accepts
// the risk; with --allow-ledger-rollback it serves, and warns.
func TestBinaryLedgerDurability(t *testing.T) {
	r := redistest.Start(t, "--save", "3600 1", "--appendonly", "no")
	env := []string{"MCP_CONFIRM_LEDGER=" + r.URL()}
	code, _, errOut := runBinary(t, env, "")
	if code != 1 || !strings.Contains(errOut, `save "3600 1" takes RDB snapshots`) || !strings.Contains(errOut, "--allow-ledger-rollback") {
		t.Fatalf("exit %d, want 1 naming the setting and the flag:\n%s", code, errOut)
	}
	if errOut := serves(t, env, "--allow-ledger-rollback"); !strings.Contains(errOut, "level=WARN") || !strings.Contains(errOut, "RDB snapshots") {
		t.Fatalf("--allow-ledger-rollback: no warning; stderr:\n%s", errOut)
	}
	safe := redistest.Start(t, "--save", "", "--appendonly", "no")
	if errOut := serves(t, []string{"MCP_CONFIRM_LEDGER=" + safe.URL()}); strings.Contains(errOut, "can bring a spent approval back") {
		t.Fatalf("a Redis without persistence drew the warning; stderr:\n%s", errOut)
	}
}
