package redisledger

import (
	"context"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/ledgertest"
)

// TestAuditRetryRecordsOnce sends each audited script twice with the same
// nonce, as go-redis does after a reply lost to a dropped connection: the
// retry gets the first call's success back, and the trail holds one
// record of each transition, not two.
func TestAuditRetryRecordsOnce(t *testing.T) {
	ctx := context.Background()
	s, c := testStore(t, Options{Audit: true})
	conf := ledgertest.OutOfBand(ledgertest.Fresh(t), 1, "")
	deleteKeys(t, s, c, conf)
	t.Cleanup(func() { c.Del(context.Background(), s.decisionsKey(conf.ID), s.auditHead, s.auditLog) })
	v, err := encode(conf)
	if err != nil {
		t.Fatal(err)
	}
	entry, record, _ := s.keys(conf.ID)
	got, err := decode(conf.ID, string(v))
	if err != nil {
		t.Fatal(err)
	}
	decide, spend, complete := [nonceLen]byte{1}, [nonceLen]byte{2}, [nonceLen]byte{3}
	for _, call := range []struct {
		op audit.Op
		do func() error
	}{
		{audit.OpIssue, func() error { return s.add(ctx, conf, v) }},
		{audit.OpDecide, func() error {
			_, err := s.decide(ctx, conf.ID, got, string(v[:nonceLen]), "a:"+conf.Approval.Approvers[0], "+", decide, entry, record)
			return err
		}},
		{audit.OpRedeem, func() error { _, err := s.spend(ctx, conf.ID, ledger.Acting, time.Hour, spend); return err }},
		{audit.OpComplete, func() error { return s.complete(ctx, conf.ID, ledger.Outcome{Kind: ledger.OutcomeDone}, complete) }},
	} {
		for i := range 2 {
			if err := call.do(); err != nil {
				t.Fatalf("%s, try %d: %v", call.op, i+1, err)
			}
		}
	}
	var ops []audit.Op
	for line, err := range s.Records(ctx, 1) {
		if err != nil {
			t.Fatal(err)
		}
		r, err := audit.Parse(line)
		if err != nil || r.Result != "ok" {
			t.Fatalf("%s: %v", line, err)
		}
		ops = append(ops, r.Op)
	}
	if want := []audit.Op{audit.OpIssue, audit.OpDecide, audit.OpRedeem, audit.OpComplete}; len(ops) != len(want) || ops[0] != want[0] || ops[1] != want[1] || ops[2] != want[2] || ops[3] != want[3] {
		t.Fatalf("four calls, each sent twice, left records %v; want %v", ops, want)
	}
}
