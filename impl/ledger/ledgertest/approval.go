package ledgertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// The approvers of the approval suite: alice is listed by her ID, bob and
// carol by a group, mallory is in no listed group. Their IDs and groups
// hold bytes a lossy store would mangle.
var (
	alice   = ledger.Approver{ID: "oidc:https://id.example «alice»"}
	bob     = ledger.Approver{ID: "oidc:https://id.example bob\x00", Groups: []string{"group:other", "group:ops é"}}
	carol   = ledger.Approver{ID: "passkey:carol", Groups: []string{"group:ops é"}}
	mallory = ledger.Approver{ID: "oidc:https://id.example mallory", Groups: []string{"group:other"}}
)

// OutOfBand returns c needing required approvals from alice and the group
// of bob and carol, requested by requester ("" for none).
func OutOfBand(c ledger.Confirmation, required int, requester string) ledger.Confirmation {
	c.Approval = &ledger.Approval{
		Required:  required,
		Approvers: []string{alice.ID, "group:ops é"},
		Requester: requester,
		Question:  "Delete «report\u2068.txt\u2069»? \x00\ufeff",
	}
	return c
}

// none is the state of an answer that comes with no record.
const none ledger.State = 255

// A dop is one call of the approval table and the answer it wants: a
// decision by who, a redeem, a cancel, a complete or a lookup.
type dop struct {
	name    string // "decide", "redeem", "cancel", "complete", "lookup", "wait"
	who     ledger.Approver
	approve bool
	want    error
	state   ledger.State // of the record returned; none: no record
	decided []string     // the approvers whose decisions the record holds, in order; "-" marks a decline
}

func approve(p ledger.Approver, want error, st ledger.State, decided ...string) dop {
	return dop{name: "decide", who: p, approve: true, want: want, state: st, decided: decided}
}
func decline(p ledger.Approver, want error, st ledger.State, decided ...string) dop {
	return dop{name: "decide", who: p, want: want, state: st, decided: decided}
}
func redeemOOB(want error, st ledger.State, decided ...string) dop {
	return dop{name: "redeem", want: want, state: st, decided: decided}
}
func cancelOOB(want error, st ledger.State, decided ...string) dop {
	return dop{name: "cancel", want: want, state: st, decided: decided}
}
func lookup(st ledger.State, decided ...string) dop {
	return dop{name: "lookup", state: st, decided: decided}
}

// Approvals checks out-of-band approval on one confirmation at a time:
// each answer, the record that comes with it (its Approval, question
// included, its decisions in order, each at a time on the store's clock),
// and that a refused call changes nothing.
func Approvals(t *testing.T, f Factory) {
	ctx := context.Background()
	var (
		Pending, Acting, Done, Cancelled = ledger.Pending, ledger.Acting, ledger.Done, ledger.Cancelled
		decided, self, notApprover       = ledger.ErrDecided, ledger.ErrSelfApproval, ledger.ErrNotApprover
		awaiting, declined               = ledger.ErrAwaitingApproval, ledger.ErrDeclined
		a, b, c                          = alice.ID, bob.ID, carol.ID
	)
	done := dop{name: "complete"}
	tests := []struct {
		name      string
		make      func(TB) ledger.Confirmation
		required  int
		requester string
		ops       []dop
	}{
		{"approved, redeemed, done", Fresh, 1, "", []dop{lookup(Pending), redeemOOB(awaiting, Pending),
			approve(alice, nil, Pending, a), lookup(Pending, a), redeemOOB(nil, Acting, a), approve(carol, decided, Acting, a),
			decline(alice, decided, Acting, a), done, redeemOOB(ledger.ErrDone, Done, a), lookup(Done, a)}},
		{"approved through a group", Fresh, 1, "", []dop{approve(carol, nil, Pending, c), redeemOOB(nil, Acting, c)}},
		{"declined", Fresh, 1, "", []dop{decline(bob, nil, Cancelled, "-"+b), redeemOOB(declined, Cancelled, "-"+b),
			cancelOOB(declined, Cancelled, "-"+b), approve(alice, decided, Cancelled, "-"+b), decline(bob, decided, Cancelled, "-"+b),
			lookup(Cancelled, "-"+b)}},
		{"self-approval refused", Fresh, 1, b, []dop{approve(bob, self, none), decline(bob, self, none),
			redeemOOB(awaiting, Pending), approve(alice, nil, Pending, a), redeemOOB(nil, Acting, a)}},
		{"the requester listed by ID", Fresh, 1, a, []dop{approve(alice, self, none), approve(carol, nil, Pending, c)}},
		{"unlisted approver refused", Fresh, 1, "", []dop{approve(mallory, notApprover, none), decline(mallory, notApprover, none),
			redeemOOB(awaiting, Pending), lookup(Pending)}},
		{"two distinct approvals", Fresh, 2, a, []dop{approve(alice, self, none), approve(bob, nil, Pending, b),
			approve(bob, decided, Pending, b), decline(bob, decided, Pending, b), redeemOOB(awaiting, Pending, b),
			approve(mallory, notApprover, none), approve(carol, nil, Pending, b, c), redeemOOB(nil, Acting, b, c),
			approve(alice, self, none)}},
		{"a decline after one approval of two", Fresh, 2, "", []dop{approve(alice, nil, Pending, a),
			decline(carol, nil, Cancelled, a, "-"+c), approve(bob, decided, Cancelled, a, "-"+c), redeemOOB(declined, Cancelled, a, "-"+c)}},
		{"withdrawn by the client", Fresh, 1, "", []dop{cancelOOB(nil, Cancelled), approve(alice, ledger.ErrCancelled, Cancelled),
			redeemOOB(ledger.ErrCancelled, none), lookup(Cancelled)}},
		{"withdrawn after approval", Fresh, 1, "", []dop{approve(alice, nil, Pending, a), cancelOOB(nil, Cancelled, a),
			redeemOOB(ledger.ErrCancelled, none), approve(carol, decided, Cancelled, a)}},
		{"expired", Expired, 1, "", []dop{approve(alice, ledger.ErrExpired, Pending), redeemOOB(ledger.ErrExpired, none),
			lookup(Pending)}},
		{"in band", Fresh, 0, "", []dop{approve(alice, ledger.ErrInBand, none), redeemOOB(nil, Acting), approve(alice, ledger.ErrInBand, none)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := f.New(t)
			conf := tt.make(t)
			if tt.required > 0 {
				conf = OutOfBand(conf, tt.required, tt.requester)
			}
			add(t, s, conf)
			for i, o := range tt.ops {
				var rec ledger.Record
				var err error
				before := time.Now()
				switch o.name {
				case "decide":
					rec, err = s.Decide(ctx, conf.ID, o.who, o.approve)
				case "redeem":
					rec, err = s.Spend(ctx, conf.ID, ledger.Acting, Long)
				case "cancel":
					rec, err = s.Spend(ctx, conf.ID, ledger.Cancelled, 0)
				case "complete":
					if err := s.Complete(ctx, conf.ID, outcome(ledger.OutcomeDone)); err != nil {
						t.Fatalf("op %d: complete: %v", i, err)
					}
					continue
				case "lookup":
					rec, err = s.Lookup(ctx, conf.ID)
				}
				if !errors.Is(err, o.want) || ledger.ResultOf(err) != ledger.ResultOf(o.want) {
					t.Fatalf("op %d: %s %s = %v, want %v", i, o.name, o.who.ID, err, o.want)
				}
				if o.state == none {
					if rec.ID != (ledger.ID{}) && o.want != nil {
						t.Fatalf("op %d: %s %s = %v with the record %+v, want none", i, o.name, o.who.ID, err, rec)
					}
					continue
				}
				if !equal(rec.Confirmation, conf) || rec.State != o.state {
					t.Fatalf("op %d: %s returned %+v (approval %+v) in state %v, want %+v (approval %+v) in state %v",
						i, o.name, rec.Confirmation, rec.Approval, rec.State, conf, conf.Approval, o.state)
				}
				checkDecisions(t, i, o, rec.Decisions, before)
			}
		})
	}

	t.Run("invalid approval", func(t *testing.T) {
		s := f.New(t)
		for _, bad := range []ledger.Approval{
			{Required: 0, Approvers: []string{alice.ID}},
			{Required: 1},
			{Required: 1, Approvers: []string{""}},
			{Required: ledger.MaxRequired + 1, Approvers: []string{alice.ID}},
			{Required: 1, Approvers: []string{alice.ID}, Question: "\xff"},
		} {
			conf := Fresh(t)
			conf.Approval = &bad
			if err := s.Add(ctx, conf); ledger.ResultOf(err) != ledger.ResultError {
				t.Fatalf("Add with approval %+v = %v, want an error that is no ledger answer", bad, err)
			}
			if _, err := s.Lookup(ctx, conf.ID); !errors.Is(err, ledger.ErrUnknown) {
				t.Fatalf("Add with approval %+v stored it: Lookup = %v", bad, err)
			}
		}
	})

	t.Run("unknown", func(t *testing.T) {
		s := f.New(t)
		if _, err := s.Decide(ctx, NewID(t), alice, true); !errors.Is(err, ledger.ErrUnknown) {
			t.Fatalf("Decide of an unknown id = %v, want ErrUnknown", err)
		}
		if _, err := s.Lookup(ctx, NewID(t)); !errors.Is(err, ledger.ErrUnknown) {
			t.Fatalf("Lookup of an unknown id = %v, want ErrUnknown", err)
		}
	})

	t.Run("lookup in band", func(t *testing.T) {
		s := f.New(t)
		conf := Fresh(t)
		add(t, s, conf)
		if r, err := s.Lookup(ctx, conf.ID); err != nil || !equal(r.Confirmation, conf) || r.State != ledger.Pending {
			t.Fatalf("Lookup of a pending confirmation = %+v, %v", r, err)
		}
		if _, err := s.Spend(ctx, conf.ID, ledger.Acting, Short); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		if r, err := s.Lookup(ctx, conf.ID); err != nil || !equal(r.Confirmation, conf) || r.State != ledger.InDoubt {
			t.Fatalf("Lookup after the lease ended = %+v, %v; want in doubt", r, err)
		}
		if err := s.Complete(ctx, conf.ID, outcome(ledger.OutcomeDone)); !errors.Is(err, ledger.ErrInDoubt) {
			t.Fatalf("Complete after Lookup = %v, want ErrInDoubt", err)
		}
	})

	// Decisions are answered from the record after expiry, as redeemed
	// confirmations are: only a pending, undecided one expires.
	t.Run("decided, then expired", func(t *testing.T) {
		s := f.New(t)
		const ttl = 300 * time.Millisecond
		conf := OutOfBand(Fresh(t), 1, "")
		conf.Expires = time.Now().Add(ttl).Truncate(time.Millisecond)
		add(t, s, conf)
		if _, err := s.Decide(ctx, conf.ID, alice, true); err != nil {
			t.Fatalf("Decide: %v (a loaded machine took %v?)", err, ttl)
		}
		time.Sleep(time.Until(conf.Expires) + 10*time.Millisecond)
		if r, err := s.Decide(ctx, conf.ID, carol, false); !errors.Is(err, ledger.ErrDecided) || len(r.Decisions) != 1 {
			t.Fatalf("after expiry: Decide = %v with %+v, want ErrDecided with alice's approval", err, r.Decisions)
		}
		if _, err := s.Spend(ctx, conf.ID, ledger.Acting, Long); !errors.Is(err, ledger.ErrExpired) {
			t.Fatalf("after expiry: Redeem of an approved confirmation = %v, want ErrExpired", err)
		}
	})
}

// checkDecisions checks the decisions a record holds against what o
// wants, each recorded within a second of the test's clock around the
// call (the store's clock may differ a little: shared stores use their
// server's).
func checkDecisions(t *testing.T, i int, o dop, got []ledger.Decision, before time.Time) {
	t.Helper()
	ok := len(got) == len(o.decided)
	for j := 0; ok && j < len(got); j++ {
		want, yes := o.decided[j], true
		if want[0] == '-' {
			want, yes = want[1:], false
		}
		ok = got[j].Approver == want && got[j].Approve == yes && !got[j].At.IsZero() &&
			!got[j].At.After(time.Now().Add(time.Second))
	}
	if !ok {
		t.Fatalf("op %d: %s %s returned the decisions %+v, want %q", i, o.name, o.who.ID, got, o.decided)
	}
	if n := len(got); n > 0 && o.name == "decide" && o.want == nil && got[n-1].At.Before(before.Add(-time.Second)) {
		t.Fatalf("op %d: decision recorded at %v, before the call at %v", i, got[n-1].At, before)
	}
}

// ConcurrentDecide races approvers deciding one confirmation, through
// every handle: with one approval needed, exactly one decision is
// recorded, whoever else approves or declines; the same approver racing
// itself is recorded once; and every refusal is ErrDecided, with a record
// of the one decision.
func ConcurrentDecide(t *testing.T, f Factory) {
	const racers = 24
	ctx := context.Background()
	s := f.New(t)
	stores := []ledger.Store{s}
	if f.Replica != nil {
		stores = append(stores, f.Replica(t, s))
	}
	distinct := func(r int) ledger.Approver { return []ledger.Approver{alice, bob, carol}[r%3] }
	for _, tc := range []struct {
		name    string
		who     func(r int) ledger.Approver
		approve func(r int) bool
	}{
		{"distinct approvers approve", distinct, func(int) bool { return true }},
		{"distinct approvers approve and decline", distinct, func(r int) bool { return r%2 == 0 }},
		{"one approver approves and declines", func(int) ledger.Approver { return carol }, func(r int) bool { return r%2 == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := OutOfBand(Fresh(t), 1, "")
			add(t, s, conf)
			recs, errs := make([]ledger.Record, racers), make([]error, racers)
			var wg sync.WaitGroup
			for r := range racers {
				wg.Go(func() { recs[r], errs[r] = stores[r%len(stores)].Decide(ctx, conf.ID, tc.who(r), tc.approve(r)) })
			}
			wg.Wait()
			winner := -1
			for r, err := range errs {
				switch {
				case err == nil && winner >= 0:
					t.Fatalf("racers %d and %d both recorded a decision: %+v, %+v", winner, r, recs[winner].Decisions, recs[r].Decisions)
				case err == nil:
					winner = r
				case !errors.Is(err, ledger.ErrDecided):
					t.Fatalf("racer %d: %v, want ErrDecided", r, err)
				}
			}
			if winner < 0 {
				t.Fatal("no decision recorded")
			}
			want := recs[winner].Decisions
			for r, rec := range recs {
				if !sameDecisions(rec.Decisions, want) || len(want) != 1 {
					t.Fatalf("racer %d was answered with %+v; the decision recorded is %+v", r, rec.Decisions, want)
				}
			}
			rec, err := s.Lookup(ctx, conf.ID)
			if err != nil || !sameDecisions(rec.Decisions, want) {
				t.Fatalf("Lookup after the race = %+v, %v; want the decisions %+v", rec.Decisions, err, want)
			}
		})
	}
}
