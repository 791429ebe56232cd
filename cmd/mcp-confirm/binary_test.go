package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
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

// lockedBuffer collects a process's stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// proc is a running binary.
type proc struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	url    string // for --http 127.0.0.1:0
}

var addrLine = regexp.MustCompile(`addr=(http://\S+)`)

// startHTTP runs the binary with --http 127.0.0.1:0 and args, and waits
// for the address it serves.
func startHTTP(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{stderr: &lockedBuffer{}}
	p.cmd = exec.Command(binary(t), append(args, "--http", "127.0.0.1:0")...)
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

// rssMB is the process's resident memory, in MB.
func (p *proc) rssMB(t *testing.T) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return float64(kb) / 1024
		}
	}
	t.Fatal("no VmRSS")
	return 0
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
// all of them (the issue measured 123 MB).
func TestBinaryHTTPSessionsBounded(t *testing.T) {
	const n = 10_000
	grew := map[string]float64{}
	for _, tt := range []struct {
		name    string
		timeout string
	}{{"control", "1h"}, {"timeout", "1s"}} {
		t.Run(tt.name, func(t *testing.T) {
			p := startHTTP(t, nil, "--session-timeout", tt.timeout, "--max-sessions", "20000")
			openSessions(t, p.url, 50) // warm up
			before := p.rssMB(t)
			start := time.Now()
			ids := openSessions(t, p.url, n)
			opened := time.Since(start)
			if tt.timeout == "1s" {
				// Every session has timed out once the last one has. A probe
				// of a live session restarts its timer: probe every 2 s.
				for deadline := time.Now().Add(15 * time.Second); ; {
					time.Sleep(2 * time.Second)
					resp, err := postJSON(http.DefaultClient, p.url, ids[n-1], `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
					if err == nil && resp.StatusCode == http.StatusNotFound {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("the last session still answers 15 s after it was opened: %v %v", resp, err)
					}
				}
				if resp, err := postJSON(http.DefaultClient, p.url, ids[0], `{"jsonrpc":"2.0","id":2,"method":"ping"}`); err != nil || resp.StatusCode != http.StatusNotFound {
					t.Fatalf("the first session still answers after the timeout: %v %v", resp, err)
				}
			}
			grew[tt.name] = p.rssMB(t) - before
			t.Logf("%d sessions opened in %v; RSS grew %.1f MB", n, opened.Round(time.Millisecond), grew[tt.name])
		})
	}
	if grew["control"] < 40 {
		t.Fatalf("control: 10,000 live sessions grew RSS by only %.1f MB: the test cannot tell", grew["control"])
	}
	if grew["timeout"] > grew["control"]/2 {
		t.Fatalf("with a 1 s timeout RSS grew %.1f MB, without one %.1f MB: not bounded", grew["timeout"], grew["control"])
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
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Scanner
	cmd *exec.Cmd
}

func startStdio(t *testing.T, args ...string) *stdioBin {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	s := &stdioBin{t: t, in: in, out: bufio.NewScanner(out), cmd: cmd}
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
			s.t.Fatalf("the binary closed stdout after %.60q", line)
		}
	case <-time.After(10 * time.Second):
		s.t.Fatalf("no reply to %.60q", line)
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
	s := startStdio(t, "--max-message-bytes", "2048")
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
