package proxy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// The load benchmarks (BenchmarkProxyForwarders, BenchmarkProxyPeers) drive
// MCP servers over streamable HTTP with raw JSON-RPC, as many clients at once
// as the concurrency asks, each on a session of its own, making the same
// tools/call of the echo upstream (roles_test.go) back to back. The servers
// take turns in short phases, so that the machine's load falls on all of
// them alike, and the figures are ratios of servers measured in one loop.

// A loadTarget is one server under load, and what its phases measured.
type loadTarget struct {
	name string
	url  string
	era  string // the clients' protocol era: eraLegacy or eraMRTR
	cmd  *exec.Cmd
	log  *mcptest.SyncBuffer

	sessions []*loadSession
	lat      []time.Duration // latencies of the calls measured
	calls    int
	busy     time.Duration // the measured phases' total length
	cpu      time.Duration // CPU time its process tree spent in them
	shared   bool          // another target runs the same process (as)
}

// A loadSession is one client of a target: an older-era session (its id and
// negotiated version) or a 2026-07-28 client, which needs none.
type loadSession struct {
	t       *loadTarget
	id      string
	version string
	seq     int
}

var loadHTTP = &http.Client{Transport: &http.Transport{
	MaxIdleConns: 256, MaxIdleConnsPerHost: 256, DisableCompression: true,
}}

// echoText is the text every call echoes: about a line of a real tool
// call's arguments.
const echoText = "/home/alice/projects/report-2026/drafts/final.pdf: the quarterly numbers"

var addrLog = regexp.MustCompile(`addr=(http://\S+)`)

// startTarget runs cmd, whose log names the address it serves (as the
// mcp-confirm binary and the forwarders log it), or which serves port when
// port is not 0; it returns once the server answers.
func startTarget(tb testing.TB, name, era string, port int, cmd *exec.Cmd) *loadTarget {
	tb.Helper()
	t := &loadTarget{name: name, era: era, cmd: cmd, log: &mcptest.SyncBuffer{}}
	cmd.Stdout, cmd.Stderr = t.log, t.log
	if err := cmd.Start(); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	tb.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	if port != 0 {
		t.url = fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if t.url == "" {
			if m := addrLog.FindStringSubmatch(t.log.String()); m != nil {
				t.url = strings.TrimSuffix(m[1], "/") + "/mcp"
			}
		} else if s, err := t.newSession(); err == nil {
			t.sessions = append(t.sessions, s)
			return t
		}
		if cmd.ProcessState != nil {
			break
		}
	}
	tb.Fatalf("%s did not start serving; its output:\n%s", name, t.log.String())
	return nil
}

// freePort returns a loopback port that was free a moment ago, for servers
// that cannot be told to pick one.
func freePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// newSession opens a client session: for the older era, initialize and
// notifications/initialized.
func (t *loadTarget) newSession() (*loadSession, error) {
	s := &loadSession{t: t, version: t.era}
	if t.era == eraMRTR {
		return s, nil
	}
	body := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + t.era +
		`","capabilities":{},"clientInfo":{"name":"load","version":"1"}}}`
	res, hdr, err := s.post("initialize", "", []byte(body))
	if err != nil {
		return nil, err
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(res, &init); err != nil || init.ProtocolVersion == "" {
		return nil, fmt.Errorf("initialize: result %s: %v", res, err)
	}
	s.id, s.version = hdr.Get("Mcp-Session-Id"), init.ProtocolVersion
	if _, _, err := s.post("notifications/initialized", "", []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
		return nil, err
	}
	return s, nil
}

// session returns the target's i-th client session, opening it if need be.
func (t *loadTarget) session(i int) (*loadSession, error) {
	for len(t.sessions) <= i {
		s, err := t.newSession()
		if err != nil {
			return nil, fmt.Errorf("%s: session %d: %w", t.name, len(t.sessions), err)
		}
		t.sessions = append(t.sessions, s)
	}
	return t.sessions[i], nil
}

// call makes one tools/call of echo and checks that the echo came back.
func (s *loadSession) call() error {
	s.seq++
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{`, s.seq)
	if s.t.era == eraMRTR {
		b.WriteString(`"_meta":{"io.modelcontextprotocol/protocolVersion":"` + eraMRTR +
			`","io.modelcontextprotocol/clientInfo":{"name":"load","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},`)
	}
	fmt.Fprintf(&b, `"name":"echo","arguments":{"text":"%s %d"}}}`, echoText, s.seq)
	res, _, err := s.post("tools/call", "echo", b.Bytes())
	if err != nil {
		return err
	}
	var out struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(res, &out); err != nil {
		return fmt.Errorf("tools/call: result %s: %v", res, err)
	}
	if want := echoText + " " + strconv.Itoa(s.seq); out.IsError || len(out.Content) != 1 || out.Content[0].Text != want {
		return fmt.Errorf("tools/call: got %s, want the echo of %q", res, want)
	}
	return nil
}

// post sends one JSON-RPC message and returns the result of the response to
// it (nil for a notification), read from a JSON body or an event stream.
func (s *loadSession) post(method, name string, body []byte) (json.RawMessage, http.Header, error) {
	req, err := http.NewRequest(http.MethodPost, s.t.url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		h.Set("Mcp-Session-Id", s.id)
	}
	if method != "initialize" {
		h.Set("Mcp-Protocol-Version", s.version)
	}
	if s.t.era == eraMRTR {
		h.Set("Mcp-Method", method)
		if name != "" {
			h.Set("Mcp-Name", name)
		}
	}
	resp, err := loadHTTP.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if strings.HasPrefix(method, "notifications/") {
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode/100 != 2 {
			return nil, nil, fmt.Errorf("%s: HTTP %s", method, resp.Status)
		}
		return nil, resp.Header, nil
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return nil, nil, fmt.Errorf("%s: HTTP %s: %s", method, resp.Status, b)
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	found := false
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 4096), 1<<20)
		for !found && sc.Scan() {
			data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:"))
			if data = bytes.TrimSpace(data); !ok || len(data) == 0 {
				continue // another field, or an empty event (a stream's priming one)
			}
			msg.ID, msg.Result, msg.Error = nil, nil, nil
			if err := json.Unmarshal(data, &msg); err != nil {
				return nil, nil, fmt.Errorf("%s: event %s: %v", method, data, err)
			}
			found = msg.ID != nil
		}
		if err := sc.Err(); err != nil {
			return nil, nil, err
		}
	} else {
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, nil, err
		}
		if err := json.Unmarshal(data, &msg); err != nil {
			return nil, nil, fmt.Errorf("%s: body %s: %v", method, data, err)
		}
		found = msg.ID != nil
	}
	switch {
	case !found:
		return nil, nil, fmt.Errorf("%s: no response", method)
	case msg.Error != nil:
		return nil, nil, fmt.Errorf("%s: error %q", method, msg.Error.Message)
	case msg.Result == nil:
		return nil, nil, fmt.Errorf("%s: response without a result", method)
	}
	return msg.Result, resp.Header, nil
}

// phase runs c clients of t, each on its own session, calling back to back
// for d; measured, it records every call's latency and the phase's length.
func (t *loadTarget) phase(c int, d time.Duration, measured bool) error {
	sessions := make([]*loadSession, c)
	for i := range sessions {
		s, err := t.session(i)
		if err != nil {
			return err
		}
		sessions[i] = s
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		lat  []time.Duration
	)
	var cpu0 time.Duration
	if measured && !t.shared {
		var err error
		if cpu0, err = processTreeCPU(t.cmd.Process.Pid); err != nil {
			return err
		}
	}
	start := time.Now()
	deadline := start.Add(d)
	for _, s := range sessions {
		wg.Go(func() {
			var mine []time.Duration
			for time.Now().Before(deadline) {
				t0 := time.Now()
				if err := s.call(); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", t.name, err))
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	took := time.Since(start)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if measured {
		t.lat = append(t.lat, lat...)
		t.calls += len(lat)
		t.busy += took
		if !t.shared {
			cpu1, err := processTreeCPU(t.cmd.Process.Pid)
			if err != nil {
				return err
			}
			t.cpu += cpu1 - cpu0
		}
	}
	return nil
}

func (t *loadTarget) reset() { t.lat, t.calls, t.busy, t.cpu = nil, 0, 0, 0 }

// p50 is the median latency of the calls measured.
func (t *loadTarget) p50() time.Duration {
	if len(t.lat) == 0 {
		return 0
	}
	s := slices.Clone(t.lat)
	slices.Sort(s)
	return s[len(s)/2]
}

// throughput is the calls per second of the measured phases.
func (t *loadTarget) throughput() float64 {
	if t.busy == 0 {
		return 0
	}
	return float64(t.calls) / t.busy.Seconds()
}

// processTreeCPU is the CPU time (user and system) that root and its
// descendants have used, from /proc/PID/stat, at the kernel's 100 Hz.
func processTreeCPU(root int) (time.Duration, error) {
	var ticks int
	err := walkTree(root, func(pid int) error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return err
		}
		// After the command name: state ppid pgrp session tty_nr tpgid
		// flags minflt cminflt majflt cmajflt utime stime.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 13 {
			return fmt.Errorf("/proc/%d/stat: %q", pid, b)
		}
		u, _ := strconv.Atoi(f[11])
		s, _ := strconv.Atoi(f[12])
		ticks += u + s
		return nil
	})
	return time.Duration(ticks) * 10 * time.Millisecond, err
}

// treeMB is the resident memory of the target's process and all its
// descendants (its upstream processes), in MB.
func (t *loadTarget) treeMB() (float64, error) {
	return processTreeMB(t.cmd.Process.Pid)
}

// processTreeMB sums VmRSS over root and its descendants.
func processTreeMB(root int) (float64, error) {
	var kb int
	err := walkTree(root, func(pid int) error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return err
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				kb += n
			}
		}
		return nil
	})
	return float64(kb) / 1024, err
}

// walkTree calls visit for root and each of its descendants, found by
// their parent in /proc/PID/stat. An error of root's visit is returned; a
// descendant that is gone by its visit is skipped.
func walkTree(root int, visit func(pid int) error) error {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone since
		}
		// The command name, in parentheses, may hold spaces: the fields
		// after its last ')' are state, ppid, ...
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], pid)
	}
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = append(queue[1:], children[pid]...)
		if err := visit(pid); err != nil && pid == root {
			return err
		}
	}
	return nil
}

// loadRun measures targets at each concurrency, one sub-benchmark each: per
// b.Loop iteration, a phase of every target in turn (the order rotating),
// after one unmeasured phase each. It reports each target's p50 and
// throughput, the ratios of targets[0] to each other target named in
// against, and the process trees' memory at 1 and 32 clients.
func loadRun(b *testing.B, targets []*loadTarget, against []string, extra func(b *testing.B, by map[string]*loadTarget)) {
	phase := 50 * time.Millisecond
	trees := map[int]map[string]float64{}
	for _, c := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) {
			by := map[string]*loadTarget{}
			for _, t := range targets {
				t.reset()
				by[t.name] = t
				if err := t.phase(c, phase, false); err != nil {
					b.Fatal(err)
				}
			}
			round := 0
			for b.Loop() {
				for i := range targets {
					if err := targets[(i+round)%len(targets)].phase(c, phase, true); err != nil {
						b.Fatal(err)
					}
				}
				round++
			}
			ours := targets[0]
			for _, t := range targets {
				b.ReportMetric(float64(t.p50().Microseconds()), t.name+"-p50-µs")
				b.ReportMetric(t.throughput(), t.name+"-calls/s")
				if !t.shared && t.calls > 0 {
					b.ReportMetric(float64(t.cpu.Microseconds())/float64(t.calls), t.name+"-cpu-µs/call")
				}
			}
			for _, name := range against {
				t := by[name]
				b.ReportMetric(float64(ours.p50())/float64(t.p50()), ours.name+"/"+name)
				b.ReportMetric(ours.throughput()/t.throughput(), "tput-"+ours.name+"/"+name)
			}
			if extra != nil {
				extra(b, by)
			}
			if c == 1 || c == 32 {
				trees[c] = map[string]float64{}
				for _, t := range targets {
					if t.shared {
						continue
					}
					mb, err := t.treeMB()
					if err != nil {
						b.Fatal(err)
					}
					trees[c][t.name] = mb
					b.ReportMetric(mb, t.name+"-tree-MB")
				}
				if c == 32 && trees[1] != nil {
					b.ReportMetric(trees[32][ours.name]/trees[1][ours.name], ours.name+"-tree-32/1")
				}
			}
		})
	}
}

var (
	proxyBinOnce sync.Once
	proxyBin     string
	proxyBinErr  error
)

// proxyBinary builds the mcp-confirm binary once per test process.
func proxyBinary(tb testing.TB) string {
	tb.Helper()
	proxyBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcp-confirm-load-")
		if err != nil {
			proxyBinErr = err
			return
		}
		proxyBin = filepath.Join(dir, "mcp-confirm")
		if out, err := exec.Command("go", "build", "-o", proxyBin, "github.com/mcp-confirm/mcp-confirm/cmd/mcp-confirm").CombinedOutput(); err != nil {
			proxyBinErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if proxyBinErr != nil {
		tb.Fatal(proxyBinErr)
	}
	return proxyBin
}

// startProxy runs the built mcp-confirm proxy over HTTP in front of the echo
// upstream, with echo allowed: every call passes through.
func startProxy(tb testing.TB, name, era string) *loadTarget {
	tb.Helper()
	policy := filepath.Join(tb.TempDir(), "policy.toml")
	if err := os.WriteFile(policy, []byte("name = \"echo\"\nallow = [\"echo\"]\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(proxyBinary(tb), "proxy", "--http", "127.0.0.1:0", "--insecure-no-auth", "--policy", policy,
		"--upstream-env", roleEnv+"="+roleUpstream, "--", os.Args[0])
	return startTarget(tb, name, era, 0, cmd)
}

// startRole runs this test binary in role (a forwarder).
func startRole(tb testing.TB, name, role string) *loadTarget {
	tb.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), roleEnv+"="+role)
	return startTarget(tb, name, eraLegacy, 0, cmd)
}

// as returns a second target on t's server, with clients of era.
func (t *loadTarget) as(name, era string) *loadTarget {
	return &loadTarget{name: name, url: t.url, era: era, cmd: t.cmd, log: t.log, shared: true}
}
