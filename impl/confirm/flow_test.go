package confirm_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// flowServer is a real go-sdk server with the boundary in its chain and one
// confirmed tool, "act", whose action is act: a test's stand-in for a
// destructive effect, counted.
type flowServer struct {
	server  *mcp.Server
	ledger  *ledger.Ledger
	effects atomic.Int64 // times act ran
}

func newFlowServer(t *testing.T, store ledger.Store, opts ledger.Options, act func(ctx context.Context, n int64) (*mcp.CallToolResult, error)) *flowServer {
	t.Helper()
	l, err := ledger.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	flow, err := confirm.New(confirm.Options{Ledger: l, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	fs := &flowServer{server: newServer(), ledger: l}
	fs.server.AddReceivingMiddleware(newBoundary(t).Middleware())
	mcp.AddTool(fs.server, &mcp.Tool{Name: "act"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		Target string `json:"target"`
	}) (*mcp.CallToolResult, any, error) {
		res, err := flow.Run(ctx, req, confirm.Step{
			Ask: func(context.Context) (confirm.Question, error) {
				return confirm.Question{Message: "Act on " + in.Target + "?", Subject: in.Target}, nil
			},
			Act: func(ctx context.Context, _ ledger.Confirmation) (*mcp.CallToolResult, error) {
				return act(ctx, fs.effects.Add(1))
			},
		})
		return res, nil, err
	})
	return fs
}

// session connects a client that returns input_required to the test, so
// that the test answers and retries by hand, as a 2026-07-28 client does.
func (fs *flowServer) session(t *testing.T) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := fs.server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	c := mcp.NewClient(&mcp.Implementation{Name: "flow-test", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: (&accept{}).handle,
		MultiRoundTrip:     &mcp.MultiRoundTripOptions{Disabled: true},
	})
	cs, err := c.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: protocolMRTR})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// ask makes the first round and returns the sealed state.
func ask(t *testing.T, cs *mcp.ClientSession, target string) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "act", Arguments: map[string]any{"target": target}})
	if err != nil || !res.NeedsInput() || res.RequestState == "" {
		t.Fatalf("first round: want input_required, got %v %s", err, resultText(res))
	}
	return res.RequestState
}

// approve retries with an explicit yes.
func approve(cs *mcp.ClientSession, target, state string) (*mcp.CallToolResult, error) {
	return cs.CallTool(context.Background(), &mcp.CallToolParams{
		Name:           "act",
		Arguments:      map[string]any{"target": target},
		InputResponses: mcp.InputResponseMap{confirm.InputID: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}},
		RequestState:   state,
	})
}

func resultText(res *mcp.CallToolResult) string {
	if res == nil {
		return "<nil>"
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return fmt.Sprintf("isError=%v %q", res.IsError, b.String())
}

// An Act that cannot tell whether its action happened (a proxy that lost
// the upstream's reply) wraps confirm.ErrOutcomeUnknown: the person is told
// that it may or may not have happened, not that it failed, and so is
// every retry (the outcome is recorded in doubt, not as a failure).
func TestActOutcomeUnknown(t *testing.T) {
	fs := newFlowServer(t, ledger.NewMemory(ledger.MemoryOptions{}), ledger.Options{},
		func(context.Context, int64) (*mcp.CallToolResult, error) {
			return nil, fmt.Errorf("upstream: reply lost: %w", confirm.ErrOutcomeUnknown)
		})
	cs := fs.session(t)
	state := ask(t, cs, "x")
	res, err := approve(cs, "x", state)
	if err != nil || !res.IsError || !strings.Contains(resultText(res), "may or may not have happened") {
		t.Fatalf("want the in-doubt refusal, got %v %s", err, resultText(res))
	}
	// Recorded in doubt, not as a failure: a retry is told to check.
	res, err = approve(cs, "x", state)
	if err != nil || !res.IsError || !strings.Contains(resultText(res), "check before asking again") || strings.Contains(resultText(res), "earlier execution") {
		t.Fatalf("retry: want the in-doubt answer, got %v %s", err, resultText(res))
	}
	// Any other error is a failure, and says so.
	fs = newFlowServer(t, ledger.NewMemory(ledger.MemoryOptions{}), ledger.Options{},
		func(context.Context, int64) (*mcp.CallToolResult, error) { return nil, errors.New("disk on fire") })
	cs = fs.session(t)
	res, err = approve(cs, "x", ask(t, cs, "x"))
	if err != nil || !res.IsError || !strings.Contains(resultText(res), "failed") || strings.Contains(resultText(res), "disk on fire") {
		t.Fatalf("want the generic failure, got %v %s", err, resultText(res))
	}
}

// An Act that returns neither a result nor an error acted: the call gets
// an empty result (not an error, not a crash of the server), recorded as
// done, and a retry gets it back, under the note that nothing ran again.
func TestActNilResult(t *testing.T) {
	fs := newFlowServer(t, ledger.NewMemory(ledger.MemoryOptions{}), ledger.Options{},
		func(context.Context, int64) (*mcp.CallToolResult, error) { return nil, nil })
	cs := fs.session(t)
	state := ask(t, cs, "x")
	res, err := approve(cs, "x", state)
	if err != nil || res.IsError || res.NeedsInput() || len(res.Content) != 0 {
		t.Fatalf("the approved call: %v %s, want an empty result", err, resultText(res))
	}
	res, err = approve(cs, "x", state)
	if err != nil || res.IsError || len(res.Content) != 1 || !strings.Contains(resultText(res), "earlier execution. Nothing was run again.") {
		t.Fatalf("its retry: %v %s, want the empty result under the replay's note", err, resultText(res))
	}
	if n := fs.effects.Load(); n != 1 {
		t.Errorf("acted %d times, want once", n)
	}
}

// A result longer than the ledger keeps (Options.MaxResult) reaches the
// call that acted whole; a retry is told its size and SHA-256, and that
// nothing ran again, as an error when the action failed.
func TestReplayOfLargeResult(t *testing.T) {
	big := strings.Repeat("x", 300)
	fs := newFlowServer(t, ledger.NewMemory(ledger.MemoryOptions{}), ledger.Options{MaxResult: 100},
		func(context.Context, int64) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: big}}}, nil
		})
	cs := fs.session(t)
	state := ask(t, cs, "x")
	res, err := approve(cs, "x", state)
	if err != nil || res.IsError || !strings.Contains(resultText(res), big) {
		t.Fatalf("the call that acted: %v %s", err, resultText(res))
	}
	// What the flow recorded: Act's result as JSON (before the server
	// adds its _meta on the way out).
	recorded, err := json.Marshal(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: big}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err = approve(cs, "x", state)
	want := fmt.Sprintf("%d bytes, SHA-256 %x, too large to keep. Nothing was run again.", len(recorded), sha256.Sum256(recorded))
	if err != nil || res.IsError || !strings.Contains(resultText(res), want) {
		t.Fatalf("retry: %v %s, want %q", err, resultText(res), want)
	}
	if n := fs.effects.Load(); n != 1 {
		t.Fatalf("the action ran %d times", n)
	}

	// A large result of an action that failed: the retry says so too.
	fs = newFlowServer(t, ledger.NewMemory(ledger.MemoryOptions{}), ledger.Options{MaxResult: 100},
		func(context.Context, int64) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: big}}}, nil
		})
	cs = fs.session(t)
	state = ask(t, cs, "x")
	if res, err := approve(cs, "x", state); err != nil || !res.IsError {
		t.Fatalf("the call that failed: %v %s", err, resultText(res))
	}
	res, err = approve(cs, "x", state)
	if err != nil || !res.IsError || !strings.Contains(resultText(res), "too large to keep") {
		t.Fatalf("retry of the failed action: %v %s, want an error naming the size", err, resultText(res))
	}
}

// An action slower than its lease runs once, and the caller gets its
// result; the outcome cannot be recorded, so every retry is told the
// action is in doubt, and nothing runs again.
func TestActOutlastsLease(t *testing.T) {
	clock := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	fs := newFlowServer(t, ledger.NewMemory(ledger.MemoryOptions{Now: now}), ledger.Options{Lease: time.Minute, Now: now},
		func(context.Context, int64) (*mcp.CallToolResult, error) {
			mu.Lock()
			clock = clock.Add(time.Minute) // the action takes its whole lease
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done, late"}}}, nil
		})
	cs := fs.session(t)
	state := ask(t, cs, "x")
	res, err := approve(cs, "x", state)
	if err != nil || res.IsError || resultText(res) != resultText(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done, late"}}}) {
		t.Fatalf("the call that acted: %v %s", err, resultText(res))
	}
	for range 2 {
		res, err = approve(cs, "x", state)
		if err != nil || !res.IsError || !strings.Contains(resultText(res), "may or may not have happened — check before asking again") {
			t.Fatalf("retry: %v %s, want in doubt", err, resultText(res))
		}
	}
	if n := fs.effects.Load(); n != 1 {
		t.Fatalf("the action ran %d times", n)
	}
}

// swapped answers every redemption, and records every outcome, on a
// decoy instead of the confirmation asked for: a store (or a boundary)
// that mixes up confirmations. Each Add also adds the decoy, the
// confirmation added with change applied and an id of its own; with
// done, the decoy is redeemed and its outcome recorded (secret).
type swapped struct {
	ledger.Store
	change func(*ledger.Confirmation)
	done   bool
	mu     sync.Mutex
	decoy  ledger.ID
}

func (s *swapped) Add(ctx context.Context, c ledger.Confirmation) error {
	if err := s.Store.Add(ctx, c); err != nil {
		return err
	}
	d := c
	rand.Read(d.ID[:])
	s.change(&d)
	if err := s.Store.Add(ctx, d); err != nil {
		return err
	}
	if s.done {
		if _, err := s.Store.Spend(ctx, d.ID, ledger.Acting, time.Hour); err != nil {
			return err
		}
		r := []byte(`{"content":[{"type":"text","text":"` + secret + `"}]}`)
		if err := s.Store.Complete(ctx, d.ID, ledger.Outcome{Kind: ledger.OutcomeDone, Result: r, Size: int64(len(r))}); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.decoy = d.ID
	s.mu.Unlock()
	return nil
}

func (s *swapped) decoyID() ledger.ID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.decoy
}

func (s *swapped) Spend(ctx context.Context, id ledger.ID, to ledger.State, lease time.Duration) (ledger.Record, error) {
	if to == ledger.Acting {
		id = s.decoyID()
	}
	return s.Store.Spend(ctx, id, to, lease)
}

func (s *swapped) Complete(ctx context.Context, _ ledger.ID, o ledger.Outcome) error {
	return s.Store.Complete(ctx, s.decoyID(), o)
}

// secret is the result recorded for a decoy already done.
const secret = "the other action's result"

// A redemption whose record is for another action — the store answers
// with another confirmation's record, the same as the call's but for its
// tool, its argument digest or its principal, as a store or boundary
// that mixed them up would — is refused by the flow's own check of the
// record against the call, whatever the boundary said: "This approval
// was given for a different action", nothing acted on. A record redeemed
// so is recorded as failed, never acted on; one already done is not
// replayed (its result is the other action's). Through real go-sdk
// clients of both protocol eras.
func TestRecordForAnotherAction(t *testing.T) {
	for _, era := range []string{mcptest.EraMRTR, mcptest.EraLegacy} {
		for _, other := range []struct {
			name   string
			change func(*ledger.Confirmation)
		}{
			{"tool", func(c *ledger.Confirmation) { c.Tool = "another_tool" }},
			{"arguments", func(c *ledger.Confirmation) { c.ArgsDigest = "sha256:another call's arguments" }},
			{"principal", func(c *ledger.Confirmation) { c.Principal = "someone else" }},
		} {
			for _, done := range []bool{false, true} {
				name := era + "/another " + other.name + "/pending"
				if done {
					name = era + "/another " + other.name + "/done"
				}
				t.Run(name, func(t *testing.T) {
					ctx := context.Background()
					mem := ledger.NewMemory(ledger.MemoryOptions{})
					store := &swapped{Store: mem, change: other.change, done: done}
					fs := newFlowServer(t, store, ledger.Options{},
						func(context.Context, int64) (*mcp.CallToolResult, error) {
							return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "acted"}}}, nil
						})
					cs := mcptest.Connect(t, fs.server, nil, mcptest.ClientOptions{Era: era, Answer: mcptest.Accept()})
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "act", Arguments: map[string]any{"target": "x"}})
					mcptest.WantToolRefusal(t, res, err, "This approval was given for a different action. Nothing was done.")
					if strings.Contains(resultText(res), secret) {
						t.Fatalf("the other action's result was replayed: %s", resultText(res))
					}
					if n := fs.effects.Load(); n != 0 {
						t.Fatalf("acted %d times on a record for another action", n)
					}
					r, err := mem.Lookup(ctx, store.decoyID())
					if err != nil {
						t.Fatal(err)
					}
					want := ledger.Failed // redeemed by this call, never acted on
					if done {
						want = ledger.Done // as it was
					}
					if r.State != want {
						t.Fatalf("the other confirmation is %v, want %v", r.State, want)
					}
				})
			}
		}
	}
}

// networkStore is a memory store whose Complete fails once its context is
// done, as a Redis or PostgreSQL client's does.
type networkStore struct{ *ledger.Memory }

func (s networkStore) Complete(ctx context.Context, id ledger.ID, o ledger.Outcome) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.Memory.Complete(ctx, id, o)
}

// A client that hangs up while the action runs cancels the call's context,
// but not the record of its outcome: the action finished, so a retry gets
// its result from the record, not "in doubt", and nothing runs again.
func TestOutcomeRecordedAfterHangUp(t *testing.T) {
	started := make(chan struct{})
	fs := newFlowServer(t, networkStore{ledger.NewMemory(ledger.MemoryOptions{})}, ledger.Options{},
		func(ctx context.Context, _ int64) (*mcp.CallToolResult, error) {
			close(started)
			<-ctx.Done() // the client hung up; the action completes anyway
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "acted"}}}, nil
		})
	cs := fs.session(t)
	state := ask(t, cs, "x")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{
			Name:           "act",
			Arguments:      map[string]any{"target": "x"},
			InputResponses: mcp.InputResponseMap{confirm.InputID: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}},
			RequestState:   state,
		})
		done <- err
	}()
	<-started
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the hung-up call returned no error")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		res, err := approve(cs, "x", state)
		if err != nil {
			t.Fatal(err)
		}
		text := resultText(res)
		if strings.Contains(text, "being acted on right now") && time.Now().Before(deadline) {
			continue // the action's goroutine has not recorded yet
		}
		if res.IsError || !strings.Contains(text, "earlier execution") || !strings.Contains(text, "acted") {
			t.Fatalf("retry after the hang-up: %s; want the recorded result", text)
		}
		break
	}
	if n := fs.effects.Load(); n != 1 {
		t.Fatalf("the action ran %d times", n)
	}
}
