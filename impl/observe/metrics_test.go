package observe_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/observe"
	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// clock is a settable clock, started at the real time.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// sample returns the value of the series name{labels} in g — a
// histogram's count of observations — and whether it exists.
func sample(t *testing.T, g prometheus.Gatherer, name string, labels ...string) (float64, bool) {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == labels[i] && l.GetValue() == labels[i+1] }) {
					continue metrics
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// actServer is a confirming server built by confirm.Assemble with setup,
// whose one tool, act, acts with the outcome its arguments name: done,
// failed (a refusal) or unknown (ErrOutcomeUnknown), so that every
// outcome the flow counts can be provoked.
func actServer(t *testing.T, setup confirm.Setup) (*mcp.Server, confirm.Parts) {
	t.Helper()
	if setup.Name == "" {
		setup.Name = "observe-test"
	}
	parts, err := confirm.Assemble(setup)
	if err != nil {
		t.Fatal(err)
	}
	s := mcp.NewServer(parts.Implementation, &mcp.ServerOptions{Logger: discard})
	s.AddReceivingMiddleware(parts.Middleware...)
	type args struct {
		Outcome string `json:"outcome"`
		N       int    `json:"n"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "act"}, func(ctx context.Context, req *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
		res, err := parts.Flow.Run(ctx, req, confirm.Step{
			Ask: func(context.Context) (confirm.Question, error) {
				return confirm.Question{Message: fmt.Sprintf("Act (%s)?", in.Outcome)}, nil
			},
			Act: func(context.Context, ledger.Confirmation) (*mcp.CallToolResult, error) {
				switch in.Outcome {
				case "failed":
					return nil, confirm.Refuse("refused")
				case "unknown":
					return nil, fmt.Errorf("the reply was lost: %w", confirm.ErrOutcomeUnknown)
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
			},
		})
		return res, nil, err
	})
	return s, parts
}

// TestMetricsCount: a scripted run through a real go-sdk client, in both
// protocol eras, provokes every counter and histogram the flow and the
// boundary feed, and each reads exactly what the run did: questions,
// in-band and approvers' approvals and declines (a refused second
// decision counting as none), redemptions, a replay
// answered from the record (and a decline after it, which is none), expiries at the boundary (2026-07-28) and in
// the ledger (an older-era answer after the TTL), an outcome in doubt,
// boundary refusals by class, a cap refusal, decision and action times,
// ledger operations per store, and the pending gauge (the store's count,
// which leaves out an expired question). No series carries a label other
// than the fixed ones.
func TestMetricsCount(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	tel, err := observe.New(observe.Options{Metrics: true, Store: "memory"})
	if err != nil {
		t.Fatal(err)
	}
	store := ledger.NewMemory(ledger.MemoryOptions{Now: clk.Now})
	s, parts := actServer(t, confirm.Setup{Keys: [][]byte{testKey}, Logger: discard, Now: clk.Now, Store: store, Telemetry: tel})
	manual := mcptest.Connect(t, s, nil, mcptest.ClientOptions{Manual: true, Answer: mcptest.Accept()})
	n := 0
	call := func(outcome string) *mcp.CallToolParams {
		n++
		return &mcp.CallToolParams{Name: "act", Arguments: map[string]any{"outcome": outcome, "n": n}}
	}
	ask := func(p *mcp.CallToolParams) string {
		t.Helper()
		res, err := manual.CallTool(ctx, p)
		if err != nil || !res.NeedsInput() {
			t.Fatalf("ask: %v %s", err, mcptest.Describe(res))
		}
		return res.RequestState
	}
	answer := func(p *mcp.CallToolParams, state string, a *mcp.ElicitResult) (*mcp.CallToolResult, error) {
		q := *p
		q.RequestState, q.InputResponses = state, mcp.InputResponseMap{confirm.InputID: a}
		return manual.CallTool(ctx, &q)
	}
	// Approved, acted on, and replayed.
	p := call("done")
	state := ask(p)
	if res, err := answer(p, state, mcptest.Yes()); err != nil || res.IsError {
		t.Fatalf("approval: %v %s", err, mcptest.Describe(res))
	}
	if res, err := answer(p, state, mcptest.Yes()); err != nil || !strings.Contains(mcptest.Text(res), "earlier execution") {
		t.Fatalf("replay: %v %s", err, mcptest.Describe(res))
	}
	// A decline sent after the approval was redeemed is no replay of it.
	if res, err := answer(p, state, &mcp.ElicitResult{Action: "decline"}); err != nil {
		t.Fatalf("decline after the approval: %v %s", err, mcptest.Describe(res))
	}
	// Declined.
	p = call("done")
	answer(p, ask(p), &mcp.ElicitResult{Action: "decline"})
	// Approved; the action fails, or its outcome is unknown.
	for _, o := range []string{"failed", "unknown"} {
		p = call(o)
		if res, err := answer(p, ask(p), mcptest.Yes()); err != nil || !res.IsError {
			t.Fatalf("%s: %v %s", o, err, mcptest.Describe(res))
		}
	}
	// Answered after the TTL: the boundary refuses (2026-07-28) ...
	p = call("done")
	state = ask(p)
	clk.Advance(requeststate.DefaultTTL)
	_, err = answer(p, state, mcptest.Yes())
	mcptest.WantBoundaryRefusal(t, nil, err)
	// ... and, when the answer never left the process (the older era),
	// the ledger does.
	late := &mcptest.Answerer{Action: "accept", Confirm: true, Before: func() { clk.Advance(requeststate.DefaultTTL) }}
	legacy := mcptest.Connect(t, s, nil, mcptest.ClientOptions{Era: mcptest.EraLegacy, Answer: late})
	if res, err := legacy.CallTool(ctx, call("done")); err != nil || !strings.Contains(mcptest.Text(res), "expired") {
		t.Fatalf("late older-era answer: %v %s", err, mcptest.Describe(res))
	}
	// A forged requestState; the question stays pending.
	p = call("done")
	state = ask(p)
	_, err = answer(p, state[:len(state)/2]+"AAAA"+state[len(state)/2+4:], mcptest.Yes())
	mcptest.WantBoundaryRefusal(t, nil, err)
	// Approvers decide out of band: one approves, one declines.
	for _, approve := range []bool{true, false} {
		c, err := parts.Ledger.Issue(ctx, ledger.Confirmation{Tool: "act", ArgsDigest: "d", Approval: &ledger.Approval{Required: 1, Approvers: []string{"ann"}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parts.Ledger.Decide(ctx, c.ID, ledger.Approver{ID: "ann"}, approve); err != nil {
			t.Fatal(err)
		}
		// Her second decision is refused, and counts as none.
		if _, err := parts.Ledger.Decide(ctx, c.ID, ledger.Approver{ID: "ann"}, !approve); err == nil {
			t.Fatal("a second decision by the same approver was taken")
		}
	}

	g := tel.Gatherer()
	for _, tt := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"mcp_confirm_questions_total", nil, 7},
		{"mcp_confirm_approvals_total", []string{"via", "in_band"}, 5},
		{"mcp_confirm_approvals_total", []string{"via", "approver"}, 1},
		{"mcp_confirm_declines_total", []string{"via", "in_band"}, 2},
		{"mcp_confirm_declines_total", []string{"via", "approver"}, 1},
		{"mcp_confirm_redemptions_total", nil, 3},
		{"mcp_confirm_replays_total", []string{"state", "done"}, 1},
		{"mcp_confirm_replays_total", []string{"state", "in_progress"}, 0},
		{"mcp_confirm_expiries_total", []string{"layer", "boundary"}, 1},
		{"mcp_confirm_expiries_total", []string{"layer", "ledger"}, 1},
		{"mcp_confirm_in_doubt_total", nil, 1},
		{"mcp_confirm_boundary_refusals_total", []string{"class", "expired"}, 1},
		{"mcp_confirm_boundary_refusals_total", []string{"class", "forged"}, 1},
		{"mcp_confirm_boundary_refusals_total", []string{"class", "mismatch"}, 0},
		{"mcp_confirm_cap_refusals_total", nil, 0},
		{"mcp_confirm_decision_seconds", []string{"answer", "approve"}, 3},
		{"mcp_confirm_decision_seconds", []string{"answer", "decline"}, 1},
		{"mcp_confirm_action_seconds", []string{"outcome", "done"}, 1},
		{"mcp_confirm_action_seconds", []string{"outcome", "failed"}, 1},
		{"mcp_confirm_action_seconds", []string{"outcome", "unknown"}, 1},
		// 7 questions and 2 issued for approvers; 7 in-band answers and 4
		// approvers' decisions (2 refused); 3 outcomes recorded.
		{"mcp_confirm_ledger_seconds", []string{"store", "memory", "op", "add"}, 9},
		{"mcp_confirm_ledger_seconds", []string{"store", "memory", "op", "spend"}, 7},
		{"mcp_confirm_ledger_seconds", []string{"store", "memory", "op", "decide"}, 4},
		{"mcp_confirm_ledger_seconds", []string{"store", "memory", "op", "complete"}, 3},
		// The forged one's question, and the approved one whose
		// confirmation was never redeemed; not the expired one.
		{"mcp_confirm_pending", nil, 2},
	} {
		got, ok := sample(t, g, tt.name, tt.labels...)
		if !ok || got != tt.want {
			t.Errorf("%s%v = %v (present %v), want %v", tt.name, tt.labels, got, ok, tt.want)
		}
	}
	allowed := []string{"via", "state", "layer", "class", "answer", "outcome", "store", "op"}
	families, _ := g.Gather()
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "mcp_confirm_") {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(allowed, l.GetName()) {
					t.Errorf("%s has a label %s", f.GetName(), l.GetName())
				}
			}
		}
	}

	// A cap: the second question of a principal allowed one is refused.
	capped, err := observe.New(observe.Options{Metrics: true})
	if err != nil {
		t.Fatal(err)
	}
	s, _ = actServer(t, confirm.Setup{Keys: [][]byte{testKey}, Logger: discard, Telemetry: capped,
		Store: ledger.NewMemory(ledger.MemoryOptions{MaxPendingPerPrincipal: 1})})
	cs := mcptest.Connect(t, s, nil, mcptest.ClientOptions{Manual: true, Answer: mcptest.Accept()})
	for i := range 2 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "act", Arguments: map[string]any{"outcome": "done", "n": i}})
		if err != nil || res.NeedsInput() != (i == 0) {
			t.Fatalf("question %d: %v %s", i, err, mcptest.Describe(res))
		}
	}
	for name, want := range map[string]float64{"mcp_confirm_questions_total": 1, "mcp_confirm_cap_refusals_total": 1, "mcp_confirm_pending": 1} {
		if got, _ := sample(t, capped.Gatherer(), name); got != want {
			t.Errorf("capped: %s = %v, want %v", name, got, want)
		}
	}
}

// The sessions gauge reads its count at each scrape; without metrics,
// CountSessions does nothing (and a nil Telemetry is valid). The binary's
// count is checked in cmd/mcp-confirm's TestBinaryHTTPSessionsBounded.
func TestCountSessions(t *testing.T) {
	var none *observe.Telemetry
	none.CountSessions(func() int { t.Fatal("counted without metrics"); return 0 })
	tel, err := observe.New(observe.Options{Metrics: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sample(t, tel.Gatherer(), "mcp_confirm_http_sessions"); ok {
		t.Fatal("mcp_confirm_http_sessions before CountSessions")
	}
	n := 3
	tel.CountSessions(func() int { return n })
	for _, want := range []int{3, 0} {
		n = want
		if got, ok := sample(t, tel.Gatherer(), "mcp_confirm_http_sessions"); !ok || got != float64(want) {
			t.Fatalf("mcp_confirm_http_sessions = %v (present %v), want %v", got, ok, want)
		}
	}
	if _, ok := sample(t, tel.Gatherer(), "go_gc_heap_live_bytes"); !ok {
		t.Fatal("no go_gc_heap_live_bytes")
	}
}

// completeFails is a memory store that cannot record an outcome.
type completeFails struct{ *ledger.Memory }

func (completeFails) Complete(context.Context, ledger.ID, ledger.Outcome) error {
	return errors.New("the store went away")
}

// TestMetricsInDoubtWhenNotRecorded: an approved action whose outcome the
// store could not record is in doubt, and counted so, though the action
// itself was done; with the outcome recorded (the control) nothing is.
// Both protocol eras.
func TestMetricsInDoubtWhenNotRecorded(t *testing.T) {
	for _, era := range []string{mcptest.EraMRTR, mcptest.EraLegacy} {
		for _, c := range []struct {
			name  string
			store ledger.Store
			want  float64
		}{
			{"recorded", ledger.NewMemory(ledger.MemoryOptions{}), 0},
			{"not recorded", completeFails{ledger.NewMemory(ledger.MemoryOptions{})}, 1},
		} {
			t.Run(era+"/"+c.name, func(t *testing.T) {
				tel, err := observe.New(observe.Options{Metrics: true})
				if err != nil {
					t.Fatal(err)
				}
				s, _ := actServer(t, confirm.Setup{Keys: [][]byte{testKey}, Logger: discard, Store: c.store, Telemetry: tel})
				cl := mcptest.Connect(t, s, nil, mcptest.ClientOptions{Era: era, Answer: &mcptest.Answerer{Action: "accept", Confirm: true}})
				if _, err := cl.CallTool(context.Background(), &mcp.CallToolParams{Name: "act", Arguments: map[string]any{"outcome": "done", "n": 1}}); err != nil {
					t.Fatal(err)
				}
				g := tel.Gatherer()
				if got, _ := sample(t, g, "mcp_confirm_in_doubt_total"); got != c.want {
					t.Errorf("in doubt = %v, want %v", got, c.want)
				}
				if got, _ := sample(t, g, "mcp_confirm_action_seconds", "outcome", "done"); got != 1 {
					t.Errorf("actions done = %v, want 1", got)
				}
			})
		}
	}
}

// linkPage is an approval page whose links name the id.
type linkPage struct{}

func (linkPage) Link(id ledger.ID) string { return "https://approve.invalid/approve/" + id.String() }

// TestMetricsOutOfBandYesNotInBand: a client that sends a yes to the
// in-band question beside its answer to the approval page's link, for a
// call only approvers approve, is not counted as an in-band approval —
// the approver's decision is the one approval. With both required, the
// yes was asked for and counts (the control).
func TestMetricsOutOfBandYesNotInBand(t *testing.T) {
	for _, c := range []struct {
		mode   confirm.Mode
		inBand float64
	}{
		{confirm.OutOfBand, 0},
		{confirm.Both, 1},
	} {
		t.Run(c.mode.String(), func(t *testing.T) {
			ctx := context.Background()
			tel, err := observe.New(observe.Options{Metrics: true, Store: "memory"})
			if err != nil {
				t.Fatal(err)
			}
			s, parts := actServer(t, confirm.Setup{
				Keys: [][]byte{testKey}, Logger: discard, Telemetry: tel,
				Approval: confirm.Approval{Mode: c.mode, Approvers: []string{"sub:ann"}},
				Page:     func(*ledger.Ledger) (confirm.Page, error) { return linkPage{}, nil },
			})
			cs := mcptest.Connect(t, s, nil, mcptest.ClientOptions{Manual: true, Answer: mcptest.Accept(), URL: true})
			p := &mcp.CallToolParams{Name: "act", Arguments: map[string]any{"outcome": "done", "n": 1}}
			res, err := cs.CallTool(ctx, p)
			if err != nil || !res.NeedsInput() {
				t.Fatalf("ask: %v %s", err, mcptest.Describe(res))
			}
			link, ok := res.InputRequests[confirm.ApproveInputID].(*mcp.ElicitParams)
			if !ok {
				t.Fatalf("no approval link: %s", mcptest.Describe(res))
			}
			id, err := ledger.ParseID(strings.TrimPrefix(link.URL, "https://approve.invalid/approve/"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := parts.Ledger.Decide(ctx, id, ledger.Approver{ID: "sub:ann"}, true); err != nil {
				t.Fatal(err)
			}
			retry := *p
			retry.RequestState = res.RequestState
			retry.InputResponses = mcp.InputResponseMap{confirm.InputID: mcptest.Yes(), confirm.ApproveInputID: &mcp.ElicitResult{Action: "accept"}}
			if res, err := cs.CallTool(ctx, &retry); err != nil || res.IsError || res.NeedsInput() {
				t.Fatalf("approved call: %v %s", err, mcptest.Describe(res))
			}
			g := tel.Gatherer()
			for _, via := range []struct {
				label string
				want  float64
			}{{"in_band", c.inBand}, {"approver", 1}} {
				if got, _ := sample(t, g, "mcp_confirm_approvals_total", "via", via.label); got != via.want {
					t.Errorf("approvals via %s = %v, want %v", via.label, got, via.want)
				}
			}
		})
	}
}
