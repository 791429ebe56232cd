package linearizability

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// RecorderOptions configures a [Recorder]. The zero value is ready to use.
type RecorderOptions struct {
	// Skew is how far the store's clock may be from the recorder's. Each
	// operation's decision window is widened by it on both sides. Zero (the
	// default, and right for an in-process store on the same clock) checks
	// expiry to the nanosecond; a store on another machine (Redis,
	// PostgreSQL) needs its clock's worst offset plus its own rounding.
	Skew time.Duration
}

// A Recorder collects one history. It is safe for concurrent use; each
// goroutine records through its own [Client].
type Recorder struct {
	start time.Time // carries a monotonic reading: the time axis' origin
	// wallStart is the wall clock's reading at the axis' origin, without a
	// monotonic reading; see calibrateWall.
	wallStart time.Time
	skew      int64

	mu      sync.Mutex
	ops     []porcupine.Operation
	clients int // ClientIds handed out
}

// NewRecorder starts a history now.
func NewRecorder(opts RecorderOptions) (*Recorder, error) {
	if opts.Skew < 0 {
		return nil, fmt.Errorf("linearizability: negative clock skew %v", opts.Skew)
	}
	start := time.Now()
	return &Recorder{start: start, wallStart: calibrateWall(start), skew: int64(opts.Skew)}, nil
}

// calibrateWall returns the wall clock's reading at the monotonic instant
// start. time.Now reads the wall clock, then the monotonic one: a thread
// preempted in between gets a Time whose two readings disagree. On a
// loaded 2-vCPU machine, about one call in 150,000 was off by more than
// 0.1 ms, and the worst by 13 ms, so start's own wall reading cannot be
// trusted to the millisecond. Of many readings taken now, the median's can.
func calibrateWall(start time.Time) time.Time {
	var off [101]time.Duration // wall minus monotonic, from start's pair
	for i := range off {
		t := time.Now()
		off[i] = t.Round(0).Sub(start.Round(0)) - t.Sub(start)
	}
	slices.Sort(off[:])
	return start.Round(0).Add(off[len(off)/2])
}

// now is the current time on the history's axis, from the monotonic clock.
func (r *Recorder) now() int64 { return time.Since(r.start).Nanoseconds() }

// At converts t to the history's time axis. A time that carries a
// monotonic reading (from time.Now, and Add on it) converts by it, exactly.
// One without (Round(0) strips it) converts by its wall reading, against
// the wall clock's reading at the axis' origin: that is the reading a store
// on another clock compares (see [Workload.WallClock]).
func (r *Recorder) At(t time.Time) int64 {
	if t == t.Round(0) { // no monotonic reading: Round(0) strips only that
		return t.Sub(r.wallStart).Nanoseconds()
	}
	return t.Sub(r.start).Nanoseconds()
}

func (r *Recorder) newClientID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clients++
	return r.clients - 1
}

// Client returns a new client: one sequential stream of operations, with a
// ClientId of its own (taken at its first operation, so that ClientIds are
// dense: porcupine's visualization draws one row per ClientId).
func (r *Recorder) Client() *Client { return &Client{r: r, id: -1} }

// History returns a copy of what has been recorded so far. Operations still
// in flight are not included: call it once every client has returned.
func (r *Recorder) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	return History{Operations: append([]porcupine.Operation(nil), r.ops...), Clients: r.clients}
}

// A Client records the operations of one goroutine. It is not safe for
// concurrent use: porcupine requires a client's operations to be
// sequential. After an operation whose outcome is unknown the client takes
// a new ClientId, because that operation stays pending to the end of the
// history and would otherwise overlap the client's next ones.
type Client struct {
	r    *Recorder
	id   int      // -1: take a new one at the next operation
	last [2]int64 // call and return times of the last operation
}

// Issue records s.Add(ctx, conf).
func (c *Client) Issue(ctx context.Context, s ledger.Store, conf ledger.Confirmation) error {
	_, err := c.Do(Call{Op: OpIssue, ID: conf.ID, Expires: conf.Expires, Approval: conf.Approval}, func() (ledger.Record, error) {
		return ledger.Record{}, s.Add(ctx, conf)
	})
	return err
}

// Redeem records s.Spend(ctx, id, ledger.Acting, lease).
func (c *Client) Redeem(ctx context.Context, s ledger.Store, id ledger.ID, lease time.Duration) (ledger.Record, error) {
	return c.Do(Call{Op: OpRedeem, ID: id, Lease: lease}, func() (ledger.Record, error) {
		return s.Spend(ctx, id, ledger.Acting, lease)
	})
}

// Cancel records s.Spend(ctx, id, ledger.Cancelled, 0).
func (c *Client) Cancel(ctx context.Context, s ledger.Store, id ledger.ID) (ledger.Record, error) {
	return c.Do(Call{Op: OpCancel, ID: id}, func() (ledger.Record, error) {
		return s.Spend(ctx, id, ledger.Cancelled, 0)
	})
}

// Complete records s.Complete of an outcome of kind whose result is
// [TagResult](tag).
func (c *Client) Complete(ctx context.Context, s ledger.Store, id ledger.ID, kind ledger.OutcomeKind, tag uint64) error {
	_, err := c.Do(Call{Op: OpComplete, ID: id, Kind: kind, Tag: tag}, func() (ledger.Record, error) {
		r := TagResult(tag)
		return ledger.Record{}, s.Complete(ctx, id, ledger.Outcome{Kind: kind, Result: r, Size: int64(len(r))})
	})
	return err
}

// Decide records s.Decide(ctx, id, Approvers[approver], approve).
func (c *Client) Decide(ctx context.Context, s ledger.Store, id ledger.ID, approver int, approve bool) (ledger.Record, error) {
	return c.Do(Call{Op: OpDecide, ID: id, Approver: approver, Approve: approve}, func() (ledger.Record, error) {
		return s.Decide(ctx, id, Approvers[approver], approve)
	})
}

// A Call is what an operation asks for: op on confirmation id, with the
// expiry being issued and the out-of-band approval it needs (OpIssue), the
// lease asked for (OpRedeem), the outcome recorded (OpComplete: its kind,
// and the tag naming its result), or who decides how (OpDecide: an index
// in [Approvers]).
type Call struct {
	Op       Op
	ID       ledger.ID
	Expires  time.Time
	Approval *ledger.Approval
	Lease    time.Duration
	Kind     ledger.OutcomeKind
	Tag      uint64
	Approver int
	Approve  bool
}

// Do records one operation performed by f, over any transport (a store,
// a ledger, an MCP server). f must report the outcome with the ledger's
// sentinel errors and, for a spend, the record: the confirmation's id on
// success, the outcome (its Result a tag, see [ResultTag]) with
// ledger.ErrDone. Any other error means the outcome is unknown, and the
// operation is recorded as pending until the end of the history — it may
// take effect at any later time — never dropped. Do returns what f
// returned.
func (c *Client) Do(call Call, f func() (ledger.Record, error)) (ledger.Record, error) {
	if call.Op < OpIssue || call.Op > OpDecide || call.Approver < 0 || call.Approver >= len(Approvers) {
		return ledger.Record{}, fmt.Errorf("linearizability: invalid operation %v", call.Op)
	}
	if c.id < 0 {
		c.id = c.r.newClientID()
	}
	begin := c.r.now()
	rec, err := f()
	end := c.r.now()
	c.last = [2]int64{begin, end}
	c.add(call, begin, end, rec, err)
	return rec, err
}

// Also records, under a ClientId of its own, an operation that took place
// inside this client's last one, unseen: for a server, the Complete that
// its call made after acting. err is what its outcome is known to be: nil
// if the last operation showed it happened, an error if its outcome is
// unknown.
func (c *Client) Also(call Call, err error) {
	other := c.r.Client()
	other.id = c.r.newClientID()
	other.add(call, c.last[0], c.last[1], ledger.Record{}, err)
}

// add records one operation of c called at begin, returning rec, err at end.
func (c *Client) add(call Call, begin, end int64, rec ledger.Record, err error) {
	r := c.r
	in := Input{Op: call.Op, ID: call.ID, Lease: int64(call.Lease), Kind: call.Kind, Tag: call.Tag,
		Approver: uint8(call.Approver), Approve: call.Approve}
	if call.Op == OpIssue {
		in.Expires = r.At(call.Expires)
		in.Need, in.Eligible, in.Requester = eligibility(call.Approval)
	}
	out := Output{Result: ledger.ResultOf(err)}
	switch {
	case out.Result == ledger.ResultOK && (call.Op == OpRedeem || call.Op == OpCancel):
		out.ID = rec.ID
	case out.Result == ledger.ResultDone && rec.Outcome.Kind != 0:
		out.Kind, out.Tag = rec.Outcome.Kind, ResultTag(rec.Outcome.Result)
	}
	in.From, in.To = begin-r.skew, addSat(end, r.skew)
	op := porcupine.Operation{ClientId: c.id, Call: begin, Output: out, Return: end}
	if out.Result == ledger.ResultError {
		// As etcd's robustness tests do: the request may still be in
		// flight and take effect at any later time, so it returns "at the
		// end of time", and this client continues under a new id.
		op.Return, in.To = math.MaxInt64, math.MaxInt64
		c.id = -1
	}
	op.Input = in
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// addSat returns a+b (b ≥ 0), saturating at math.MaxInt64.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// A History is a recorded set of operations, in porcupine's form, with
// Input and Output of types [Input] and [Output].
type History struct {
	Operations []porcupine.Operation
	// Clients is how many ClientIds were used: one per client, plus one
	// per operation whose outcome was unknown and that its client followed
	// with another.
	Clients int
	// Goroutines is how many goroutines recorded it, if known (Record
	// sets it).
	Goroutines int
}

// Stats summarises a history: enough to tell whether a workload exercised
// what it meant to.
type Stats struct {
	Operations int
	Goroutines int
	Clients    int
	Partitions int // distinct confirmation ids
	// Results counts outcomes per operation kind.
	Results map[Op]map[ledger.Result]int
	// Unknown is how many operations had an unknown outcome (pending to
	// the end of the history).
	Unknown int
	// Straddling is how many spends that returned had a decision window
	// containing their confirmation's expiry, so either side was allowed;
	// StraddlingWon how many of them succeeded (decided before it), and
	// StraddlingExpired how many were refused as expired (at or after it).
	Straddling, StraddlingWon, StraddlingExpired int
	// Crossed is how many confirmations, spent before their expiry, were
	// answered from their record after it: a spend called after the
	// expiry answered in progress, done, in doubt or cancelled (only a
	// pending confirmation expires).
	Crossed int
	// LeaseCrossed is how many redeemed confirmations got answers from
	// both sides of their lease's end and recorded no outcome: in progress
	// before it, in doubt after it.
	LeaseCrossed int
	// Overlap is the most operations on one confirmation in flight at the
	// same instant (operations with unknown outcome excluded): how hard
	// the goroutines actually raced.
	Overlap int
}

// Stats computes the history's [Stats].
func (h History) Stats() Stats {
	st := Stats{
		Operations: len(h.Operations),
		Goroutines: h.Goroutines,
		Clients:    h.Clients,
		Results:    make(map[Op]map[ledger.Result]int),
	}
	expiry := make(map[ledger.ID]int64)
	ids := make(map[ledger.ID]bool)
	for _, op := range h.Operations {
		in := op.Input.(Input)
		ids[in.ID] = true
		if in.Op == OpIssue {
			expiry[in.ID] = in.Expires
		}
	}
	st.Partitions = len(ids)
	for _, op := range h.Operations {
		in, out := op.Input.(Input), op.Output.(Output)
		if st.Results[in.Op] == nil {
			st.Results[in.Op] = make(map[ledger.Result]int)
		}
		st.Results[in.Op][out.Result]++
		if out.Result == ledger.ResultError {
			st.Unknown++
		}
		if e, ok := expiry[in.ID]; ok && (in.Op == OpRedeem || in.Op == OpCancel) && out.Result != ledger.ResultError && in.From < e && e <= in.To {
			st.Straddling++
			switch out.Result {
			case ledger.ResultOK:
				st.StraddlingWon++
			case ledger.ResultExpired:
				st.StraddlingExpired++
			}
		}
	}
	for _, part := range Partition(h.Operations) {
		st.Overlap = max(st.Overlap, overlap(part))
		var inProgress, inDoubt, completed, crossed bool
		for _, op := range part {
			in := op.Input.(Input)
			switch r := op.Output.(Output).Result; r {
			case ledger.ResultInProgress, ledger.ResultDone, ledger.ResultInDoubt, ledger.ResultCancelled:
				e, ok := expiry[in.ID]
				crossed = crossed || ok && (in.Op == OpRedeem || in.Op == OpCancel) && in.From >= e
			}
			switch op.Output.(Output).Result {
			case ledger.ResultOK:
				completed = completed || in.Op == OpComplete
			case ledger.ResultInProgress:
				inProgress = true
			case ledger.ResultInDoubt:
				inDoubt = true
			}
		}
		if inProgress && inDoubt && !completed {
			st.LeaseCrossed++
		}
		if crossed {
			st.Crossed++
		}
	}
	return st
}

// overlap is the most operations of ops in flight at one instant.
func overlap(ops []porcupine.Operation) int {
	type edge struct {
		t     int64
		delta int
	}
	var edges []edge
	for _, op := range ops {
		if op.Return != math.MaxInt64 {
			edges = append(edges, edge{op.Call, 1}, edge{op.Return, -1})
		}
	}
	// Calls before returns at the same instant: porcupine's intervals are
	// closed.
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].t != edges[j].t {
			return edges[i].t < edges[j].t
		}
		return edges[i].delta > edges[j].delta
	})
	most, n := 0, 0
	for _, e := range edges {
		n += e.delta
		most = max(most, n)
	}
	return most
}

// String is a one-paragraph summary of the stats.
func (s Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d operations, %d goroutines, %d clients, %d partitions (confirmation ids)",
		s.Operations, s.Goroutines, s.Clients, s.Partitions)
	for _, op := range []Op{OpIssue, OpRedeem, OpCancel, OpComplete, OpDecide} {
		rs := s.Results[op]
		var parts []string
		for r, n := range rs {
			parts = append(parts, fmt.Sprintf("%s %d", r, n))
		}
		sort.Strings(parts)
		fmt.Fprintf(&b, "; %s: %s", op, strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, "; %d outcomes unknown; %d spends straddling their confirmation's expiry (%d won, %d expired); %d confirmations answered from their record after their expiry, %d across their lease's end; up to %d operations in flight on one confirmation",
		s.Unknown, s.Straddling, s.StraddlingWon, s.StraddlingExpired, s.Crossed, s.LeaseCrossed, s.Overlap)
	return b.String()
}
