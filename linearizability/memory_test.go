package linearizability

import (
	"context"
	"errors"
	"math"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// checkTimeout bounds every porcupine run; a timed-out run fails.
const checkTimeout = 60 * time.Second

// workload is the CI size (at least 10,000 operations over 64 goroutines),
// or a reduced one under -short.
func workload() Workload {
	if testing.Short() {
		return Workload{Goroutines: 16, Operations: 2_000}
	}
	return Workload{Goroutines: 64, Operations: 10_000}
}

// newMemory returns an in-memory store whose caps the workload cannot
// reach, so that every Add is decided on the id alone.
func newMemory() *ledger.Memory {
	return ledger.NewMemory(ledger.MemoryOptions{MaxPending: 1 << 20, MaxPendingPerPrincipal: 1 << 20})
}

// record runs the workload against s.
func record(t *testing.T, s ledger.Store, w Workload) History {
	t.Helper()
	h, err := Record(t.Context(), s, w)
	if err != nil {
		t.Fatalf("Record: %v", err)
	}
	if st := h.Stats(); st.Operations != w.Operations || st.Goroutines != w.Goroutines {
		t.Fatalf("recorded %d operations over %d goroutines, want %d over %d",
			st.Operations, st.Goroutines, w.Operations, w.Goroutines)
	}
	return h
}

// covered checks that a correct store's history exercised everything the
// workload is meant to, so that a pass is not a pass by omission.
func covered(t *testing.T, h History) {
	t.Helper()
	st := h.Stats()
	spends := func(r ledger.Result) int { return st.Results[OpRedeem][r] + st.Results[OpCancel][r] }
	for _, want := range []struct {
		what string
		n    int
	}{
		{"issued", st.Results[OpIssue][ledger.ResultOK]},
		{"refused duplicate issues", st.Results[OpIssue][ledger.ResultExists]},
		{"redeemed", st.Results[OpRedeem][ledger.ResultOK]},
		{"cancelled", st.Results[OpCancel][ledger.ResultOK]},
		{"answered in progress", spends(ledger.ResultInProgress)},
		{"answered with the recorded outcome", st.Results[OpRedeem][ledger.ResultDone]},
		{"answered in doubt", spends(ledger.ResultInDoubt)},
		{"refused as cancelled", spends(ledger.ResultCancelled)},
		{"refused as expired", spends(ledger.ResultExpired)},
		{"refused as unknown", spends(ledger.ResultUnknown)},
		{"outcomes recorded", st.Results[OpComplete][ledger.ResultOK]},
		{"completes refused as done already", st.Results[OpComplete][ledger.ResultDone]},
		{"completes refused in doubt", st.Results[OpComplete][ledger.ResultInDoubt]},
		{"completes refused as not redeemed", st.Results[OpComplete][ledger.ResultNotActing]},
		{"decisions recorded", st.Results[OpDecide][ledger.ResultOK]},
		{"decisions refused as decided", st.Results[OpDecide][ledger.ResultDecided]},
		{"decisions refused as the requester's", st.Results[OpDecide][ledger.ResultSelfApproval]},
		{"decisions refused as not an approver's", st.Results[OpDecide][ledger.ResultNotApprover]},
		{"redeems told to await approval", st.Results[OpRedeem][ledger.ResultAwaiting]},
		{"redeems refused as declined", st.Results[OpRedeem][ledger.ResultDeclined]},
		{"spends whose window held their confirmation's expiry", st.Straddling},
		{"confirmations answered from their record after their expiry", st.Crossed},
		{"confirmations answered across their lease's end", st.LeaseCrossed},
	} {
		if want.n == 0 {
			t.Errorf("workload exercised no %s: %v", want.what, st)
		}
	}
	if st.Overlap < 2 {
		t.Errorf("no two operations on one confirmation were ever in flight together: %v", st)
	}
}

// TestMemory checks the in-memory store under the racing workload.
func TestMemory(t *testing.T) {
	w := workload()
	h := record(t, newMemory(), w)
	covered(t, h)
	Check(t, h, checkTimeout)
}

// errInjected stands for a store that went away mid-request: not a
// sentinel, so the outcome is unknown.
var errInjected = errors.New("injected fault: connection reset")

// lossy is the in-memory store behind a faulty connection: some requests
// are lost before they reach the store (not applied), and some replies are
// lost after it acted (applied). The caller sees the same error for both.
// Faults are deterministic in the call count, not random.
type lossy struct {
	ledger.Store
	calls                  atomic.Uint64
	lostRequest, lostReply atomic.Uint64 // how many of each were injected
}

// fault reports whether call n loses its request (before) or its reply
// (after).
func (l *lossy) fault() (before, after bool) {
	n := l.calls.Add(1)
	return n%37 == 0, n%41 == 0
}

func (l *lossy) Add(ctx context.Context, c ledger.Confirmation) error {
	before, after := l.fault()
	if before {
		l.lostRequest.Add(1)
		return errInjected
	}
	err := l.Store.Add(ctx, c)
	if after {
		l.lostReply.Add(1)
		return errInjected
	}
	return err
}

func (l *lossy) Spend(ctx context.Context, id ledger.ID, to ledger.State, lease time.Duration) (ledger.Record, error) {
	before, after := l.fault()
	if before {
		l.lostRequest.Add(1)
		return ledger.Record{}, errInjected
	}
	r, err := l.Store.Spend(ctx, id, to, lease)
	if after {
		l.lostReply.Add(1)
		return ledger.Record{}, errInjected
	}
	return r, err
}

func (l *lossy) Complete(ctx context.Context, id ledger.ID, o ledger.Outcome) error {
	before, after := l.fault()
	if before {
		l.lostRequest.Add(1)
		return errInjected
	}
	err := l.Store.Complete(ctx, id, o)
	if after {
		l.lostReply.Add(1)
		return errInjected
	}
	return err
}

// TestMemoryLostReplies checks the in-memory store behind a connection
// that loses requests and replies: operations with unknown outcomes stay
// in the history as "may or may not have applied". As a control, the
// same history with those operations dropped — what a recorder that
// discarded failures would check — must not be linearizable, which shows
// that some of them did apply.
func TestMemoryLostReplies(t *testing.T) {
	w := workload()
	s := &lossy{Store: newMemory()}
	h := record(t, s, w)
	covered(t, h)
	st := h.Stats()
	if st.Unknown == 0 || s.lostRequest.Load() == 0 || s.lostReply.Load() == 0 {
		t.Fatalf("no faults injected: %v", st)
	}
	if st.Clients <= w.Goroutines || st.Clients > w.Goroutines+st.Unknown {
		t.Errorf("%d clients, want one per goroutine plus one per unknown outcome that was not the goroutine's last (%d..%d)",
			st.Clients, w.Goroutines+1, w.Goroutines+st.Unknown)
	}
	t.Logf("injected %d lost requests and %d lost replies", s.lostRequest.Load(), s.lostReply.Load())
	sequentialClients(t, h)
	Check(t, h, checkTimeout)

	t.Run("dropped", func(t *testing.T) {
		var kept History
		kept.Goroutines, kept.Clients = h.Goroutines, h.Clients
		for _, op := range h.Operations {
			if op.Output.(Output).Result != ledger.ResultError {
				kept.Operations = append(kept.Operations, op)
			}
		}
		r := Verify(kept, checkTimeout)
		t.Logf("without its %d unknown outcomes: %s in %v", st.Unknown, r.Result, r.Elapsed.Round(time.Millisecond))
		if r.Result != porcupine.Illegal {
			t.Fatalf("dropping the lost operations left a history porcupine calls %s, want Illegal", r.Result)
		}
	})
}

// sequentialClients checks what porcupine's visualization assumes of
// ClientIds: each one's operations never overlap, and an operation with
// unknown outcome (pending to the end) is the last of its ClientId.
func sequentialClients(t *testing.T, h History) {
	t.Helper()
	byClient := make(map[int][]porcupine.Operation)
	for _, op := range h.Operations {
		byClient[op.ClientId] = append(byClient[op.ClientId], op)
	}
	if len(byClient) != h.Clients {
		t.Errorf("%d ClientIds used, history says %d", len(byClient), h.Clients)
	}
	for id, ops := range byClient {
		sort.Slice(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
		for i, op := range ops {
			unknown := op.Output.(Output).Result == ledger.ResultError
			if unknown != (op.Return == math.MaxInt64) || unknown != (op.Input.(Input).To == math.MaxInt64) {
				t.Fatalf("client %d: outcome %v with Return %d, To %d", id, op.Output.(Output).Result, op.Return, op.Input.(Input).To)
			}
			if i+1 < len(ops) && (unknown || op.Return >= ops[i+1].Call) {
				t.Fatalf("client %d: operation %d [%d, %d] overlaps the next one, called at %d",
					id, i, op.Call, op.Return, ops[i+1].Call)
			}
		}
	}
}

func TestRecordInvalid(t *testing.T) {
	for _, w := range []Workload{{Goroutines: -1}, {Operations: -1}, {Hot: -1}, {Racers: -1}, {OpTimeout: -1}, {Skew: -1}} {
		if _, err := Record(t.Context(), newMemory(), w); err == nil {
			t.Errorf("Record accepted %+v", w)
		}
	}
	if _, err := Record(t.Context(), nil, Workload{}); err == nil {
		t.Error("Record accepted a nil store")
	}
	if _, err := Record(t.Context(), newMemory(), Workload{Replicas: []ledger.Store{nil}}); err == nil {
		t.Error("Record accepted a nil replica")
	}
}

// TestRecordStopped checks that a cancelled context stops the workload
// and is reported, with what was recorded so far.
func TestRecordStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	h, err := Record(ctx, newMemory(), Workload{Goroutines: 4, Operations: 1000})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Record after cancel: %v, want context.Canceled", err)
	}
	if len(h.Operations) >= 1000 {
		t.Fatalf("Record ran all %d operations after its context was cancelled", len(h.Operations))
	}
}

// TestRecorderAt checks how expiries reach the history's axis: by their
// monotonic reading when they carry one, else by their wall reading,
// against the wall clock's reading at the axis' origin.
func TestRecorderAt(t *testing.T) {
	r, err := NewRecorder(RecorderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tests := []struct {
		name string
		t    time.Time
		want int64
	}{
		{"monotonic", now.Add(5 * time.Millisecond), now.Add(5 * time.Millisecond).Sub(r.start).Nanoseconds()},
		{"wall at the origin", r.wallStart, 0},
		{"wall, later", r.wallStart.Add(5 * time.Millisecond), int64(5 * time.Millisecond)},
		{"wall, earlier", r.wallStart.Add(-time.Second), -int64(time.Second)},
		{"wall, far", time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), math.MaxInt64},
	}
	for _, tt := range tests {
		if got := r.At(tt.t); got != tt.want {
			t.Errorf("%s: At = %d, want %d", tt.name, got, tt.want)
		}
	}
	// The calibration: a fresh time's two readings land together, but for
	// the rare time.Now preempted between them, so most must.
	agree := 0
	for range 11 {
		x := time.Now()
		if d := r.At(x.Round(0)) - r.At(x); d > -int64(100*time.Microsecond) && d < int64(100*time.Microsecond) {
			agree++
		}
	}
	if agree < 6 {
		t.Errorf("only %d of 11 fresh times land within 100 µs by wall and by monotonic reading", agree)
	}
}

// TestWallClockStore checks a store that decides expiry on the wall clock,
// as a database server does, under the racing workload with
// Workload.WallClock: the broken store without a defect compares Expires
// with time.Now, and so compares wall readings once Expires has none.
func TestWallClockStore(t *testing.T) {
	w := workload()
	w.WallClock = true
	w.Skew = 10 * time.Microsecond // the calibration's own error, a few ns, with room
	h := record(t, &broken{}, w)
	covered(t, h)
	Check(t, h, checkTimeout)
}
