package server_test

// Exactly-once answers: one approval, one effect, one answer, repeated to
// every retry. A lost reply and a crash between redeeming and acting are
// the front-end suite's (TestFrontEndSuite/LostReply,
// TestFrontEndSuite/Crash); here, what only a deletion can do: refuse
// after it was approved.

import (
	"os"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

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
