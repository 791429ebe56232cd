package ledgertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// racyStore is a deliberately broken store: Spend reads the state, then
// writes it — check-then-act — so two concurrent spends can both win. So that
// the race happens on every Race, not when the scheduler allows (rapid must
// reproduce it while shrinking, even on a loaded machine), a racer that has
// read waits at the Race's start line for the others to have read too.
type racyStore struct {
	mu sync.Mutex
	m  map[ledger.ID]*racyEntry
}

type racyEntry struct {
	c     ledger.Confirmation
	state ledger.State
}

func (s *racyStore) Add(_ context.Context, c ledger.Confirmation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[c.ID] = &racyEntry{c: c}
	return nil
}

func (s *racyStore) Spend(ctx context.Context, id ledger.ID, to ledger.State) (ledger.Confirmation, error) {
	s.mu.Lock()
	e, ok := s.m[id]
	var st ledger.State
	if ok {
		st = e.state
	}
	s.mu.Unlock()
	// The window between check and act: every racer reads before any writes.
	if l, racing := ctx.Value(startLineKey{}).(*startLine); racing {
		l.reach()
	}
	switch {
	case !ok:
		return ledger.Confirmation{}, ledger.ErrUnknown
	case !time.Now().Before(e.c.Expires):
		return ledger.Confirmation{}, ledger.ErrExpired
	case st == ledger.Redeemed:
		return ledger.Confirmation{}, ledger.ErrSpent
	case st == ledger.Cancelled:
		return ledger.Confirmation{}, ledger.ErrCancelled
	}
	s.mu.Lock()
	e.state = to
	s.mu.Unlock()
	return e.c, nil
}

// recorder is a rapid.TB that records a failure instead of failing the test.
type recorder struct {
	*testing.T
	mu     sync.Mutex
	failed bool
	msgs   []string
}

func (r *recorder) Name() string { return r.T.Name() + "_control" }
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *recorder) Error(args ...any)                 { r.Errorf("%s", fmt.Sprint(args...)) }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); r.FailNow() }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); r.FailNow() }
func (r *recorder) Fail()                             { r.mu.Lock(); r.failed = true; r.mu.Unlock() }
func (r *recorder) FailNow()                          { r.Fail(); runtime.Goexit() }
func (r *recorder) Failed() bool                      { r.mu.Lock(); defer r.mu.Unlock(); return r.failed }
func (r *recorder) Log(args ...any) {
	r.mu.Lock()
	r.msgs = append(r.msgs, fmt.Sprint(args...))
	r.mu.Unlock()
}
func (r *recorder) Logf(format string, args ...any) { r.Log(fmt.Sprintf(format, args...)) }

// TestModelCatchesRacyStore is the negative control for the rapid model
// test: a check-then-act store must be caught, and shrunk to a short
// sequence that ends in a race.
func TestModelCatchesRacyStore(t *testing.T) {
	r := &recorder{T: t}
	// rapid writes the shrunk failure under testdata/rapid/<name>/; a stale
	// one would be replayed instead of found anew, so clear it both ways.
	failDir := filepath.Join("testdata", "rapid", r.Name())
	os.RemoveAll(failDir)
	t.Cleanup(func() {
		os.RemoveAll(failDir)
		os.Remove(filepath.Dir(failDir)) // and the folders, if now empty
		os.Remove(filepath.Dir(filepath.Dir(failDir)))
	})

	f := Factory{New: func(testing.TB) ledger.Store { return &racyStore{m: map[ledger.ID]*racyEntry{}} }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		rapid.Check(r, func(rt *rapid.T) { modelRun(t, rt, f) })
	}()
	<-done
	if !r.Failed() {
		t.Fatal("the rapid model test passed a check-then-act store")
	}
	out := strings.Join(r.msgs, "\n")
	if !strings.Contains(out, "two racers both spent one confirmation") {
		t.Fatalf("failure was not the double spend:\n%s", out)
	}
	// The shrunk sequence is the shortest: one Issue, one Race.
	want := `[rapid] draw action: "Issue"` + "\n" + `[rapid] draw action: "Race"` + "\n"
	if strings.Count(out, "[rapid] draw action:") != 2 || !strings.Contains(out, want) {
		t.Fatalf("shrunk failing sequence is not Issue, Race:\n%s", out)
	}
	t.Logf("caught and shrunk:\n%s", out)
}
