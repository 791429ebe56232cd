package main

import (
	"bytes"
	"context"
	"encoding/json"
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
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
	"github.com/mcp-confirm/mcp-confirm/internal/otlptest"
)

// TestMetricsFlag: --metrics serves on loopback unless told otherwise: a
// bare :PORT means 127.0.0.1:PORT, a non-loopback address is refused
// (exit 2, naming the flag that would allow it) for the server and the
// proxy alike, and accepted with --allow-metrics-off-loopback, which
// means nothing without --metrics. Nothing is served when refused.
func TestMetricsFlag(t *testing.T) {
	for _, tt := range []struct {
		args []string
		addr string // resolved; "" with want
		want string // in the error
	}{
		{[]string{"--metrics", "127.0.0.1:9464"}, "127.0.0.1:9464", ""},
		{[]string{"--metrics", "[::1]:9464"}, "[::1]:9464", ""},
		{[]string{"--metrics", "localhost:9464"}, "localhost:9464", ""},
		{[]string{"--metrics", ":9464"}, "127.0.0.1:9464", ""},
		{[]string{"--metrics", "0.0.0.0:9464"}, "", "--allow-metrics-off-loopback"},
		{[]string{"--metrics", "[::]:9464"}, "", "--allow-metrics-off-loopback"},
		{[]string{"--metrics", "192.0.2.7:9464"}, "", "not a loopback address"},
		{[]string{"--metrics", "metrics.example.com:9464"}, "", "not a loopback address"},
		{[]string{"--metrics", "0.0.0.0:9464", "--allow-metrics-off-loopback"}, "0.0.0.0:9464", ""},
		{[]string{"--metrics", "9464"}, "", "want HOST:PORT"},
		{[]string{"--metrics", "127.0.0.1:"}, "", "want HOST:PORT"},
		{[]string{"--allow-metrics-off-loopback"}, "", "applies to --metrics"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c, err := parse(tt.args, io.Discard)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("parse: %v, want an error naming %q", err, tt.want)
				}
				var stderr bytes.Buffer
				if code := run(context.Background(), append([]string{"proxy"}, append(tt.args, "--upstream", "http://127.0.0.1:1/mcp")...), nil, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), tt.want) {
					t.Fatalf("proxy: exit %d, stderr:\n%s", code, stderr.String())
				}
				return
			}
			if err != nil || c.front.observe.addr != tt.addr {
				t.Fatalf("parse: %v, address %q; want %q", err, c.front.observe.addr, tt.addr)
			}
		})
	}
}

// metricsLine is the line the binary logs with the metrics' URL.
var metricsLine = regexp.MustCompile(`metrics=(http://\S+/metrics)`)

// A target is a binary serving metrics, and the run scripted against it.
type target struct {
	job     string // server-memory, proxy-redis, …
	store   string // memory, redis, postgres
	p       *proc
	metrics string   // its metrics URL
	root    string   // the server's --root
	made    []string // the files the server was asked about
	effects func() int
}

// startTarget runs the binary as front (server or proxy) on the store at
// ledger, serving MCP and metrics on loopback ports of their own.
func startTarget(t *testing.T, front, store, ledger string) *target {
	t.Helper()
	name := fmt.Sprintf("observe-%s-%s-%d", front, store, time.Now().UnixNano())
	args := []string{"--http", "127.0.0.1:0", "--insecure-no-auth", "--metrics", "127.0.0.1:0", "--name", name}
	if ledger != "" {
		args = append(args, "--ledger", ledger)
	}
	tg := &target{job: front + "-" + store, store: store}
	if front == "server" {
		tg.root = t.TempDir()
		tg.p = startBinary(t, nil, append(args, "--root", tg.root)...)
		tg.effects = func() int {
			n := 0
			for _, f := range tg.made {
				if _, err := os.Stat(f); os.IsNotExist(err) {
					n++
				}
			}
			return n
		}
	} else {
		h := newHelper(t)
		tg.p = startBinary(t, nil, append(append([]string{"proxy"}, args...), append([]string{"--"}, h.argv(t)...)...)...)
		tg.effects = func() int { return len(h.calls(t)) }
	}
	m := metricsLine.FindStringSubmatch(tg.p.stderr.String())
	if m == nil {
		t.Fatalf("%s: no metrics address logged:\n%s", tg.job, tg.p.stderr.String())
	}
	tg.metrics = m[1]
	return tg
}

// call returns the target's confirmed call about subject i: deleting
// file f<i>.txt of the server's root (created now), or the proxy's echo of
// "call <i>".
func (tg *target) call(t *testing.T, i int) *mcp.CallToolParams {
	t.Helper()
	if !strings.HasPrefix(tg.job, "server") {
		return &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": fmt.Sprint("call ", i)}}
	}
	f := filepath.Join(tg.root, fmt.Sprintf("f%d.txt", i))
	if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tg.made = append(tg.made, f)
	return &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": f}}
}

// The counts the scripted run leaves on every target.
const (
	capQuestions = 99 // unanswered, to fill the cap with the forged one's
	runQuestions = 4 + capQuestions
)

// script runs the scripted run against tg through real go-sdk clients
// over streamable HTTP: an approval and its replay, a decline, a forged
// requestState, an approval replayed onto other arguments (2026-07-28,
// answered by hand), a confirmed call in the older era, then questions
// left unanswered until the per-principal cap (100) refuses one.
func script(t *testing.T, tg *target) {
	t.Helper()
	ctx := context.Background()
	manual := mcp.NewClient(&mcp.Implementation{Name: "observe-script", Version: "1"}, &mcp.ClientOptions{
		// Declares elicitation; the script answers by hand.
		ElicitationHandler: mcptest.Accept().Handle,
		MultiRoundTrip:     &mcp.MultiRoundTripOptions{Disabled: true},
	})
	cs, err := manual.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: tg.p.url}, &mcp.ClientSessionOptions{ProtocolVersion: mcptest.EraMRTR})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ask := func(p *mcp.CallToolParams) string {
		t.Helper()
		res, err := cs.CallTool(ctx, p)
		if err != nil || !res.NeedsInput() {
			t.Fatalf("%s: ask: %v %s", tg.job, err, mcptest.Describe(res))
		}
		return res.RequestState
	}
	answer := func(p *mcp.CallToolParams, state string, a *mcp.ElicitResult) (*mcp.CallToolResult, error) {
		q := *p
		q.RequestState, q.InputResponses = state, mcp.InputResponseMap{confirm.InputID: a}
		return cs.CallTool(ctx, &q)
	}
	p1 := tg.call(t, 1)
	s1 := ask(p1)
	if res, err := answer(p1, s1, mcptest.Yes()); err != nil || res.IsError {
		t.Fatalf("%s: approval: %v %s", tg.job, err, mcptest.Describe(res))
	}
	if res, err := answer(p1, s1, mcptest.Yes()); err != nil || !strings.Contains(mcptest.Text(res), "earlier execution") {
		t.Fatalf("%s: replay: %v %s", tg.job, err, mcptest.Describe(res))
	}
	p2 := tg.call(t, 2)
	if res, err := answer(p2, ask(p2), &mcp.ElicitResult{Action: "decline"}); err != nil || !strings.Contains(mcptest.Text(res), "Not confirmed") {
		t.Fatalf("%s: decline: %v %s", tg.job, err, mcptest.Describe(res))
	}
	p3 := tg.call(t, 3)
	s3 := ask(p3)
	_, err = answer(p3, s3[:len(s3)/2]+"AAAA"+s3[len(s3)/2+4:], mcptest.Yes())
	mcptest.WantBoundaryRefusal(t, nil, err)
	_, err = answer(p2, s1, mcptest.Yes()) // the first approval, onto the second call
	mcptest.WantBoundaryRefusal(t, nil, err)

	legacy := mcp.NewClient(&mcp.Implementation{Name: "observe-script-legacy", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: mcptest.Accept().Handle})
	ls, err := legacy.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: tg.p.url}, &mcp.ClientSessionOptions{ProtocolVersion: mcptest.EraLegacy})
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close()
	if res, err := ls.CallTool(ctx, tg.call(t, 4)); err != nil || res.IsError {
		t.Fatalf("%s: older era: %v %s", tg.job, err, mcptest.Describe(res))
	}
	for i := range capQuestions {
		ask(tg.call(t, 10+i))
	}
	res, err := cs.CallTool(ctx, tg.call(t, 9))
	if err != nil || !res.IsError || !strings.Contains(mcptest.Text(res), "Too many confirmations") {
		t.Fatalf("%s: past the cap: %v %s", tg.job, err, mcptest.Describe(res))
	}
	if n := tg.effects(); n != 2 {
		t.Fatalf("%s: the action took effect %d times, want 2", tg.job, n)
	}
}

// prometheus is a Prometheus server a test started.
type prometheus struct {
	url string
	log *mcptest.SyncBuffer
}

// startPrometheus runs Debian's prometheus on a free loopback port with a
// configuration of the test's own, scraping each target every second as
// job tg.job, its data in a temporary directory; stopped when the test
// ends.
func startPrometheus(t *testing.T, targets []*target) *prometheus {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("install Prometheus (Debian: apt-get install prometheus=2.42.0+ds-5+deb12u1) to run this test")
	}
	dir := t.TempDir()
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n")
	for _, tg := range targets {
		u, err := url.Parse(tg.metrics)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&cfg, "  - job_name: %q\n    metrics_path: %q\n    static_configs:\n      - targets: [%q]\n", tg.job, u.Path, u.Host)
	}
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := &prometheus{url: "http://" + addr, log: &mcptest.SyncBuffer{}}
	cmd := exec.Command(bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if res, err := http.Get(p.url + "/-/ready"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus did not become ready:\n%s", p.log)
		}
	}
}

// query runs an instant PromQL query through Prometheus's HTTP API and
// returns each series' value by job.
func (p *prometheus) query(t *testing.T, q string) map[string]float64 {
	t.Helper()
	res, err := http.Get(p.url + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || out.Status != "success" {
		t.Fatalf("query %s: %v %s %s", q, err, out.Status, out.Error)
	}
	values := map[string]float64{}
	for _, r := range out.Data.Result {
		v, err := strconv.ParseFloat(fmt.Sprint(r.Value[1]), 64)
		if err != nil {
			t.Fatalf("query %s: value %v", q, r.Value[1])
		}
		values[r.Metric["job"]] = v
	}
	return values
}

// TestPrometheusScrapesBinary: a real Prometheus (Debian's, on a loopback
// port with a configuration and data directory of the test's own) scrapes
// the built binary — the reference server and the proxy, on each of the
// three stores — while a scripted run goes through real go-sdk clients of
// both protocol eras, and PromQL through its HTTP API returns exactly what
// the run did on every target: questions, approvals, a decline, a replay
// answered from the record, redemptions, boundary refusals by class (one
// forged, one replayed onto other arguments), a cap refusal, the pending
// gauge (the store's count), decision and action times, and ledger
// operations labelled by store. Negative controls: an idle target reads
// zero, no series carries a label outside the fixed set, the MCP port
// serves no metrics, and promtool, clean on every exposition scraped,
// rejects a broken one.
func TestPrometheusScrapesBinary(t *testing.T) {
	stores := []struct{ kind, env string }{{"memory", ""}, {"redis", "MCP_CONFIRM_REDIS_URL"}, {"postgres", "MCP_CONFIRM_POSTGRES_URL"}}
	var missing []string
	for _, s := range stores {
		if s.env != "" && os.Getenv(s.env) == "" {
			missing = append(missing, s.env)
		}
	}
	if len(missing) > 0 {
		t.Skipf("set %s to scrape the binary on every store", strings.Join(missing, " and "))
	}
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Skip("install Prometheus (Debian: apt-get install prometheus=2.42.0+ds-5+deb12u1) for promtool")
	}
	var targets []*target
	for _, front := range []string{"server", "proxy"} {
		for _, s := range stores {
			targets = append(targets, startTarget(t, front, s.kind, os.Getenv(s.env)))
		}
	}
	idle := startTarget(t, "server", "memory", "")
	idle.job = "idle"
	prom := startPrometheus(t, append(targets, idle))
	for _, tg := range targets {
		script(t, tg)
	}

	jobs := func(v float64) map[string]float64 {
		m := map[string]float64{"idle": 0}
		for _, tg := range targets {
			m[tg.job] = v
		}
		return m
	}
	checks := []struct {
		query string
		want  map[string]float64
	}{
		{`mcp_confirm_questions_total`, jobs(runQuestions)},
		{`mcp_confirm_approvals_total{via="in_band"}`, jobs(3)},
		{`mcp_confirm_declines_total{via="in_band"}`, jobs(1)},
		{`mcp_confirm_redemptions_total`, jobs(2)},
		{`mcp_confirm_replays_total{state="done"}`, jobs(1)},
		{`mcp_confirm_boundary_refusals_total{class="forged"}`, jobs(1)},
		{`mcp_confirm_boundary_refusals_total{class="mismatch"}`, jobs(1)},
		{`mcp_confirm_cap_refusals_total`, jobs(1)},
		{`mcp_confirm_in_doubt_total`, jobs(0)},
		{`mcp_confirm_pending`, jobs(1 + capQuestions)},
		{`mcp_confirm_decision_seconds_count{answer="approve"}`, jobs(2)},
		{`mcp_confirm_decision_seconds_count{answer="decline"}`, jobs(1)},
		{`mcp_confirm_action_seconds_count{outcome="done"}`, jobs(2)},
		// Every question's Add, and the one the cap refused.
		{`sum by (job) (mcp_confirm_ledger_seconds_count{op="add"})`, jobs(runQuestions + 1)},
	}
	up := jobs(1)
	up["idle"] = 1
	checks = append(checks, struct {
		query string
		want  map[string]float64
	}{`sum by (job) (up)`, up})
	for _, tg := range append(targets, idle) {
		checks = append(checks, struct {
			query string
			want  map[string]float64
		}{fmt.Sprintf(`count by (job) (mcp_confirm_ledger_seconds_count{job=%q, store=%q, op="spend"})`, tg.job, tg.store), map[string]float64{tg.job: 1}})
	}
	// Prometheus scrapes every second: wait for the last scrape to see the
	// run's end.
	deadline := time.Now().Add(60 * time.Second)
	for _, c := range checks {
		for {
			got := prom.query(t, c.query)
			if fmt.Sprint(got) == fmt.Sprint(c.want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s = %v, want %v\nprometheus:\n%s", c.query, got, c.want, prom.log)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// No series of ours has a label beyond the fixed set (Prometheus adds
	// job and instance).
	if got := prom.query(t, `count by (job) ({__name__=~"mcp_confirm_.+", tool!=""} or {__name__=~"mcp_confirm_.+", principal!=""})`); len(got) != 0 {
		t.Fatalf("series labelled by tool or principal: %v", got)
	}
	labels := map[string]bool{"__name__": true, "job": true, "instance": true, "le": true,
		"via": true, "state": true, "layer": true, "class": true, "answer": true, "outcome": true, "store": true, "op": true}
	res, err := http.Get(prom.url + "/api/v1/labels?match[]=" + url.QueryEscape(`{__name__=~"mcp_confirm_.+"}`))
	if err != nil {
		t.Fatal(err)
	}
	var names struct{ Data []string }
	json.NewDecoder(res.Body).Decode(&names)
	res.Body.Close()
	if len(names.Data) == 0 {
		t.Fatal("no label names returned")
	}
	for _, l := range names.Data {
		if !labels[l] {
			t.Errorf("a series of ours has the label %q", l)
		}
	}

	// The MCP port serves no metrics.
	if res, err := http.Get(targets[0].p.url + "/metrics"); err == nil {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if strings.Contains(string(b), "mcp_confirm_") {
			t.Fatal("the MCP port serves the metrics")
		}
	}
	// promtool: clean on every exposition, and a control it rejects.
	for _, tg := range targets {
		req, _ := http.NewRequest("GET", tg.metrics, nil)
		req.Header.Set("Accept", "text/plain; version=0.0.4")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if out, err := promtool(body); err != nil || out != "" {
			t.Errorf("%s: promtool check metrics: %v\n%s", tg.job, err, out)
		}
	}
	if out, err := promtool([]byte("# HELP requests Requests.\n# TYPE requests counter\nrequests 1\n")); err == nil && out == "" {
		t.Fatal("promtool passed a counter without _total: the check checks nothing")
	}
}

// promtool runs promtool check metrics on an exposition, and returns what
// it printed.
func promtool(exposition []byte) (string, error) {
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = bytes.NewReader(exposition)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// TestBinaryExportsTraces: the binary exports over OTLP/HTTP when
// OTEL_EXPORTER_OTLP_ENDPOINT names a collector (here an in-process
// receiver): a confirmed 2026-07-28 call whose client names its span in
// _meta.traceparent arrives as that trace's spans, the service named by
// --name. The batch delay is an hour, so the spans arrive only because
// the binary sends what is left when it stops (SIGTERM).
func TestBinaryExportsTraces(t *testing.T) {
	rcv := otlptest.Start(t)
	root := t.TempDir()
	name := fmt.Sprintf("observe-traces-%d", time.Now().UnixNano())
	p := startHTTP(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=3600000"}, "--root", root, "--name", name)
	if !strings.Contains(p.stderr.String(), "exporting traces") {
		t.Fatalf("no exporting line:\n%s", p.stderr.String())
	}
	cs, err := connect(t, p.url, "", mcptest.EraMRTR)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(root, "a.txt")
	os.WriteFile(f, []byte("a"), 0o600)
	traceID, spanID := "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": f},
		Meta: mcp.Meta{"traceparent": "00-" + traceID + "-" + spanID + "-01"}})
	if err != nil || res.IsError {
		t.Fatalf("delete_file: %v %s", err, mcptest.Describe(res))
	}
	if n, _ := rcv.Requests(); n != 0 {
		t.Fatalf("%d exports before the batch delay or the stop", n)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
	spans := rcv.Trace(traceID)
	names := map[string]int{}
	for _, s := range spans {
		names[s.Name]++
		if s.ParentID != spanID {
			t.Errorf("span %s's parent is %s, want the client's span %s", s.Name, s.ParentID, spanID)
		}
		if s.Service != name {
			t.Errorf("span %s of service %q, want %q", s.Name, s.Service, name)
		}
	}
	want := map[string]int{"confirm.ask": 1, "confirm.redeem": 1, "confirm.act": 1, "confirm.complete": 1}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("spans %v, want %v:\n%s\nstderr:\n%s", names, want, otlptest.Tree(rcv.Spans()), p.stderr.String())
	}
}
