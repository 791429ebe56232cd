package ledgertest

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// AuditFactory makes stores that keep an audit trail (package audit), for
// [AuditTrail], [AuditChainTamper] and [AuditAtomic].
type AuditFactory struct {
	// New returns a new, empty store keeping a trail of its own, and the
	// trail. It registers its own cleanup.
	New func(t testing.TB) (ledger.Store, audit.Trail)
	// Rewrite replaces every record of the trail with lines, in order:
	// what whoever can write the store can do (an edit, a deletion, a
	// reordering, a truncation).
	Rewrite func(t testing.TB, tr audit.Trail, lines [][]byte)
	// NewFaulty returns a new, empty store keeping a trail, and crash: while
	// crash(true) is in force, every audited transition whose record has
	// been written fails before it commits (a crash between the record
	// and the transition).
	NewFaulty func(t testing.TB) (s ledger.Store, tr audit.Trail, crash func(on bool))
}

// RunAudit runs every audit check against the stores f makes.
func RunAudit(t *testing.T, f AuditFactory) {
	t.Run("Trail", func(t *testing.T) { AuditTrail(t, f) })
	t.Run("ChainTamper", func(t *testing.T) { AuditChainTamper(t, f) })
	t.Run("Atomic", func(t *testing.T) { AuditAtomic(t, f) })
}

// auditStep is one call of the scripted run and the record it must leave.
type auditStep struct {
	kind   audit.Kind
	result string
}

// auditScript runs, on l, a question redeemed and done, its replay, a
// question declined and its replay, one whose outcome is unknown, and one
// approved out of band; it returns the records the trail must hold, in
// order.
func auditScript(t testing.TB, s ledger.Store) []auditStep {
	t.Helper()
	l, err := ledger.New(s, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	call := func(answer string) context.Context {
		return audit.WithCall(bg, audit.Call{Principal: "alice", Tool: "delete_file", ArgsDigest: "sha256:1f", Answer: answer,
			Question: "Delete «a.txt»?"})
	}
	must := func(err error, want error) {
		t.Helper()
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Fatalf("got %v, want %v", err, want)
		}
	}
	c := ledger.Confirmation{Tool: "delete_file", ArgsDigest: "sha256:1f", Principal: "alice"}
	a, err := l.Issue(call(""), c)
	must(err, nil)
	_, err = l.Redeem(call("accept"), a.ID)
	must(err, nil)
	must(l.Complete(call(""), a.ID, ledger.OutcomeDone, []byte(`{"ok":true}`)), nil)
	_, err = l.Redeem(call("accept"), a.ID)
	must(err, ledger.ErrDone)
	b, err := l.Issue(call(""), c)
	must(err, nil)
	_, err = l.Cancel(call("decline"), b.ID)
	must(err, nil)
	_, err = l.Redeem(call("accept"), b.ID)
	must(err, ledger.ErrCancelled)
	d, err := l.Issue(call(""), c)
	must(err, nil)
	_, err = l.Redeem(call("accept"), d.ID)
	must(err, nil)
	must(l.Complete(call(""), d.ID, ledger.OutcomeUnknown, nil), nil)
	o := OutOfBand(c, 1, "sub:alice")
	e, err := l.Issue(call(""), o)
	must(err, nil)
	_, err = l.Redeem(call("accept"), e.ID)
	must(err, ledger.ErrAwaitingApproval) // no record: a poll
	_, err = l.Decide(bg, e.ID, alice, true)
	must(err, nil)
	_, err = l.Redeem(call("accept"), e.ID)
	must(err, nil)
	return []auditStep{
		{audit.Asked, "ok"}, {audit.Redeemed, "ok"}, {audit.Outcome, "ok"}, {audit.Refused, "done"},
		{audit.Asked, "ok"}, {audit.Cancelled, "ok"}, {audit.Refused, "cancelled"},
		{audit.Asked, "ok"}, {audit.Redeemed, "ok"}, {audit.InDoubt, "ok"},
		{audit.Asked, "ok"}, {audit.Decided, "ok"}, {audit.Redeemed, "ok"},
	}
}

// lines returns the trail's records.
func lines(t testing.TB, tr audit.Trail) [][]byte {
	t.Helper()
	var out [][]byte
	for line, err := range tr.Records(context.Background(), 1) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, slices.Clone(line))
	}
	return out
}

// AuditTrail runs the scripted calls and checks the trail holds one
// record per call, of the kind and result the call had, with what the
// caller passed in its audit.Call, and verifies.
func AuditTrail(t *testing.T, f AuditFactory) {
	s, tr := f.New(t)
	want := auditScript(t, s)
	got := lines(t, tr)
	if len(got) != len(want) {
		t.Fatalf("the trail holds %d records, want %d:\n%s", len(got), len(want), joinLines(got))
	}
	for i, line := range got {
		r, err := audit.Parse(line)
		if err != nil {
			t.Fatalf("record %d: %v", i+1, err)
		}
		if r.Kind() != want[i].kind || r.Result != want[i].result || r.Seq != uint64(i+1) {
			t.Errorf("record %d is %s %s (seq %d), want %s %s:\n%s", i+1, r.Kind(), r.Result, r.Seq, want[i].kind, want[i].result, line)
		}
		switch r.Kind() {
		case audit.Asked:
			if r.Question == "" || r.Deadline == 0 || r.Principal != "alice" || r.Tool != "delete_file" || r.ArgsDigest != "sha256:1f" {
				t.Errorf("record %d, a question, lacks its question, deadline or binding: %s", i+1, line)
			}
		case audit.Decided:
			if r.Approver != alice.ID || r.Decision != "approve" {
				t.Errorf("record %d, a decision, does not name its approver: %s", i+1, line)
			}
		case audit.Redeemed, audit.Refused:
			if r.Answer != "accept" || r.Principal != "alice" {
				t.Errorf("record %d lacks the answer or the caller: %s", i+1, line)
			}
		}
	}
	if _, err := audit.Verify(tr.Records(context.Background(), 1), nil, audit.VerifyOptions{}); err != nil {
		t.Fatalf("an untampered trail does not verify: %v", err)
	}
	seq, head, err := tr.Head(context.Background())
	if err != nil || seq != uint64(len(want)) {
		t.Fatalf("Head: %d, %v; want %d", seq, err, len(want))
	}
	if r, _ := audit.Parse(got[len(got)-1]); r.Sum() != head {
		t.Fatal("Head's hash is not the last record's")
	}
}

func joinLines(ls [][]byte) string {
	var b strings.Builder
	for _, l := range ls {
		b.Write(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// AuditChainTamper edits, deletes, reorders and truncates the records of
// a trail, as whoever can write the store could, and checks that
// audit.Verify, given the checkpoint signed before, names the first
// record changed; the untampered trail verifies (the negative control),
// before and after each case.
func AuditChainTamper(t *testing.T, f AuditFactory) {
	s, tr := f.New(t)
	auditScript(t, s)
	ctx := context.Background()
	pub, key, _ := ed25519.GenerateKey(nil)
	cp, ok, err := audit.SignHead(ctx, tr, key, "ns", 0, time.Now())
	if err != nil || !ok {
		t.Fatalf("SignHead: %v, %v", ok, err)
	}
	orig := lines(t, tr)
	n := uint64(len(orig))
	if cp.Seq != n {
		t.Fatalf("the checkpoint signs record %d of %d", cp.Seq, n)
	}
	verify := func() (audit.Summary, error) {
		cps, err := tr.Checkpoints(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return audit.Verify(tr.Records(ctx, 1), cps, audit.VerifyOptions{Key: pub, Namespace: "ns"})
	}
	edit := func(i int, change func(*audit.Record)) [][]byte {
		ls := slices.Clone(orig)
		r, err := audit.Parse(ls[i-1])
		if err != nil {
			t.Fatal(err)
		}
		change(&r)
		ls[i-1] = r.Canonical()
		return ls
	}
	cases := []struct {
		name    string
		lines   [][]byte
		seq     uint64
		problem audit.Problem
	}{
		{"edit a principal", edit(5, func(r *audit.Record) { r.Principal = "mallory" }), 5, audit.Edited},
		{"edit the answer", edit(2, func(r *audit.Record) { r.Answer = "decline" }), 2, audit.Edited},
		{"edit the last record", edit(int(n), func(r *audit.Record) { r.Result = "cancelled" }), n, audit.Edited},
		{"edit the first record's prev", edit(1, func(r *audit.Record) { r.Prev[0] = 1 }), 1, audit.Edited},
		{"edit its spelling", func() [][]byte {
			ls := slices.Clone(orig)
			ls[6] = []byte(strings.Replace(string(ls[6]), `"op":`, `"op": `, 1))
			return ls
		}(), 7, audit.Edited},
		{"delete", slices.Delete(slices.Clone(orig), 4, 5), 5, audit.Deleted},
		{"delete the first", slices.Clone(orig)[1:], 1, audit.Deleted},
		{"reorder", func() [][]byte {
			ls := slices.Clone(orig)
			ls[4], ls[5] = ls[5], ls[4]
			return ls
		}(), 5, audit.Reordered},
		{"truncate", slices.Clone(orig)[:9], 10, audit.Truncated},
		{"truncate to nothing", nil, 1, audit.Truncated},
	}
	if sum, err := verify(); err != nil || sum.Records != n || sum.Checkpoint != n {
		t.Fatalf("the untampered trail: %+v, %v; want %d records, checkpoint at %d", sum, err, n, n)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f.Rewrite(t, tr, c.lines)
			_, err := verify()
			var b *audit.Break
			if !errors.As(err, &b) || b.Seq != c.seq || b.Problem != c.problem {
				t.Errorf("verify: %v; want record %d %s", err, c.seq, c.problem)
			}
			f.Rewrite(t, tr, orig)
			if _, err := verify(); err != nil {
				t.Fatalf("restored: %v", err)
			}
		})
	}
}

// AuditAtomic injects a crash between each kind of transition's record
// and its commit, and checks that neither took effect (the record is not
// in the trail, the ledger unchanged); then, without the crash, that both
// did.
func AuditAtomic(t *testing.T, f AuditFactory) {
	s, tr, crash := f.NewFaulty(t)
	ctx := audit.WithCall(context.Background(), audit.Call{Principal: "alice", Tool: "delete_file", Answer: "accept"})
	c := Fresh(t)
	o := OutOfBand(Fresh(t), 1, "")
	steps := []struct {
		name string
		do   func() error
		// state is the confirmation's state after the step; before it,
		// the state of the step before.
		id    ledger.ID
		state ledger.State
	}{
		{"issue", func() error { return s.Add(ctx, c) }, c.ID, ledger.Pending},
		{"redeem", func() error { _, err := s.Spend(ctx, c.ID, ledger.Acting, Long); return err }, c.ID, ledger.Acting},
		{"complete", func() error {
			return s.Complete(ctx, c.ID, ledger.Outcome{Kind: ledger.OutcomeDone, Result: []byte("r"), Size: 1})
		}, c.ID, ledger.Done},
		{"issue out of band", func() error { return s.Add(ctx, o) }, o.ID, ledger.Pending},
		{"decide", func() error { _, err := s.Decide(ctx, o.ID, alice, true); return err }, o.ID, ledger.Pending},
		{"cancel", func() error { _, err := s.Spend(ctx, o.ID, ledger.Cancelled, 0); return err }, o.ID, ledger.Cancelled},
	}
	state := func(id ledger.ID) (ledger.State, int) {
		r, err := s.Lookup(context.Background(), id)
		if errors.Is(err, ledger.ErrUnknown) {
			return none, 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return r.State, len(r.Decisions)
	}
	for _, st := range steps {
		seq, head, err := tr.Head(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		before, decisions := state(st.id)
		crash(true)
		if err := st.do(); err == nil {
			t.Fatalf("%s: succeeded through an injected crash", st.name)
		}
		crash(false)
		after, d := state(st.id)
		s2, h2, err := tr.Head(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if after != before || d != decisions {
			t.Errorf("%s: crashed between record and commit, the ledger moved from %v to %v (%d→%d decisions)", st.name, before, after, decisions, d)
		}
		if s2 != seq || h2 != head || uint64(len(lines(t, tr))) != seq {
			t.Errorf("%s: crashed between record and commit, the trail moved from record %d to %d", st.name, seq, s2)
		}
		if err := st.do(); err != nil {
			t.Fatalf("%s, without the crash: %v", st.name, err)
		}
		if got, _ := state(st.id); got != st.state {
			t.Errorf("%s: state %v, want %v", st.name, got, st.state)
		}
		s3, _, _ := tr.Head(context.Background())
		ls := lines(t, tr)
		if s3 != seq+1 || uint64(len(ls)) != seq+1 {
			t.Fatalf("%s: the trail went from %d to %d records (head %d), want one more", st.name, seq, len(ls), s3)
		}
		if r, err := audit.Parse(ls[len(ls)-1]); err != nil || r.Op != audit.Op(strings.Fields(st.name)[0]) || r.Result != "ok" {
			t.Errorf("%s: the new record is %s (%v)", st.name, ls[len(ls)-1], err)
		}
	}
	if _, err := audit.Verify(tr.Records(context.Background(), 1), nil, audit.VerifyOptions{}); err != nil {
		t.Fatal(fmt.Errorf("after the crashes the trail does not verify: %w", err))
	}
}
