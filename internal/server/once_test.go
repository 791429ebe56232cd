package server_test

// Exactly-once answers: one approval, one effect, one answer, repeated to
// every retry. Each test drives a real go-sdk client and server, boundary
// in the chain, and checks both what the client was told and what the
// ledger recorded.

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// A lost reply: the deletion happened, its result never reached the
// client, and the client retries the same approval. It gets "Deleted …"
// again, marked as the earlier execution's, and nothing runs twice — not
// even for a file recreated at the same path. In the older era the
// requestState never leaves the server, so there is no approval to
// replay: the client's retry is a new call, asked anew.
func TestLostReplyAnsweredAgain(t *testing.T) {
	for _, transport := range []string{inMemory, httpT} {
		t.Run(eraMRTR+"/"+transport, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			f := e.file("a.txt", "a")
			cs := e.connect(clientOptions{transport: transport, manual: true, answer: accept()})
			state := ask(t, cs, f)
			res, err := retry(cs, f, state, yes())
			wantDeleted(t, res, err, f)
			first := text(res)

			e.file("a.txt", "a") // same path, new file: a second deletion would take it
			for range 2 {
				res, err = retry(cs, f, state, yes())
				wantReplayed(t, res, err, first)
				wantExists(t, f)
			}
			wantEvents(t, e, map[event]int{
				{ledger.ActionRedeem, ledger.ResultOK, 0}:                    1,
				{ledger.ActionComplete, ledger.ResultOK, ledger.OutcomeDone}: 1,
				{ledger.ActionRedeem, ledger.ResultDone, ledger.OutcomeDone}: 2,
			})
		})
	}
	// In the older era the requestState never reaches the client: a
	// retry is a new call, and asks anew. A state spent on a 2026-07-28
	// connection and replayed on an older one (what the TypeScript clients
	// of .ci/clients do) gets the same recorded answer.
	for _, transport := range []string{inMemory, httpT} {
		t.Run(eraLegacy+"/"+transport, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			f := e.file("a.txt", "a")
			res, err := call(e.connect(clientOptions{era: eraLegacy, transport: transport, answer: accept()}), f)
			wantDeleted(t, res, err, f)
			e.file("a.txt", "a")
			ans := decline()
			res, err = call(e.connect(clientOptions{era: eraLegacy, transport: transport, answer: ans}), f)
			if err != nil || !strings.Contains(text(res), "Not confirmed") || len(ans.Questions()) != 1 {
				t.Fatalf("the older era's retry: err=%v res=%s, asked %d times; want a new question, declined", err, describe(res), len(ans.Questions()))
			}
			wantExists(t, f)

			modern := e.connect(clientOptions{transport: transport, manual: true, answer: accept()})
			state := ask(t, modern, f)
			res, err = retry(modern, f, state, yes())
			wantDeleted(t, res, err, f)
			first := text(res)
			e.file("a.txt", "a")
			older := e.connect(clientOptions{era: eraLegacy, transport: transport, answer: ans})
			res, err = retry(older, f, state, yes())
			wantReplayed(t, res, err, first)
			wantExists(t, f)
			if len(ans.Questions()) != 1 {
				t.Fatalf("the replay on the older era asked %d more questions", len(ans.Questions())-1)
			}
			wantEvents(t, e, map[event]int{
				{ledger.ActionRedeem, ledger.ResultOK, 0}:                    2,
				{ledger.ActionComplete, ledger.ResultOK, ledger.OutcomeDone}: 2,
				{ledger.ActionCancel, ledger.ResultOK, 0}:                    1,
				{ledger.ActionRedeem, ledger.ResultDone, ledger.OutcomeDone}: 1,
			})
		})
	}
}

// An approval whose action refused (the file was replaced after the
// question) is recorded as failed: a retry gets the same refusal, marked
// as the earlier execution's, and nothing runs — not even once the file
// is back as it was approved.
func TestFailureAnsweredAgain(t *testing.T) {
	e := newEnv(t, envOptions{})
	f := e.file("a.txt", "aaaa")
	cs := e.connect(clientOptions{manual: true, answer: accept()})
	state := ask(t, cs, f)
	original, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	other := e.file("b.txt", "bbbb")
	if err := os.Rename(other, f); err != nil {
		t.Fatal(err)
	}
	res, err := retry(cs, f, state, yes())
	wantToolRefusal(t, res, err, "replaced or modified after it was approved")
	first := text(res)

	res, err = retry(cs, f, state, yes())
	wantToolRefusal(t, res, err, earlier)
	if !strings.HasSuffix(text(res), first) {
		t.Fatalf("retry answered %q, want %q marked as the earlier execution's", text(res), first)
	}
	if b, _ := os.ReadFile(f); string(b) != "bbbb" || string(original) != "aaaa" {
		t.Fatalf("the replacement was touched: %q", b)
	}
	wantEvents(t, e, map[event]int{
		{ledger.ActionRedeem, ledger.ResultOK, 0}:                      1,
		{ledger.ActionComplete, ledger.ResultOK, ledger.OutcomeFailed}: 1,
		{ledger.ActionRedeem, ledger.ResultDone, ledger.OutcomeFailed}: 1,
	})
}

// errCrashed stands for a replica that died.
var errCrashed = errors.New("replica crashed")

// crashAfterRedeem is a replica's handle on a shared store through which
// the replica crashes right after a Redeem commits: the confirmation is
// acting in the store, and the replica never acts, nor records anything.
type crashAfterRedeem struct{ ledger.Store }

func (c crashAfterRedeem) Spend(ctx context.Context, id ledger.ID, to ledger.State, lease time.Duration) (ledger.Record, error) {
	r, err := c.Store.Spend(ctx, id, to, lease)
	if err == nil && to == ledger.Acting {
		return ledger.Record{}, errCrashed
	}
	return r, err
}

// A replica crashes between redeeming an approval and acting on it; the
// client retries through another replica sharing the store. While the
// lease runs the retry is told the action is in progress; after it, in
// doubt — never run: nothing is deleted, however often it retries. (Both
// replicas in one process, on one clock; with Redis and PostgreSQL, see
// TestCrashBetweenRedeemAndActShared.) The retries go through sessions of
// either era; the state was asked for on a 2026-07-28 one.
func TestCrashBetweenRedeemAndAct(t *testing.T) {
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		c := newClock()
		store := ledger.NewMemory(ledger.MemoryOptions{Now: c.Now})
		a := newEnv(t, envOptions{clock: c, store: crashAfterRedeem{store}})
		b := newEnv(t, envOptions{clock: c, store: store, roots: []string{a.root}})
		crashAndRetry(t, a, b, era, transport, 0, func(time.Time) { c.Advance(ledger.DefaultLease) })
		if err := store.Complete(context.Background(), firstIssued(t, a), ledger.Outcome{Kind: ledger.OutcomeDone}); !errors.Is(err, ledger.ErrInDoubt) {
			t.Fatalf("a late Complete after the lease = %v, want ErrInDoubt", err)
		}
	})
}

// crashAndRetry asks through a, whose store handle crashes after the
// redeem, retries through b on a session of era while the lease runs (in
// progress), calls pass to make the lease end (given the time the crashed
// call had returned by), and retries through b again (in doubt, twice).
//
// With lease positive the lease runs on the real clock: a retry through b
// answered in doubt more than lease after the crashed call began may have
// come after the lease's end (a loaded machine), which proves nothing;
// crashAndRetry then returns false and how long after the crashed call
// began the answer came, having checked nothing further. An answer in
// doubt sooner fails t.
func crashAndRetry(t *testing.T, a, b *env, era, transport string, lease time.Duration, pass func(crashed time.Time)) (bool, time.Duration) {
	t.Helper()
	f := a.file("a.txt", "a")
	csA := a.connect(clientOptions{transport: transport, manual: true, answer: accept()})
	csB := b.connect(clientOptions{era: era, transport: transport, manual: true, answer: accept()})
	state := ask(t, csA, f)
	began := time.Now() // the lease begins inside this call
	res, err := retry(csA, f, state, yes())
	crashed := time.Now()
	wantToolRefusal(t, res, err, "ledger is unavailable") // the crash, as the client sees it
	wantExists(t, f)

	res, err = retry(csB, f, state, yes())
	if took := time.Since(began); lease > 0 && took >= lease && err == nil && strings.Contains(text(res), inDoubt) {
		wantExists(t, f)
		return false, took
	}
	wantToolRefusal(t, res, err, inProgress)
	wantExists(t, f)
	pass(crashed)
	for range 2 {
		res, err = retry(csB, f, state, yes())
		wantToolRefusal(t, res, err, inDoubt)
		if !strings.Contains(text(res), "check before asking again") {
			t.Fatalf("the in-doubt answer %q does not say to check", text(res))
		}
		wantExists(t, f)
	}
	if n := a.count(ledger.ActionComplete, ledger.ResultOK) + b.count(ledger.ActionComplete, ledger.ResultOK); n != 0 {
		t.Fatalf("%d outcomes recorded for an action that never ran", n)
	}
	return true, 0
}

// firstIssued returns the id of the first confirmation e issued.
func firstIssued(t *testing.T, e *env) ledger.ID {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range e.events {
		if ev.Action == ledger.ActionIssue && ev.Result == ledger.ResultOK {
			return ev.ID
		}
	}
	t.Fatal("nothing issued")
	return ledger.ID{}
}

// event is an action, its result and (for Complete) its outcome.
type event struct {
	action  ledger.Action
	result  ledger.Result
	outcome ledger.OutcomeKind
}

// wantEvents asserts that e's ledger traced exactly these events, as
// many times each, among its Redeem, Cancel and Complete events.
func wantEvents(t *testing.T, e *env, want map[event]int) {
	t.Helper()
	e.mu.Lock()
	got := map[event]int{}
	for _, ev := range e.events {
		if ev.Action != ledger.ActionIssue {
			got[event{ev.Action, ev.Result, ev.Outcome}]++
		}
	}
	e.mu.Unlock()
	if len(got) != len(want) {
		t.Fatalf("ledger events %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("ledger events %v, want %v", got, want)
		}
	}
}
