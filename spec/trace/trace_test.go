package trace

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// The clock of a generated trace moves in whole ticks; TTL, lease and grace
// are small multiples so that expiry, leases ending and forgetting happen
// within a short trace.
const (
	tick  = time.Second
	ttl   = 3 * tick
	lease = 2 * tick
	grace = 2 * tick
)

// A timing is how a trace's clock counts: in ticks of tick, with the
// ledger's TTL and lease and the store's grace; and what the store does
// when it reads a lease that has ended (DoubtWrites in the module:
// "{TRUE}" writes "in doubt", "{FALSE}" answers so on every read).
type timing struct {
	tick, ttl, lease, grace time.Duration
	doubtWrites             string
}

// simulated is the timing of the traces of the memory store, whose clock
// the tests move in whole ticks.
var simulated = timing{tick: tick, ttl: ttl, lease: lease, grace: grace, doubtWrites: "{TRUE}"}

// at is the time in a trace of event e: an Issue's is its expiry less the
// TTL, the issuing ledger's clock, at which the specification's Issue
// happens (its store's step may come later); any other's is the store's
// clock it was decided on. A trace without expiries (recorded before
// events had them) times its Issues by Time.
func (tm timing) at(e event) time.Time {
	if e.Action == "Issue" && !e.Expires.IsZero() {
		return e.Expires.Add(-tm.ttl)
	}
	return e.Time
}

// kinds are the outcomes a Complete records, drawn at random.
var kinds = []ledger.OutcomeKind{ledger.OutcomeDone, ledger.OutcomeFailed, ledger.OutcomeUnknown}

// owed is a confirmation a replica redeemed and has not completed yet.
type owed struct {
	id      ledger.ID
	replica string
}

var replicas = []string{"r1", "r2"}

// line is one line of a trace: a ledger.Event (as ledger.NDJSON writes it)
// plus the replica whose ledger logged it.
type line struct {
	ledger.Event
	Replica string `json:"replica"`
}

// restartLine is the line the harness writes when it restarts a replica.
type restartLine struct {
	Time    time.Time `json:"time"`
	Action  string    `json:"action"`
	Replica string    `json:"replica"`
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// The approvers of the traces: alice listed by name, bob and carol by
// group, mallory in no listed group. Approvers and Authorized in the
// module TLC checks are these names, and those who may decide.
var (
	approvers  = []ledger.Approver{{ID: "alice"}, {ID: "bob", Groups: []string{"group:ops"}}, {ID: "carol", Groups: []string{"group:ops"}}, {ID: "mallory", Groups: []string{"group:guests"}}}
	authorized = []string{"alice", "bob", "carol"}
)

// needing is the out-of-band approval of a confirmation of the traces:
// required approvals of alice or the group of bob and carol, requested by
// requester ("" for none).
func needing(required int, requester string) *ledger.Approval {
	return &ledger.Approval{Required: required, Approvers: []string{"alice", "group:ops"}, Requester: requester}
}

// drawApproval draws what a confirmation of the traces needs: one in four
// one or two approvals, requested by no one, alice, bob or mallory.
func drawApproval(rng *rand.Rand) *ledger.Approval {
	if rng.IntN(4) != 0 {
		return nil
	}
	return needing(1+rng.IntN(2), []string{"", "alice", "bob", "mallory"}[rng.IntN(4)])
}

// scenario issues, on l, a confirmation no other caller knows of, and plays
// one of eight stories with it, each step an operation of its own (step
// runs one; advance moves the clock, read by now), so that every answer
// occurs in every trace: the reply is lost and the client retries (done),
// the client retries while the action runs (in progress), the action
// outlasts its lease (in doubt), the question is answered after it expired;
// and out of band, an approval awaited, refused to the requester and to an
// unlisted approver, given, refused to a second approver, redeemed; an
// approval then a decline, the redeem declined; a decision after the
// expiry; one after the client withdrew.
//
// story names the story, 0 to 7.
func scenario(rng *rand.Rand, story int, l *ledger.Ledger, ctx context.Context, step func(func()), advance func(time.Duration), now func() time.Time) {
	var appr *ledger.Approval
	switch story {
	case 4:
		appr = needing(1, "bob")
	case 5:
		appr = needing(2, "")
	case 6, 7:
		appr = needing(1, "")
	}
	var c ledger.Confirmation
	var err error
	step(func() { c, err = l.Issue(ctx, ledger.Confirmation{Tool: "delete_file", Approval: appr}) })
	if err != nil {
		return
	}
	redeem := func() (err error) { step(func() { _, err = l.Redeem(ctx, c.ID) }); return err }
	complete := func() {
		step(func() { _ = l.Complete(ctx, c.ID, kinds[rng.IntN(len(kinds))], []byte(`{"deleted":true}`)) })
	}
	decide := func(p int, approve bool) {
		step(func() { _, _ = l.Decide(ctx, c.ID, approvers[p], approve) })
	}
	const alice, bob, carol, mallory = 0, 1, 2, 3
	switch story {
	case 0: // the reply is lost, the client retries: done
		decide(alice, true) // in band: refused
		if redeem() == nil {
			complete()
			_ = redeem()
			step(func() { _, _ = l.Cancel(ctx, c.ID) }) // declined in another tab: answered from the record
			if rng.IntN(2) == 0 {
				complete() // a second Complete changes nothing
			}
		}
	case 1: // the client retries while the action runs: in progress
		if redeem() == nil {
			_ = redeem()
			complete()
		}
	case 2: // the action outlasts its lease: in doubt
		if redeem() == nil {
			advance(l.Lease())
			complete()
			_ = redeem()
		}
	case 3: // the question is answered after it expired
		for {
			var left time.Duration
			step(func() { left = c.Expires.Sub(now()) })
			if left <= 0 {
				break
			}
			advance(tick)
		}
		_ = redeem()
	case 4: // out of band: awaited, refused twice, approved, then redeemed
		_ = redeem()
		decide(bob, true)
		decide(mallory, true)
		decide(alice, true)
		decide(carol, false)
		if redeem() == nil {
			complete()
		}
	case 5: // one approval of two, then a decline
		decide(carol, true)
		decide(alice, false)
		_ = redeem()
		decide(bob, true)
	case 6: // decided after the expiry
		advance(l.TTL())
		decide(carol, true)
	case 7: // decided after the client withdrew
		step(func() { _, _ = l.Cancel(ctx, c.ID) })
		decide(alice, true)
	}
}

// generate drives one ledger per replica, all over one shared memory store
// ("shared") or each over its own ("memory"), through a pseudo-random
// workload of steps operations, and returns the NDJSON trace and its start
// time. A replica that redeems a confirmation completes it at once, later
// (perhaps after its lease ended), or never; only that replica completes
// it, as impl/confirm does. Some steps are scenarios (see scenario). Restarting a replica gives it a new ledger and,
// in the "memory" deployment, a new empty store, and drops the outcomes it
// still owed (a crash).
func generate(t *testing.T, deployment string, seed uint64, steps int) ([]byte, time.Time) {
	t.Helper()
	ctx := context.Background()
	start := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := &clock{t: start}
	rng := rand.New(rand.NewPCG(seed, 1))
	idSource := rand.NewChaCha8([32]byte{byte(seed)})

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	encode := func(v any) {
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	shared := ledger.NewMemory(ledger.MemoryOptions{Grace: grace, Now: clk.now})
	ledgers := map[string]*ledger.Ledger{}
	open := func(r string) {
		var store ledger.Store = shared
		if deployment == "memory" {
			store = ledger.NewMemory(ledger.MemoryOptions{Grace: grace, Now: clk.now})
		}
		l, err := ledger.New(store, ledger.Options{
			TTL: ttl, Lease: lease, Now: clk.now, Rand: idSource,
			Observe: func(e ledger.Event) { encode(line{Event: e, Replica: r}) },
		})
		if err != nil {
			t.Fatal(err)
		}
		ledgers[r] = l
	}
	for _, r := range replicas {
		open(r)
	}

	var issued []ledger.ID
	var acting []owed // redeemed, outcome not yet recorded
	// pick favours recent ids, so that retries race with expiry and each other.
	pick := func() ledger.ID {
		if len(issued) == 0 || rng.IntN(10) == 0 {
			var id ledger.ID // never issued
			_, _ = idSource.Read(id[:])
			return id
		}
		return issued[max(0, len(issued)-1-rng.IntN(3))]
	}
	var completed []ledger.ID
	complete := func(o owed) {
		_ = ledgers[o.replica].Complete(ctx, o.id, kinds[rng.IntN(len(kinds))], []byte(`{"deleted":true}`))
		completed = append(completed, o.id)
	}
	// redeem redeems id on r and, if it may act, completes it now, later or
	// never; meanwhile the client may retry, through either replica.
	redeem := func(r string, id ledger.ID) {
		if _, err := ledgers[r].Redeem(ctx, id); err != nil {
			return
		}
		retry := func() {
			switch rng.IntN(4) {
			case 0:
				_, _ = ledgers[r].Redeem(ctx, id)
			case 1:
				_, _ = ledgers[replicas[rng.IntN(len(replicas))]].Redeem(ctx, id)
			}
		}
		retry()
		switch p := rng.IntN(10); {
		case p < 5:
			complete(owed{id, r})
			retry()
		case p < 9:
			acting = append(acting, owed{id, r})
		}
	}
	for range steps {
		r := replicas[rng.IntN(len(replicas))]
		l := ledgers[r]
		switch p := rng.IntN(100); {
		case p < 14:
			scenario(rng, rng.IntN(8), l, ctx, func(f func()) { f() }, func(d time.Duration) { clk.t = clk.t.Add(d) }, clk.now)
		case p < 24:
			if c, err := l.Issue(ctx, ledger.Confirmation{Tool: "delete_file", Approval: drawApproval(rng)}); err == nil {
				issued = append(issued, c.ID)
			}
		case p < 47:
			redeem(r, pick())
		case p < 56:
			// A late Complete by the replica that redeemed; a second one;
			// or a Complete of a confirmation no one here is acting on:
			// pending, cancelled, unknown.
			switch q := rng.IntN(3); {
			case q == 0 && len(acting) > 0:
				n := rng.IntN(len(acting))
				o := acting[n]
				acting = slices.Delete(acting, n, n+1)
				complete(o)
			case q == 1 && len(completed) > 0:
				complete(owed{completed[len(completed)-1-rng.IntN(min(3, len(completed)))], r})
			default:
				if id := pick(); !slices.ContainsFunc(acting, func(o owed) bool { return o.id == id }) {
					complete(owed{id, r})
				}
			}
		case p < 63:
			// Sometimes the same question is then accepted in another tab.
			id := pick()
			if _, err := l.Cancel(ctx, id); err == nil && rng.IntN(2) == 0 {
				redeem(r, id)
			}
		case p < 72:
			// An approver decides, through either replica.
			_, _ = l.Decide(ctx, pick(), approvers[rng.IntN(len(approvers))], rng.IntN(5) != 0)
		case p < 95:
			clk.t = clk.t.Add(tick)
		default:
			encode(restartLine{Time: clk.t, Action: "Restart", Replica: r})
			acting = slices.DeleteFunc(acting, func(o owed) bool { return o.replica == r })
			open(r)
		}
	}
	return buf.Bytes(), start
}

// An event is one parsed trace line.
type event struct {
	Time      time.Time `json:"time"`
	Action    string    `json:"action"`
	ID        string    `json:"id"`
	Result    string    `json:"result"`
	Outcome   string    `json:"outcome"`
	Replica   string    `json:"replica"`
	Approvals int       `json:"approvals"`
	Requester string    `json:"requester"`
	Approver  string    `json:"approver"`
	Decision  string    `json:"decision"`
	Expires   time.Time `json:"expires"`
	Seq       uint64    `json:"seq"`
}

var (
	actions = []string{"Issue", "Redeem", "Cancel", "Complete", "Decide", "Restart"}
	results = []string{"ok", "unknown", "in_progress", "done", "in_doubt", "cancelled", "expired", "not_acting", "full",
		"awaiting_approval", "declined", "decided", "self_approval", "not_approver", "in_band"}
	nameRE = regexp.MustCompile(`^[a-z0-9]{1,64}$`)
	// quorums are the approvals a confirmation of the traces may need.
	quorums = []int{0, 1, 2}
)

// outcomes says which outcome kinds an event may carry: a Complete the
// kind it recorded, a Redeem or Cancel answered done the recorded kind it
// gave back, any other none.
func outcomes(e event) []string {
	switch {
	case e.Action == "Complete":
		return []string{"done", "failed", "unknown"}
	case e.Result == "done":
		return []string{"done", "failed"}
	}
	return []string{""}
}

func parse(ndjson []byte) ([]event, error) {
	var evs []event
	sc := bufio.NewScanner(bytes.NewReader(ndjson))
	for n := 1; sc.Scan(); n++ {
		var e event
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if e.Action == "Restart" {
			e.Result = "ok"
		}
		switch {
		case !slices.Contains(actions, e.Action):
			return nil, fmt.Errorf("line %d: unknown action %q", n, e.Action)
		case !slices.Contains(results, e.Result):
			return nil, fmt.Errorf("line %d: result %q cannot be checked", n, e.Result)
		case !nameRE.MatchString(e.Replica):
			return nil, fmt.Errorf("line %d: bad replica %q", n, e.Replica)
		case e.Action != "Restart" && !nameRE.MatchString(e.ID):
			return nil, fmt.Errorf("line %d: bad id %q", n, e.ID)
		case !slices.Contains(outcomes(e), e.Outcome):
			return nil, fmt.Errorf("line %d: %s %s with outcome %q", n, e.Action, e.Result, e.Outcome)
		case e.Action == "Issue" && (!slices.Contains(quorums, e.Approvals) || e.Requester != "" && !nameRE.MatchString(e.Requester)),
			e.Action != "Issue" && (e.Approvals != 0 || e.Requester != ""):
			return nil, fmt.Errorf("line %d: %s with approvals %d, requester %q", n, e.Action, e.Approvals, e.Requester)
		case e.Action == "Decide" && (!nameRE.MatchString(e.Approver) || e.Decision != "approve" && e.Decision != "decline"),
			e.Action != "Decide" && (e.Approver != "" || e.Decision != ""):
			return nil, fmt.Errorf("line %d: %s by %q, %q", n, e.Action, e.Approver, e.Decision)
		case e.Action != "Issue" && !e.Expires.IsZero():
			return nil, fmt.Errorf("line %d: %s with an expiry", n, e.Action)
		}
		evs = append(evs, e)
	}
	return evs, sc.Err()
}

// module writes the TLA+ module MCTraceLedger holding evs, with times in
// ticks since start, and its TLC configuration.
//
// With bound positive, TLC stops with the invariant TraceStates violated
// once it has found more than bound distinct states.
func module(evs []event, start time.Time, deployment string, bound int, tm timing) (tla, cfg string, err error) {
	var b strings.Builder
	b.WriteString("---- MODULE MCTraceLedger ----\n")
	b.WriteString("\\* Generated by spec/trace/trace_test.go. Do not edit.\n")
	b.WriteString("EXTENDS TraceLedger, TLC\n\nTraceLog == <<\n")
	ids := map[string]bool{}
	reps := map[string]bool{}
	for n, e := range evs {
		d := tm.at(e).Sub(start)
		if d < 0 || d%tm.tick != 0 {
			return "", "", fmt.Errorf("event %d: time %v is not a whole number of ticks after %v", n+1, tm.at(e), start)
		}
		sep := ","
		if n == len(evs)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "  [t |-> %d, action |-> %q, id |-> %q, replica |-> %q, result |-> %q, outcome |-> %q, need |-> %d, requester |-> %q, approver |-> %q, approve |-> %s]%s\n",
			d/tm.tick, e.Action, e.ID, e.Replica, e.Result, e.Outcome, e.Approvals, e.Requester, e.Approver,
			strings.ToUpper(strconv.FormatBool(e.Decision == "approve")), sep)
		if e.ID != "" {
			ids[e.ID] = true
		}
		reps[e.Replica] = true
	}
	b.WriteString(">>\n\n")
	fmt.Fprintf(&b, "TraceApprovals == %s\n", set(ids))
	fmt.Fprintf(&b, "TraceReplicas == %s\n", set(reps))
	names := map[string]bool{}
	for _, p := range approvers {
		names[p.ID] = true
	}
	fmt.Fprintf(&b, "TraceApprovers == %s\n", set(names))
	fmt.Fprintf(&b, "TraceAuthorized == %s\n", set(maps.Collect(func(yield func(string, bool) bool) {
		for _, n := range authorized {
			if !yield(n, true) {
				return
			}
		}
	})))
	// What TLC prints for each state of the matching behaviour: the event
	// just matched, not every variable (which would print every approval's
	// record at every step and make the output grow with the square of the
	// trace).
	b.WriteString("\nTraceAlias == [next |-> i, now |-> now, matched |-> IF i > 1 THEN Trace[i - 1] ELSE \"nothing yet\"]\n")
	invariants := "INVARIANT TraceIncomplete\n"
	if bound > 0 {
		fmt.Fprintf(&b, "\nTraceStates == TLCGet(\"distinct\") <= %d\n", bound)
		invariants += "INVARIANT TraceStates\n"
	}
	b.WriteString("====\n")

	cfg = fmt.Sprintf(`CONSTANTS
    Trace <- TraceLog
    Approvals <- TraceApprovals
    Replicas <- TraceReplicas
    Clients <- TraceApprovals
    Shared = Shared
    None = None
    Deployments = {%q}
    TTL = %d
    Lease = %d
    MaxLease = %d
    Grace = %d
    MaxSkew = 0
    Standby = FALSE
    DoubtWrites = %s
    Approvers <- TraceApprovers
    Authorized <- TraceAuthorized
    Quorums = {0, 1, 2}
    Flaw = "none"
INIT TraceInit
NEXT TraceNext
%sALIAS TraceAlias
`, deployment, tm.ttl/tm.tick, tm.lease/tm.tick, tm.lease/tm.tick, tm.grace/tm.tick, tm.doubtWrites, invariants)
	return b.String(), cfg, nil
}

func set(m map[string]bool) string {
	var q []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		q = append(q, fmt.Sprintf("%q", k))
	}
	return "{" + strings.Join(q, ", ") + "}"
}

const (
	accepted = "Error: Invariant TraceIncomplete is violated."
	rejected = "Model checking completed. No error has been found."
	bounded  = "Error: Invariant TraceStates is violated."
)

// check runs TLC on evs and reports whether it accepted them as a behaviour
// of the specification, with TLC's output. Deadlock checking is off: once
// the trace is consumed, or when no step matches the next event, there is
// no successor by design. It fails t if the search was not linear in the
// trace (see statesLimit).
func check(t *testing.T, jar string, evs []event, start time.Time, deployment string) (bool, []byte) {
	t.Helper()
	return checkTimed(t, jar, evs, start, deployment, simulated)
}

// checkTimed is check of a trace timed by tm.
func checkTimed(t *testing.T, jar string, evs []event, start time.Time, deployment string, tm timing) (bool, []byte) {
	t.Helper()
	traceSpec, err := os.ReadFile(filepath.Join("..", "TraceLedger.tla"))
	if err != nil {
		t.Fatal(err)
	}
	limit := statesLimit(len(evs))
	res := runTLCTimed(t, jar, evs, start, deployment, traceSpec, limit, tm)
	if res.stopped {
		t.Fatalf("TLC explored more than %d distinct states for %d events, and was stopped: the trace search branches", limit, len(evs))
	}
	t.Logf("TLC: %d distinct states for %d events", res.states, len(evs))
	if res.states > limit {
		t.Errorf("TLC explored %d distinct states for %d events (limit %d): the trace search branches", res.states, len(evs), limit)
	}
	return res.accepted, res.out
}

// statesLimit bounds the distinct states TLC may explore for a trace of n
// events. About 1.5 per event are needed (the event's step and the silent
// steps just before it). The search must stay linear in the trace (see
// Silent in TraceLedger.tla): a step left optional that no later event
// needs doubles the states for the rest of the trace, and a long trace
// then runs for minutes, as one did in CI before Forget was tied to the
// answering store (TestTraceSearchIsLinear).
func statesLimit(n int) int { return 4*n + 100 }

type tlcResult struct {
	accepted bool
	stopped  bool // at the bound on distinct states, with no verdict
	states   int  // distinct states explored
	out      []byte
}

// runTLC checks evs against traceSpec, the text of TraceLedger.tla. With
// bound positive, TLC stops once it has found more than bound distinct
// states, and the test fails: that bound, not the clock, limits a check
// (a trace check is linear in the trace; a search that branches grows
// without end). The clock limits it only to the test's own deadline (go
// test -timeout), less a margin to stop TLC and report: a loaded machine
// may take minutes over a check that takes one alone (two of 408 events
// took 45 s and 64 s at load average 12).
func runTLC(t *testing.T, jar string, evs []event, start time.Time, deployment string, traceSpec []byte, bound int) tlcResult {
	t.Helper()
	return runTLCTimed(t, jar, evs, start, deployment, traceSpec, bound, simulated)
}

// runTLCTimed is runTLC of a trace timed by tm.
func runTLCTimed(t *testing.T, jar string, evs []event, start time.Time, deployment string, traceSpec []byte, bound int, tm timing) tlcResult {
	t.Helper()
	tla, cfg, err := module(evs, start, deployment, bound, tm)
	if err != nil {
		t.Fatal(err)
	}
	ledgerSpec, err := os.ReadFile(filepath.Join("..", "Ledger.tla"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, text := range map[string][]byte{
		"Ledger.tla":        ledgerSpec,
		"TraceLedger.tla":   traceSpec,
		"MCTraceLedger.tla": []byte(tla),
		"MCTraceLedger.cfg": []byte(cfg),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), text, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := beforeDeadline(t)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", "-XX:+UseParallelGC", "-cp", jar, "tlc2.TLC",
		"-workers", "1", "-deadlock", "-noGenerateSpecTE", "-metadir", filepath.Join(dir, "states"),
		"-config", "MCTraceLedger.cfg", "MCTraceLedger.tla")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	exit := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		exit = ee.ExitCode()
	case err != nil:
		t.Fatalf("running TLC: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("TLC did not finish before the test's deadline:\n%s", out)
	}
	lines := strings.Split(string(out), "\n")
	if exit == 12 && slices.Contains(lines, bounded) {
		return tlcResult{stopped: true, out: out}
	}
	states, ok := distinctStates(lines)
	if !ok {
		t.Fatalf("TLC printed no count of distinct states:\n%s", out)
	}
	switch {
	case exit == 12 && slices.Contains(lines, accepted):
		return tlcResult{accepted: true, states: states, out: out}
	case exit == 0 && slices.Contains(lines, rejected):
		return tlcResult{accepted: false, states: states, out: out}
	}
	t.Fatalf("TLC exited %d with neither verdict:\n%s", exit, out)
	return tlcResult{}
}

// beforeDeadline returns a context that ends shortly before t's deadline
// (a tenth of the time left, at most 30 s, to stop TLC and report), or
// with t if it has none.
func beforeDeadline(t *testing.T) (context.Context, context.CancelFunc) {
	d, ok := t.Deadline()
	if !ok {
		return context.WithCancel(t.Context())
	}
	return context.WithDeadline(t.Context(), d.Add(-min(time.Until(d)/10, 30*time.Second)))
}

// distinctStates reads the last count of distinct states TLC printed.
func distinctStates(lines []string) (int, bool) {
	for _, l := range slices.Backward(lines) {
		_, rest, found := strings.Cut(l, " states generated, ")
		if !found {
			_, rest, found = strings.Cut(l, " states generated (")
			if found {
				_, rest, found = strings.Cut(rest, "), ")
			}
		}
		if !found {
			continue
		}
		count, _, found := strings.Cut(rest, " distinct states found")
		if !found {
			continue
		}
		n, err := strconv.Atoi(strings.ReplaceAll(count, ",", ""))
		return n, err == nil
	}
	return 0, false
}

// firstRejected returns the index of the event at which TLC first rejects
// evs (which it rejects as a whole): the events before it are accepted.
func firstRejected(t *testing.T, jar string, evs []event, start time.Time, deployment string) int {
	t.Helper()
	lo, hi := 0, len(evs) // evs[:lo] accepted, evs[:hi] rejected
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if ok, _ := check(t, jar, evs[:mid], start, deployment); ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

func tlcJar(t *testing.T) string {
	jar := os.Getenv("TLA2TOOLS_JAR")
	if jar == "" {
		t.Skip("TLA2TOOLS_JAR not set: TLC NOT RUN, the ledger's traces are NOT checked against the spec")
	}
	if _, err := os.Stat(jar); err != nil {
		t.Fatalf("TLA2TOOLS_JAR: %v", err)
	}
	return jar
}

type traceCase struct {
	deployment string
	seed       uint64
}

var traceCases = []traceCase{
	{"memory", 1}, {"memory", 2}, {"shared", 1}, {"shared", 2},
}

const steps = 100

// TestLedgerTracesAreBehaviours drives impl/ledger in both deployments and
// checks with TLC that every trace is a behaviour of the specification.
func TestLedgerTracesAreBehaviours(t *testing.T) {
	jar := tlcJar(t)
	seen := map[string]int{}
	for _, tc := range traceCases {
		t.Run(fmt.Sprintf("%s/seed%d", tc.deployment, tc.seed), func(t *testing.T) {
			ndjson, start := generate(t, tc.deployment, tc.seed, steps)
			evs, err := parse(ndjson)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				seen[e.Action+" "+e.Result]++
			}
			if ok, _ := check(t, jar, evs, start, tc.deployment); !ok {
				n := firstRejected(t, jar, evs, start, tc.deployment)
				t.Errorf("TLC rejected the trace of impl/ledger at event %d: %+v\ntrace:\n%s", n+1, evs[n], ndjson)
				return
			}
			t.Logf("%d events accepted", len(evs))
		})
	}
	// The traces must exercise every outcome, or acceptance means little.
	for _, want := range []string{"Issue ok", "Restart ok",
		"Redeem ok", "Redeem unknown", "Redeem in_progress", "Redeem done", "Redeem in_doubt", "Redeem cancelled", "Redeem expired",
		"Cancel ok", "Cancel done",
		"Complete ok", "Complete in_doubt", "Complete done", "Complete not_acting", "Complete unknown",
		"Decide ok", "Decide decided", "Decide self_approval", "Decide not_approver", "Decide in_band", "Decide expired",
		"Decide cancelled", "Redeem awaiting_approval", "Redeem declined"} {
		if seen[want] == 0 {
			t.Errorf("no trace contains %q; outcomes seen: %v", want, seen)
		}
	}
	t.Logf("outcomes: %v", seen)
}

// A mutation turns one event of a trace into a lie about what the ledger did.
type mutation struct {
	name        string
	deployments []string
	find        func(event) bool // the event to change: the first such
	change      func(*event)
}

func is(action, result string) func(event) bool {
	return func(e event) bool { return e.Action == action && e.Result == result }
}

func answer(result, outcome string) func(*event) {
	return func(e *event) { e.Result, e.Outcome = result, outcome }
}

var both = []string{"memory", "shared"}

var mutations = []mutation{
	// A refused Redeem reported as a success: a double redemption (in
	// progress, done, in doubt), one after expiry, after a decline, or of
	// an id the store does not hold.
	{"Redeem in_progress->ok", both, is("Redeem", "in_progress"), answer("ok", "")},
	{"Redeem done->ok", both, is("Redeem", "done"), answer("ok", "")},
	{"Redeem in_doubt->ok", both, is("Redeem", "in_doubt"), answer("ok", "")},
	{"Redeem expired->ok", both, is("Redeem", "expired"), answer("ok", "")},
	{"Redeem cancelled->ok", both, is("Redeem", "cancelled"), answer("ok", "")},
	{"Redeem unknown->ok", both, is("Redeem", "unknown"), answer("ok", "")},
	// A retry told something else than the recorded outcome.
	{"Redeem done, outcome flipped", []string{"shared"}, is("Redeem", "done"), func(e *event) {
		e.Outcome = map[string]string{"done": "failed", "failed": "done"}[e.Outcome]
	}},
	{"Redeem in_doubt->done", []string{"shared"}, is("Redeem", "in_doubt"), answer("done", "done")},
	{"Redeem done->in_doubt", []string{"shared"}, is("Redeem", "done"), answer("in_doubt", "")},
	{"Redeem in_progress->done", []string{"shared"}, is("Redeem", "in_progress"), answer("done", "done")},
	// The outcome written without the compare-and-set: a late Complete
	// overwriting in doubt; and a Complete in time reported as refused.
	{"Complete in_doubt->ok", []string{"shared"}, is("Complete", "in_doubt"), answer("ok", "done")},
	{"Complete ok->in_doubt", []string{"shared"}, is("Complete", "ok"), answer("in_doubt", "done")},
	// Out of band: a redeem before the approvals, or after a decline; a
	// decision by the requester, by an unlisted approver, or after the
	// outcome, recorded; and an approval reported refused.
	{"Redeem awaiting_approval->ok", both, is("Redeem", "awaiting_approval"), answer("ok", "")},
	{"Redeem declined->ok", both, is("Redeem", "declined"), answer("ok", "")},
	{"Redeem declined->cancelled", both, is("Redeem", "declined"), answer("cancelled", "")},
	{"Decide self_approval->ok", both, is("Decide", "self_approval"), answer("ok", "")},
	{"Decide not_approver->ok", both, is("Decide", "not_approver"), answer("ok", "")},
	{"Decide decided->ok", both, is("Decide", "decided"), answer("ok", "")},
	{"Decide ok->decided", both, is("Decide", "ok"), answer("decided", "")},
}

// TestTraceCheckRejectsWrongResults is the negative control: in a trace
// where one event is changed into a lie (see mutations), the events before
// it must still be accepted and the trace up to and including it must be
// rejected -- so the rejection is due to that event alone.
func TestTraceCheckRejectsWrongResults(t *testing.T) {
	jar := tlcJar(t)
	for _, m := range mutations {
		for _, deployment := range m.deployments {
			t.Run(deployment+"/"+m.name, func(t *testing.T) {
				t.Parallel()
				// The first generated trace of this deployment with such an event.
				for _, tc := range traceCases {
					if tc.deployment != deployment {
						continue
					}
					ndjson, start := generate(t, deployment, tc.seed, steps)
					evs, err := parse(ndjson)
					if err != nil {
						t.Fatal(err)
					}
					n := slices.IndexFunc(evs, m.find)
					if n < 0 {
						continue
					}
					if ok, out := check(t, jar, evs[:n], start, deployment); !ok {
						t.Fatalf("seed %d: TLC rejected the unmodified first %d events:\n%s", tc.seed, n, out)
					}
					bad := slices.Clone(evs[:n+1])
					m.change(&bad[n])
					if ok, out := check(t, jar, bad, start, deployment); ok {
						t.Errorf("seed %d: TLC accepted event %d %+v changed to %+v:\n%s", tc.seed, n+1, evs[n], bad[n], out)
					}
					return
				}
				t.Fatalf("no %s trace has an event to change for %q", deployment, m.name)
			})
		}
	}
}

// TestTraceCheckTellsDeploymentsApart is a second control: a trace of
// replicas with their own memory stores is not a behaviour of replicas
// sharing one store, nor the other way round (an approval issued by one
// replica is unknown to, respectively redeemable at, another).
func TestTraceCheckTellsDeploymentsApart(t *testing.T) {
	jar := tlcJar(t)
	for _, tc := range []struct{ ran, checkedAs string }{{"memory", "shared"}, {"shared", "memory"}} {
		t.Run(tc.ran+"-as-"+tc.checkedAs, func(t *testing.T) {
			ndjson, start := generate(t, tc.ran, 1, steps)
			evs, err := parse(ndjson)
			if err != nil {
				t.Fatal(err)
			}
			if ok, out := check(t, jar, evs, start, tc.checkedAs); ok {
				t.Errorf("TLC accepted a %s trace as a %s behaviour:\n%s", tc.ran, tc.checkedAs, out)
			}
		})
	}
}

// TestTraceSearchIsLinear is the negative control of statesLimit, checked
// after TLC's verdict and, as check runs it, by TLC itself as it searches. Sixteen
// confirmations are issued on r1 and, after their expiry plus grace, each
// is redeemed on r2, which never saw them: "unknown" sixteen times, in the
// memory deployment. TraceLedger accepts it within the limit. A variant
// whose Silent step may forget a record in any store, as TraceLedger did
// until a concurrent trace ran past TLC's two minutes in CI, accepts it
// too but explores states by the thousand: each forget in r1's store, which
// no later event asks, is left both done and undone.
func TestTraceSearchIsLinear(t *testing.T) {
	jar := tlcJar(t)
	start := time.Unix(1_780_000_000, 0).UTC()
	var evs []event
	const n = 16
	for i := range n {
		evs = append(evs, event{Time: start, Action: "Issue", ID: fmt.Sprintf("a%d", i), Result: "ok", Replica: "r1"})
	}
	for i := range n {
		evs = append(evs, event{Time: start.Add(ttl + grace), Action: "Redeem", ID: fmt.Sprintf("a%d", i), Result: "unknown", Replica: "r2"})
	}
	spec, err := os.ReadFile(filepath.Join("..", "TraceLedger.tla"))
	if err != nil {
		t.Fatal(err)
	}
	const tied, anyStore = `Forget(StoreOf(ev.replica), ev.id)`, `\E s \in Stores : Forget(s, ev.id)`
	branching := strings.Replace(string(spec), tied, anyStore, 1)
	if branching == string(spec) {
		t.Fatalf("TraceLedger.tla no longer contains %q: update this control", tied)
	}
	limit := statesLimit(len(evs))
	for _, tc := range []struct {
		name     string
		spec     []byte
		branches bool
	}{
		{"TraceLedger", spec, false},
		{"forget-in-any-store", []byte(branching), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runTLC(t, jar, evs, start, "memory", tc.spec, 0) // unbounded: the control's search must end
			if !res.accepted {
				t.Fatalf("TLC rejected the trace:\n%s", res.out)
			}
			t.Logf("%d distinct states for %d events (limit %d)", res.states, len(evs), limit)
			if got := res.states > limit; got != tc.branches {
				t.Errorf("%d distinct states for %d events, limit %d: over the limit = %v, want %v", res.states, len(evs), limit, got, tc.branches)
			}
			// Bounded, as check runs it: TLC itself stops a search that
			// branches at the limit, however long it would run.
			res = runTLC(t, jar, evs, start, "memory", tc.spec, limit)
			if res.stopped != tc.branches || !tc.branches && !res.accepted {
				t.Errorf("bounded at %d states: stopped = %v, accepted = %v; want stopped = %v", limit, res.stopped, res.accepted, tc.branches)
			}
		})
	}
}
