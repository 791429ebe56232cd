package linearizability

import (
	"context"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// The scenes are the workload's scripted part. Some answers are rare in
// the race: a Complete refused as not redeemed or in doubt, a spend whose
// window holds its confirmation's expiry, a confirmation answered in
// progress and then in doubt with no outcome recorded. 2,000 raced
// operations held none of one of them in about one run in four (measured:
// 23 of 100 -short runs of the five store tests), 10,000 only a few. So
// one goroutine first plays each such sequence on confirmations no one
// else touches, until its answers show what the scene is for (a lost reply
// or a slow store spoils a take; a lease or an expiry too short for the
// store's round trip is doubled): each is then in the history whatever the
// timing, and checked with the rest.
//
// The scenes stop when the goroutine's share of operations is used up, or
// at maxTakes takes of one scene (a broken store may never answer as the
// scene wants); a lease or TTL is doubled up to maxWindow.
const (
	maxTakes  = 32
	maxWindow = 10 * time.Second
)

// director plays the scenes for one goroutine.
type director struct {
	wl     *run
	s      ledger.Store
	c      *Client
	ctx    context.Context
	budget int           // operations the goroutine may still perform
	rtt    time.Duration // the slowest answer seen so far
	skew   time.Duration
}

// play runs every scene within budget operations and returns how many
// operations it performed.
func (wl *run) play(ctx context.Context, s ledger.Store, c *Client, budget int, skew time.Duration) int {
	d := &director{wl: wl, s: s, c: c, ctx: ctx, budget: budget, skew: skew}
	// The approvals first: short, and a store that decides wrongly keeps
	// replaying them, which shows its defect in every history.
	for _, scene := range []func() bool{d.approved, d.declined, d.refusals, d.outcome, d.cancelled, d.expired, d.unknown,
		d.leaseEnds, d.expiryCrossed} {
		for range maxTakes {
			if d.budget <= 0 || ctx.Err() != nil || scene() {
				break
			}
		}
	}
	return budget - d.budget
}

// result performs one operation through the client if the budget allows,
// and returns its answer (ResultError if it did not run).
func (d *director) result(f func() error) ledger.Result {
	if d.budget <= 0 || d.ctx.Err() != nil {
		return ledger.ResultError
	}
	d.budget--
	err := f()
	d.rtt = max(d.rtt, time.Duration(d.c.last[1]-d.c.last[0]))
	return ledger.ResultOf(err)
}

func (d *director) issue(ttl time.Duration) (ledger.Confirmation, ledger.Result) {
	return d.issueWith(ttl, nil)
}

// issueWith issues a confirmation that needs approval a (nil: none).
func (d *director) issueWith(ttl time.Duration, a *ledger.Approval) (ledger.Confirmation, ledger.Result) {
	expires := time.Now().Add(ttl)
	if d.wl.wallClock {
		expires = expires.Round(0)
	}
	conf := ledger.Confirmation{ID: d.wl.newID(), Tool: "linearizability", ArgsDigest: "-", Principal: "scenes", Expires: expires, Approval: a}
	return conf, d.result(func() error { return d.c.Issue(d.ctx, d.s, conf) })
}

func (d *director) decide(id ledger.ID, approver int, approve bool) ledger.Result {
	return d.result(func() error { _, err := d.c.Decide(d.ctx, d.s, id, approver, approve); return err })
}

func (d *director) redeem(s ledger.Store, id ledger.ID, lease time.Duration) ledger.Result {
	return d.result(func() error { _, err := d.c.Redeem(d.ctx, s, id, lease); return err })
}

func (d *director) cancel(id ledger.ID) ledger.Result {
	return d.result(func() error { _, err := d.c.Cancel(d.ctx, d.s, id); return err })
}

func (d *director) complete(id ledger.ID) ledger.Result {
	return d.result(func() error { return d.c.Complete(d.ctx, d.s, id, ledger.OutcomeDone, d.wl.tags.Add(1)) })
}

// refusals: a duplicate issue refused as existing, and a Complete before
// any redeem refused as not redeemed.
func (d *director) refusals() bool {
	conf, r := d.issue(time.Hour)
	return r == ledger.ResultOK &&
		d.result(func() error { return d.c.Issue(d.ctx, d.s, conf) }) == ledger.ResultExists &&
		d.complete(conf.ID) == ledger.ResultNotActing
}

// outcome: a redeem, a retry answered in progress, the outcome recorded, a
// second Complete refused as done, and a retry answered with the outcome.
func (d *director) outcome() bool {
	conf, r := d.issue(time.Hour)
	id := conf.ID
	return r == ledger.ResultOK &&
		d.redeem(d.s, id, time.Hour) == ledger.ResultOK &&
		d.redeem(d.s, id, time.Hour) == ledger.ResultInProgress &&
		d.complete(id) == ledger.ResultOK &&
		d.complete(id) == ledger.ResultDone &&
		d.redeem(d.s, id, time.Hour) == ledger.ResultDone
}

// cancelled: a cancel, and a redeem refused as cancelled.
func (d *director) cancelled() bool {
	conf, r := d.issue(time.Hour)
	return r == ledger.ResultOK && d.cancel(conf.ID) == ledger.ResultOK && d.redeem(d.s, conf.ID, time.Hour) == ledger.ResultCancelled
}

// expired: a redeem of a confirmation issued expired.
func (d *director) expired() bool {
	conf, r := d.issue(-time.Second)
	return r == ledger.ResultOK && d.redeem(d.s, conf.ID, time.Hour) == ledger.ResultExpired
}

// unknown: a redeem of an id never issued.
func (d *director) unknown() bool {
	return d.redeem(d.s, d.wl.newID(), time.Hour) == ledger.ResultUnknown
}

// leaseEnds: a redeem with a lease long enough for a retry to be answered
// in progress within it (eight of the slowest round trips so far, at least
// a millisecond; doubled on each take that finds it too short), then,
// once the lease has ended on the store's clock as well, a retry answered
// in doubt and a Complete refused in doubt.
func (d *director) leaseEnds() bool {
	lease := max(8*d.rtt, time.Millisecond)
	for ; lease <= maxWindow; lease *= 2 {
		conf, r := d.issue(time.Hour)
		if r != ledger.ResultOK || d.redeem(d.s, conf.ID, lease) != ledger.ResultOK {
			return false
		}
		// The store sets the lease's end on its own clock, within the
		// redeem's window give or take the skew.
		ends := d.c.last[1] + int64(lease+d.skew)
		switch d.redeem(d.s, conf.ID, time.Hour) {
		case ledger.ResultInDoubt: // the lease ended first: a longer one
			continue
		case ledger.ResultInProgress:
		default:
			return false
		}
		if !d.sleepPast(ends) {
			return false
		}
		return d.redeem(d.s, conf.ID, time.Hour) == ledger.ResultInDoubt && d.complete(conf.ID) == ledger.ResultInDoubt
	}
	return false
}

// expiryCrossed: a confirmation redeemed before its expiry (a TTL of eight
// of the slowest round trips, at least a millisecond, doubled on each take
// that finds it too short), a retry whose window holds the expiry, and one
// called after it, both answered in progress from the record.
func (d *director) expiryCrossed() bool {
	ttl := max(8*d.rtt, time.Millisecond)
	for ; ttl <= maxWindow; ttl *= 2 {
		conf, r := d.issue(ttl)
		if r != ledger.ResultOK {
			return false
		}
		e := d.wl.rec.At(conf.Expires)
		switch d.redeem(d.s, conf.ID, time.Hour) {
		case ledger.ResultExpired:
			continue
		case ledger.ResultOK:
		default:
			return false
		}
		skew := int64(d.skew)
		if d.c.last[1]-skew >= e { // no time left to call before the expiry
			continue
		}
		// Called before the expiry, the retry waits for it inside its
		// window, as a slow round trip would, before it reaches the store.
		if d.redeem(sleeping{d.s, func() { d.sleepPast(e) }}, conf.ID, time.Hour) != ledger.ResultInProgress {
			return false
		}
		if d.c.last[0]-skew >= e {
			continue
		}
		return d.sleepPast(e+skew) && d.redeem(d.s, conf.ID, time.Hour) == ledger.ResultInProgress
	}
	return false
}

// approved: a confirmation that needs one approval, requested by bob: a
// redeem told to await approval, the requester and an unlisted approver
// refused, an approval, a second approver refused as decided, a redeem.
func (d *director) approved() bool {
	conf, r := d.issueWith(time.Hour, needing(1, "bob"))
	id := conf.ID
	return r == ledger.ResultOK &&
		d.redeem(d.s, id, time.Hour) == ledger.ResultAwaiting &&
		d.decide(id, bob, true) == ledger.ResultSelfApproval &&
		d.decide(id, mallory, true) == ledger.ResultNotApprover &&
		d.decide(id, alice, true) == ledger.ResultOK &&
		d.decide(id, carol, false) == ledger.ResultDecided &&
		d.redeem(d.s, id, time.Hour) == ledger.ResultOK
}

// declined: a confirmation that needs two approvals, one given, then a
// decline, and a redeem refused as declined.
func (d *director) declined() bool {
	conf, r := d.issueWith(time.Hour, needing(2, ""))
	id := conf.ID
	return r == ledger.ResultOK &&
		d.decide(id, carol, true) == ledger.ResultOK &&
		d.decide(id, alice, false) == ledger.ResultOK &&
		d.redeem(d.s, id, time.Hour) == ledger.ResultDeclined
}

// sleepPast sleeps until the history's clock is past at (plus a
// millisecond, for a store's rounding), or the context ends.
func (d *director) sleepPast(at int64) bool {
	t := time.NewTimer(time.Duration(at-d.wl.rec.now()) + time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-d.ctx.Done():
		return false
	}
}

// sleeping calls wait before each Spend reaches the store.
type sleeping struct {
	ledger.Store
	wait func()
}

func (s sleeping) Spend(ctx context.Context, id ledger.ID, to ledger.State, lease time.Duration) (ledger.Record, error) {
	s.wait()
	return s.Store.Spend(ctx, id, to, lease)
}
