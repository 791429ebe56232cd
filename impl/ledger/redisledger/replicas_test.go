package redisledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/ledgertest"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/redisledger"
	"github.com/mcp-confirm/mcp-confirm/internal/redistest"
)

// replicated starts a primary and a replica of it, on redis-servers of
// the test's own, and waits until the replica is connected and in sync:
// until a write is acknowledged (after a full sync, a primary streams
// writes to a replica only once the replica has acknowledged, up to a
// second later).
func replicated(t testing.TB) (primary, replica *redistest.Server) {
	t.Helper()
	primary = redistest.Start(t, "--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0")
	replica = redistest.Start(t, "--save", "", "--appendonly", "no", "--replicaof", "127.0.0.1", fmt.Sprint(primary.Port()))
	c := primary.Client()
	defer c.Close()
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if info, _ := c.Info(ctx, "replication").Result(); strings.Contains(info, "connected_slaves:1") && strings.Contains(info, ",state=online,") {
			pipe := c.Pipeline()
			pipe.Set(ctx, "replicated:probe", "", 0)
			acks := pipe.Do(ctx, "wait", 1, 100)
			_, _ = pipe.Exec(ctx)
			if n, err := acks.Int64(); err == nil && n == 1 {
				return primary, replica
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica did not connect")
		}
	}
}

// With replicas=1, every write is on the replica before the call returns:
// the confirmation's entry after Add, its record, acting, after Spend,
// and done after Complete. With the replica stalled (SIGSTOP: connected,
// silent), no write is acknowledged and each call fails closed with
// ErrNotReplicated — an error whose outcome is unknown, never a
// redemption to act on nor an answer — Spends, and retries answered from
// the record alike, even through a store whose own writes were all
// acknowledged (it must wait for what it read, too). The control: the same Spend through a store that does
// not WAIT succeeds while the replica is stalled, so nothing but WAIT made
// the others fail.
func TestReplicasAcknowledge(t *testing.T) {
	primary, replica := replicated(t)
	ctx := context.Background()
	rc := replica.Client()
	defer rc.Close()
	ns := redisledger.DefaultNamespace
	onReplica := func(prefix string, id ledger.ID) string {
		t.Helper()
		v, err := rc.Get(ctx, ns+prefix+id.String()).Result()
		if errors.Is(err, redis.Nil) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	const wait = 200 * time.Millisecond
	s, err := redisledger.Open(ctx, primary.URL()+"?replicas=1&wait="+wait.String(), redisledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CheckDurability(ctx); err != nil {
		t.Fatalf("a store that waits for its one replica: %v", err)
	}
	confs := make([]ledger.Confirmation, 3)
	for i := range confs {
		confs[i] = ledgertest.Fresh(t)
		if err := s.Add(ctx, confs[i]); err != nil {
			t.Fatal(err)
		}
		if onReplica("c4:", confs[i].ID) == "" {
			t.Fatalf("Add %d returned before the replica held the entry", i)
		}
	}
	a := confs[0].ID
	if _, err := s.Spend(ctx, a, ledger.Acting, time.Hour); err != nil {
		t.Fatal(err)
	}
	if r := onReplica("r4:", a); !strings.HasPrefix(r, "a") {
		t.Fatalf("Spend returned before the replica held the record (replica: %q)", r)
	}
	if err := s.Complete(ctx, a, ledger.Outcome{Kind: ledger.OutcomeDone, Result: []byte("ok"), Size: 2}); err != nil {
		t.Fatal(err)
	}
	if r := onReplica("r4:", a); !strings.HasPrefix(r, "d") {
		t.Fatalf("Complete returned before the replica held the outcome (replica: %q)", r)
	}

	// Another server replica's store, which has written nothing: its
	// connections' own writes are all acknowledged.
	other, err := redisledger.Open(ctx, primary.URL()+"?replicas=1&wait="+wait.String(), redisledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	replica.Pause()
	notReplicated := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, redisledger.ErrNotReplicated) || ledger.ResultOf(err) != ledger.ResultError || errors.Is(err, ledger.ErrSpent) {
			t.Fatalf("%s with the replica stalled: %v (result %v), want ErrNotReplicated, outcome unknown", what, err, ledger.ResultOf(err))
		}
	}
	_, err = s.Spend(ctx, confs[1].ID, ledger.Acting, time.Hour)
	notReplicated("Spend", err)
	_, err = other.Spend(ctx, a, ledger.Acting, time.Hour)
	notReplicated("a retry answered from the record, through a store that wrote nothing before", err)
	_, err = s.Spend(ctx, a, ledger.Acting, time.Hour)
	notReplicated("a retry answered from the record", err)
	notReplicated("Add", s.Add(ctx, ledgertest.Fresh(t)))

	control, err := redisledger.Open(ctx, primary.URL(), redisledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer control.Close()
	if _, err := control.Spend(ctx, confs[2].ID, ledger.Acting, time.Hour); err != nil {
		t.Fatalf("control: a store that does not WAIT, with the replica stalled: %v, want a redemption", err)
	}
	replica.Resume()
	if _, err := s.Spend(ctx, confs[1].ID, ledger.Acting, time.Hour); !errors.Is(err, ledger.ErrInProgress) {
		t.Fatalf("the replica back: the unacknowledged Spend's retry = %v, want ErrInProgress (it stays spent, and was never acted on)", err)
	}
}

// The start-up check accepts connected replicas only when each write
// waits for all of them, and refuses a store that waits for more than
// are connected (every write would fail).
func TestCheckDurabilityReplicas(t *testing.T) {
	primary, _ := replicated(t)
	ctx := context.Background()
	for _, tt := range []struct {
		query string
		want  string // "" for none
		risk  bool   // ErrNotDurable
	}{
		{"", "set replicas=1 in the URL", true},
		{"?replicas=1", "", false},
		{"?replicas=1&wait=50ms", "", false},
		{"?replicas=2", "waits for 2 replica(s) (Replicas), but 1 are connected", false},
	} {
		s, err := redisledger.Open(ctx, primary.URL()+tt.query, redisledger.Options{})
		if err != nil {
			t.Fatal(err)
		}
		err = s.CheckDurability(ctx)
		s.Close()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q: %v, want accepted", tt.query, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || errors.Is(err, redisledger.ErrNotDurable) != tt.risk):
			t.Errorf("%q: %v, want an error mentioning %q (ErrNotDurable: %v)", tt.query, err, tt.want, tt.risk)
		}
	}
}

// TestAuditReplicated checks that WAIT covers the audit trail: with
// replicas=1, an audited call answers only once the replica holds its
// record, since the record is written by the transition's own script;
// after each call the replica's trail is the primary's. With the replica
// stalled, a Decide refused in Go (its record written by a script of its
// own) fails closed too.
func TestAuditReplicated(t *testing.T) {
	primary, replica := replicated(t)
	ctx := context.Background()
	rc := replica.Client()
	defer rc.Close()
	s, err := redisledger.Open(ctx, primary.URL()+"?replicas=1&wait=200ms", redisledger.Options{Audit: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	onReplica := func() []string {
		t.Helper()
		l, err := rc.LRange(ctx, redisledger.AuditLogKey(s), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	conf := ledgertest.Fresh(t)
	o := ledgertest.OutOfBand(ledgertest.Fresh(t), 1, "")
	for i, call := range []func() error{
		func() error { return s.Add(ctx, conf) },
		func() error { _, err := s.Spend(ctx, conf.ID, ledger.Acting, time.Hour); return err },
		func() error { return s.Complete(ctx, conf.ID, ledger.Outcome{Kind: ledger.OutcomeDone}) },
		func() error { _, err := s.Spend(ctx, conf.ID, ledger.Acting, time.Hour); return err }, // a replay, refused
		func() error { return s.Add(ctx, o) },
		func() error { _, err := s.Decide(ctx, o.ID, ledger.Approver{ID: "mallory"}, true); return err }, // refused in Go
	} {
		if err := call(); ledger.ResultOf(err) == ledger.ResultError {
			t.Fatalf("call %d: %v", i+1, err)
		}
		seq, _, err := s.Head(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := onReplica(); uint64(len(got)) != seq || seq != uint64(i+1) {
			t.Fatalf("call %d returned with %d records on the primary, %d on the replica; want %d on both", i+1, seq, len(got), i+1)
		}
	}
	replica.Pause()
	defer replica.Resume()
	if _, err := s.Decide(ctx, o.ID, ledger.Approver{ID: "mallory"}, true); !errors.Is(err, redisledger.ErrNotReplicated) {
		t.Fatalf("a refused Decide with the replica stalled: %v, want ErrNotReplicated", err)
	}
}
