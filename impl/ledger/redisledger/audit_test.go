package redisledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/ledgertest"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/redisledger"
)

// auditFactory makes audited stores, each in a namespace of its own.
func auditFactory(t *testing.T) ledgertest.AuditFactory {
	c := newClient(t)
	return ledgertest.AuditFactory{
		New: func(t testing.TB) (ledger.Store, audit.Trail) {
			s := newStore(t, c, redisledger.Options{Namespace: namespace(t, c), Audit: true})
			return s, s
		},
		Rewrite: func(t testing.TB, tr audit.Trail, lines [][]byte) {
			rewrite(t, c, tr.(*redisledger.Store), lines)
		},
		NewFaulty: func(t testing.TB) (ledger.Store, audit.Trail, func(bool)) {
			s := newStore(t, c, redisledger.Options{Namespace: namespace(t, c), Audit: true})
			var crash atomic.Bool
			redisledger.SetAuditFault(s, func() error {
				if crash.Load() {
					return errors.New("injected crash")
				}
				return nil
			})
			return s, s, crash.Store
		},
	}
}

// rewrite replaces the records of s's trail with lines, as whoever can
// write to the Redis server can.
func rewrite(t testing.TB, c *redis.Client, s *redisledger.Store, lines [][]byte) {
	t.Helper()
	ctx := context.Background()
	key := redisledger.AuditLogKey(s)
	pipe := c.TxPipeline()
	pipe.Del(ctx, key)
	for _, l := range lines {
		pipe.RPush(ctx, key, l)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestAuditTrail(t *testing.T) { ledgertest.AuditTrail(t, auditFactory(t)) }

func TestAuditChainTamper(t *testing.T) { ledgertest.AuditChainTamper(t, auditFactory(t)) }

// TestAuditAtomicWithLedger fails each audited script after its record is
// sealed and before its first write — the latest point a failure can
// strike and leave neither, since Redis does not roll back a script's
// writes — and checks that neither the transition nor the record is there.
func TestAuditAtomicWithLedger(t *testing.T) { ledgertest.AuditAtomic(t, auditFactory(t)) }

// TestAuditedStore runs the store suite, two replicas included, on
// audited stores: the trail changes none of the answers.
func TestAuditedStore(t *testing.T) {
	a, b := newClient(t), newClient(t)
	ledgertest.Conformance(t, ledgertest.Namespaced(
		func(t testing.TB) (ledger.Store, string) {
			ns := namespace(t, a)
			return newStore(t, a, redisledger.Options{Namespace: ns, Audit: true}), ns
		},
		func(t testing.TB, ns string) ledger.Store {
			return newStore(t, b, redisledger.Options{Namespace: ns, Audit: true})
		},
	))
}

// auditedCall is one call on an audited store and what it answered.
type auditedCall struct {
	name string
	op   audit.Op
	do   func(ctx context.Context) error
}

// TestAuditRecordsEveryAnswer makes every answer each script can give,
// and checks that each call left one record whose result is the word of
// its answer (ledger.ResultOf), or none where audit.Recorded says so (an
// Issue refused, a poll awaiting approval) and for a retry of a call
// already recorded: the scripts decide the result in Lua, and must agree
// with Go.
func TestAuditRecordsEveryAnswer(t *testing.T) {
	c := newClient(t)
	ns := namespace(t, c)
	s := newStore(t, c, redisledger.Options{Namespace: ns, Audit: true})
	// One more store of the namespace, whose principals hold one question each.
	capped := newStore(t, c, redisledger.Options{Namespace: ns, Audit: true, MaxPendingPerPrincipal: 1})
	alice := ledger.Approver{ID: "oidc:alice"}
	bob := ledger.Approver{ID: "oidc:bob"}
	fresh := func() ledger.Confirmation { return ledgertest.Fresh(t) }
	oob := func(requester string) ledger.Confirmation {
		o := fresh()
		o.Approval = &ledger.Approval{Required: 1, Approvers: []string{alice.ID, bob.ID}, Requester: requester, Question: "Delete «a»?"}
		return o
	}
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	add := func(c ledger.Confirmation) ledger.ID { must(s.Add(ctx, c)); return c.ID }
	spend := func(id ledger.ID, to ledger.State, lease time.Duration) func(context.Context) error {
		return func(ctx context.Context) error { _, err := s.Spend(ctx, id, to, lease); return err }
	}
	complete := func(id ledger.ID, k ledger.OutcomeKind) func(context.Context) error {
		return func(ctx context.Context) error { return s.Complete(ctx, id, ledger.Outcome{Kind: k}) }
	}
	decide := func(id ledger.ID, p ledger.Approver, approve bool) func(context.Context) error {
		return func(ctx context.Context) error { _, err := s.Decide(ctx, id, p, approve); return err }
	}
	var (
		done     = add(fresh())
		acting   = add(fresh())
		ended    = add(fresh())
		failed   = add(fresh())
		expired  = fresh()
		declined = add(oob(""))
		approved = add(oob(""))
		waiting  = add(oob("oidc:carol"))
		inBand   = add(fresh())
	)
	expired.Expires = time.Now().Add(-time.Second)
	add(expired)
	must(spend(done, ledger.Acting, time.Hour)(ctx))
	must(complete(done, ledger.OutcomeDone)(ctx))
	must(spend(acting, ledger.Acting, time.Hour)(ctx))
	must(spend(ended, ledger.Acting, time.Microsecond)(ctx))
	must(spend(failed, ledger.Acting, time.Hour)(ctx))
	must(complete(failed, ledger.OutcomeFailed)(ctx))
	must(decide(declined, alice, false)(ctx))
	must(decide(approved, alice, true)(ctx))
	cancelled := add(fresh())
	must(spend(cancelled, ledger.Cancelled, 0)(ctx))
	unknown := ledgertest.NewID(t)
	full := fresh()
	full.Principal = "full"
	add(full)
	full = fresh()
	full.Principal = "full"

	calls := []auditedCall{
		{"issue", audit.OpIssue, func(ctx context.Context) error { return s.Add(ctx, fresh()) }},
		{"issue exists", audit.OpIssue, func(ctx context.Context) error {
			return s.Add(ctx, ledger.Confirmation{ID: done, Expires: time.Now().Add(time.Hour)})
		}},
		{"issue full", audit.OpIssue, func(ctx context.Context) error { return capped.Add(ctx, full) }},
		{"redeem unknown", audit.OpRedeem, spend(unknown, ledger.Acting, time.Hour)},
		{"redeem expired", audit.OpRedeem, spend(expired.ID, ledger.Acting, time.Hour)},
		{"redeem done", audit.OpRedeem, spend(done, ledger.Acting, time.Hour)},
		{"redeem failed", audit.OpRedeem, spend(failed, ledger.Acting, time.Hour)},
		{"redeem in progress", audit.OpRedeem, spend(acting, ledger.Acting, time.Hour)},
		{"redeem, lease ended", audit.OpRedeem, spend(ended, ledger.Acting, time.Hour)},
		{"redeem cancelled", audit.OpRedeem, spend(cancelled, ledger.Acting, time.Hour)},
		{"redeem declined", audit.OpRedeem, spend(declined, ledger.Acting, time.Hour)},
		{"redeem awaiting approval", audit.OpRedeem, spend(waiting, ledger.Acting, time.Hour)},
		{"cancel done", audit.OpCancel, spend(done, ledger.Cancelled, 0)},
		{"complete unknown", audit.OpComplete, complete(unknown, ledger.OutcomeDone)},
		{"complete expired", audit.OpComplete, complete(expired.ID, ledger.OutcomeDone)},
		{"complete pending", audit.OpComplete, complete(inBand, ledger.OutcomeDone)},
		{"complete done", audit.OpComplete, complete(done, ledger.OutcomeDone)},
		{"complete in doubt", audit.OpComplete, complete(ended, ledger.OutcomeDone)},
		{"complete cancelled", audit.OpComplete, complete(cancelled, ledger.OutcomeDone)},
		{"complete declined", audit.OpComplete, complete(declined, ledger.OutcomeDone)},
		{"decide unknown", audit.OpDecide, decide(unknown, alice, true)},
		{"decide in band", audit.OpDecide, decide(inBand, alice, true)},
		{"decide, not an approver", audit.OpDecide, decide(waiting, ledger.Approver{ID: "oidc:mallory"}, true)},
		{"decide, self-approval", audit.OpDecide, decide(waiting, ledger.Approver{ID: "oidc:carol"}, true)},
		{"decide, decided", audit.OpDecide, decide(approved, bob, true)},
		{"decide, declined", audit.OpDecide, decide(declined, bob, true)},
		{"decide", audit.OpDecide, decide(waiting, alice, true)},
		{"redeem approved", audit.OpRedeem, spend(waiting, ledger.Acting, time.Hour)},
		{"decide, redeemed", audit.OpDecide, decide(waiting, bob, true)},
		{"complete", audit.OpComplete, complete(waiting, ledger.OutcomeUnknown)},
		{"cancel", audit.OpCancel, spend(inBand, ledger.Cancelled, 0)},
	}
	seen := map[ledger.Result]bool{}
	for _, call := range calls {
		seq, _, err := s.Head(ctx)
		must(err)
		callCtx := audit.WithCall(ctx, audit.Call{Principal: "alice", Tool: "delete_file", ArgsDigest: "sha256:1f", Answer: "accept"})
		res := ledger.ResultOf(call.do(callCtx))
		seen[res] = true
		after, head, err := s.Head(ctx)
		must(err)
		if !audit.Recorded(call.op, string(res)) {
			if after != seq {
				t.Errorf("%s: answered %s, which is not recorded, and the trail grew from %d to %d records", call.name, res, seq, after)
			}
			continue
		}
		if after != seq+1 {
			t.Errorf("%s: answered %s, and the trail went from %d to %d records, want one more", call.name, res, seq, after)
			continue
		}
		var last []byte
		for l, err := range s.Records(ctx, after) {
			must(err)
			last = l
		}
		r, err := audit.Parse(last)
		if err != nil {
			t.Fatalf("%s: %v: %s", call.name, err, last)
		}
		if r.Op != call.op || r.Result != string(res) || r.Seq != after || r.Sum() != head {
			t.Errorf("%s: answered %s (op %s, record %d), recorded %s", call.name, res, call.op, after, last)
		}
		// The time is Redis's clock in microseconds (this machine's).
		if d := time.Since(time.UnixMicro(r.Time)); d < -time.Minute || d > time.Minute {
			t.Errorf("%s: recorded at %v, %v from now", call.name, time.UnixMicro(r.Time), d)
		}
	}
	// Every answer the scripts can give was given (a guard on the table).
	for _, want := range []ledger.Result{ledger.ResultOK, ledger.ResultExists, ledger.ResultFull, ledger.ResultUnknown,
		ledger.ResultExpired, ledger.ResultDone, ledger.ResultInProgress, ledger.ResultInDoubt, ledger.ResultCancelled,
		ledger.ResultDeclined, ledger.ResultAwaiting, ledger.ResultNotActing, ledger.ResultInBand, ledger.ResultNotApprover,
		ledger.ResultSelfApproval, ledger.ResultDecided} {
		if !seen[want] {
			t.Errorf("no call was answered %s", want)
		}
	}
	if _, err := audit.Verify(s.Records(ctx, 1), nil, audit.VerifyOptions{}); err != nil {
		t.Fatalf("the trail does not verify: %v", err)
	}
}

// TestAuditCorruptTrailChangesNothing breaks the trail's keys, as a
// foreign writer could, and checks that every audited call then fails
// with neither its transition nor a record: each script checks the trail
// before its first write.
func TestAuditCorruptTrailChangesNothing(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	for _, breakIt := range []struct {
		name string
		do   func(ns string) error
	}{
		{"head not a head", func(ns string) error { return c.Set(ctx, ns+"a1:head", "not a head", 0).Err() }},
		{"head's hash not hex", func(ns string) error {
			return c.Set(ctx, ns+"a1:head", fmt.Sprintf("%064s:3", "x"), 0).Err()
		}},
		{"head a list", func(ns string) error {
			if err := c.Del(ctx, ns+"a1:head").Err(); err != nil {
				return err
			}
			return c.RPush(ctx, ns+"a1:head", "x").Err()
		}},
		{"log a string", func(ns string) error { return c.Set(ctx, ns+"a1:log", "x", 0).Err() }},
	} {
		t.Run(breakIt.name, func(t *testing.T) {
			ns := namespace(t, c)
			s := newStore(t, c, redisledger.Options{Namespace: ns, Audit: true})
			plain := newStore(t, c, redisledger.Options{Namespace: ns})
			o := ledgertest.OutOfBand(ledgertest.Fresh(t), 1, "")
			spent := ledgertest.Fresh(t)
			for _, conf := range []ledger.Confirmation{o, spent} {
				if err := s.Add(ctx, conf); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Spend(ctx, spent.ID, ledger.Acting, time.Hour); err != nil {
				t.Fatal(err)
			}
			keys := func() string {
				ks, err := c.Keys(ctx, ns+"*").Result()
				if err != nil {
					t.Fatal(err)
				}
				var b []byte
				for _, k := range ks {
					v, _ := c.Dump(ctx, k).Result()
					b = fmt.Appendf(b, "%s=%x;", k, v)
				}
				return string(b)
			}
			if err := breakIt.do(ns); err != nil {
				t.Fatal(err)
			}
			before := keys()
			fresh := ledgertest.Fresh(t)
			for _, call := range []struct {
				name string
				op   audit.Op
				do   func() error
			}{
				{"add", audit.OpIssue, func() error { return s.Add(ctx, fresh) }},
				{"redeem, awaiting approval", audit.OpRedeem, func() error { _, err := s.Spend(ctx, o.ID, ledger.Acting, time.Hour); return err }},
				{"cancel", audit.OpCancel, func() error { _, err := s.Spend(ctx, o.ID, ledger.Cancelled, 0); return err }},
				{"replay", audit.OpRedeem, func() error { _, err := s.Spend(ctx, spent.ID, ledger.Acting, time.Hour); return err }},
				{"decide", audit.OpDecide, func() error {
					_, err := s.Decide(ctx, o.ID, ledger.Approver{ID: o.Approval.Approvers[0]}, true)
					return err
				}},
				{"decide, not an approver", audit.OpDecide, func() error { _, err := s.Decide(ctx, o.ID, ledger.Approver{ID: "mallory"}, true); return err }},
				{"complete", audit.OpComplete, func() error { return s.Complete(ctx, spent.ID, ledger.Outcome{Kind: ledger.OutcomeDone}) }},
				{"complete, not acting", audit.OpComplete, func() error { return s.Complete(ctx, o.ID, ledger.Outcome{Kind: ledger.OutcomeDone}) }},
			} {
				// An answer the trail does not record (awaiting approval)
				// needs no trail; every other is refused.
				err := call.do()
				if res := ledger.ResultOf(err); res != ledger.ResultError && audit.Recorded(call.op, string(res)) {
					t.Errorf("%s with the trail broken: %v, want an error that is no ledger answer", call.name, err)
				}
				if after := keys(); after != before {
					t.Errorf("%s with the trail broken changed the namespace:\nbefore %s\nafter  %s", call.name, before, after)
				}
			}
			// The control: the same calls through a store keeping no
			// trail change the namespace.
			if _, err := plain.Spend(ctx, o.ID, ledger.Cancelled, 0); err != nil {
				t.Fatal(err)
			}
			if keys() == before {
				t.Error("the control changed nothing either")
			}
		})
	}
}
