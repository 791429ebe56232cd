package pgledger_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/ledgertest"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/pgledger"
	"github.com/mcp-confirm/mcp-confirm/linearizability"
)

// TestClockReadUnderLock checks that each call decides on the database's
// clock as read once it holds its lock, not as its transaction began
// (now()): a call whose first message reaches the server before an
// instant (the confirmation's expiry, its lease's end) and the rest of it
// after — a pipeline split across two TCP segments, the second held up on
// the network — while another call, in between, is answered that the
// instant has passed, must be decided as after it too. Decided on now(),
// a Spend would spend a confirmation another call had been told was
// expired, a Complete record an outcome over an answer "in doubt" —
// porcupine finds both histories not linearizable, and the test checks
// them with porcupine — and an Add count against the caps a confirmation
// a Cancel had been told was expired (ErrFull).
//
// The held-up call goes through a pool whose connection forwards the
// first message of the call's pipeline (the Bind of the lock statement,
// with which PostgreSQL begins the transaction and fixes now()) and
// holds the rest until released. The instant is set from the database's
// clock a margin ahead; an attempt in which the first message reached
// the server only after it (a slow machine) is made again with twice the
// margin.
func TestClockReadUnderLock(t *testing.T) {
	// A call: t, its recorder client, the store, the confirmation.
	type call func(ctx context.Context, t *testing.T, c *linearizability.Client, s ledger.Store, id ledger.ID) error
	for _, tt := range []struct {
		name string
		opts pgledger.Options
		// prepare makes the confirmation, spent or not, with its instant
		// (expiry or the lease's end) margin from now on the database's
		// clock (read by clock), and returns bounds on that instant.
		prepare func(ctx context.Context, t *testing.T, c *linearizability.Client, s ledger.Store, id ledger.ID, clock func() time.Time, margin time.Duration) (from, to time.Time)
		// held is the held-up call; between is the call answered in
		// between, which must say the instant has passed.
		held, between       call
		wantHeld, wantAfter error // what each must answer
	}{
		{
			name: "Spend across the expiry",
			prepare: func(ctx context.Context, t *testing.T, c *linearizability.Client, s ledger.Store, id ledger.ID, clock func() time.Time, margin time.Duration) (time.Time, time.Time) {
				conf := ledgertest.Fresh(t)
				conf.ID, conf.Expires = id, clock().Add(margin).Round(0)
				if err := c.Issue(ctx, s, conf); err != nil {
					t.Fatal(err)
				}
				return conf.Expires, conf.Expires
			},
			held: func(ctx context.Context, _ *testing.T, c *linearizability.Client, s ledger.Store, id ledger.ID) error {
				_, err := c.Redeem(ctx, s, id, time.Hour)
				return err
			},
			between: func(ctx context.Context, _ *testing.T, c *linearizability.Client, s ledger.Store, id ledger.ID) error {
				_, err := c.Cancel(ctx, s, id)
				return err
			},
			wantHeld: ledger.ErrExpired, wantAfter: ledger.ErrExpired,
		},
		{
			name: "Complete across the lease's end",
			prepare: func(ctx context.Context, t *testing.T, c *linearizability.Client, s ledger.Store, id ledger.ID, clock func() time.Time, margin time.Duration) (time.Time, time.Time) {
				conf := ledgertest.Fresh(t)
				conf.ID, conf.Expires = id, time.Now().Add(time.Hour).Round(0)
				if err := c.Issue(ctx, s, conf); err != nil {
					t.Fatal(err)
				}
				from := clock().Add(margin)
				if _, err := c.Redeem(ctx, s, id, margin); err != nil {
					t.Fatal(err)
				}
				return from, clock().Add(margin) // the lease ends between the two
			},
			held: func(ctx context.Context, _ *testing.T, c *linearizability.Client, s ledger.Store, id ledger.ID) error {
				return c.Complete(ctx, s, id, ledger.OutcomeDone, 1)
			},
			between: func(ctx context.Context, _ *testing.T, c *linearizability.Client, s ledger.Store, id ledger.ID) error {
				_, err := c.Redeem(ctx, s, id, time.Hour)
				return err
			},
			wantHeld: ledger.ErrInDoubt, wantAfter: ledger.ErrInDoubt,
		},
		{
			// The caps count unexpired pending confirmations: an Add that
			// takes the namespace's lock after the only pending one has
			// expired, as a Cancel in between was told, has room.
			name: "Add across the expiry of the pending confirmation it would count",
			opts: pgledger.Options{MaxPending: 1},
			prepare: func(ctx context.Context, t *testing.T, c *linearizability.Client, s ledger.Store, id ledger.ID, clock func() time.Time, margin time.Duration) (time.Time, time.Time) {
				conf := ledgertest.Fresh(t)
				conf.ID, conf.Expires = id, clock().Add(margin).Round(0)
				if err := c.Issue(ctx, s, conf); err != nil {
					t.Fatal(err)
				}
				return conf.Expires, conf.Expires
			},
			held: func(ctx context.Context, t *testing.T, c *linearizability.Client, s ledger.Store, _ ledger.ID) error {
				conf := ledgertest.Fresh(t)
				conf.Expires = time.Now().Add(time.Hour).Round(0)
				return c.Issue(ctx, s, conf)
			},
			between: func(ctx context.Context, _ *testing.T, c *linearizability.Client, s ledger.Store, id ledger.ID) error {
				_, err := c.Cancel(ctx, s, id)
				return err
			},
			wantHeld: nil, wantAfter: ledger.ErrExpired,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			p := newPool(t)
			held, gate := splitPool(t)
			var pid uint32
			if err := held.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
				t.Fatal(err)
			}
			// stores opens both stores on a namespace of their own: an
			// attempt made again must not find the last one's
			// confirmations (its held Add's would fill the caps).
			stores := func() (s, hs ledger.Store) {
				opts := tt.opts
				opts.Namespace = namespace(t, p, pgledger.DefaultTable)
				s, hs = newStore(t, p, opts), newStore(t, held, opts)
				// Warm the held pool's one connection: its statements are
				// prepared (and its store has swept), so the call is one
				// pipeline, Bind first.
				ledgertest.RedeemOnce(t, hs)
				return s, hs
			}

			for margin, attempt := 50*time.Millisecond, 1; ; margin, attempt = 2*margin, attempt+1 {
				s, hs := stores()
				rec, err := linearizability.NewRecorder(linearizability.RecorderOptions{Skew: 3 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				c1, c2 := rec.Client(), rec.Client()
				id := ledgertest.Fresh(t).ID
				from, to := tt.prepare(ctx, t, c1, s, id, func() time.Time { return dbClock(t, p) }, margin)

				gate.arm()
				done := make(chan error, 1)
				go func() { done <- tt.held(ctx, t, c2, hs, id) }()
				<-gate.holding
				began := xactStart(t, p, pid)
				if !began.Before(from) {
					// The first message came after the instant: this
					// attempt shows nothing. Release, and try again.
					gate.release()
					<-done
					if attempt == 8 {
						t.Fatalf("the held call's transaction began at %v, after %v, in %d attempts", began, from, attempt)
					}
					continue
				}
				for !dbClock(t, p).After(to) {
					time.Sleep(time.Millisecond)
				}
				errBetween := tt.between(ctx, t, c1, s, id)
				gate.release()
				errHeld := <-done
				t.Logf("attempt %d (margin %v): transaction began %v before the instant; the call in between: %v; the held call: %v",
					attempt, margin, from.Sub(began), errBetween, errHeld)
				if !errors.Is(errBetween, tt.wantAfter) {
					t.Fatalf("the call in between, after the instant: %v, want %v", errBetween, tt.wantAfter)
				}
				if !errors.Is(errHeld, tt.wantHeld) {
					t.Errorf("the held call, its lock taken after the instant: %v, want %v (decided on a clock read before the lock)", errHeld, tt.wantHeld)
				}
				r := linearizability.Verify(rec.History(), time.Minute)
				if r.Result != porcupine.Ok {
					t.Errorf("porcupine: %s:\n%s", r.Result, linearizability.Describe(rec.History().Operations))
				}
				return
			}
		})
	}
}

// dbClock reads the database's clock.
func dbClock(t *testing.T, p *pgxpool.Pool) time.Time {
	t.Helper()
	var now time.Time
	if err := p.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

// xactStart waits until backend pid is in a transaction and returns when
// it began (now() in that transaction).
func xactStart(t *testing.T, p *pgxpool.Pool, pid uint32) time.Time {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		var at *time.Time
		if err := p.QueryRow(context.Background(), `SELECT xact_start FROM pg_stat_activity WHERE pid = $1`, int32(pid)).Scan(&at); err != nil {
			t.Fatal(err)
		}
		if at != nil {
			return *at
		}
	}
	t.Fatal("the held call's first message never began a transaction")
	return time.Time{}
}

// A splitGate holds up, once armed, the next pipeline a connection
// writes that begins with a Bind: it forwards that first message and
// holds the rest until released.
type splitGate struct {
	mu      sync.Mutex
	armed   bool
	holding chan struct{} // receives when the first message was forwarded
	resume  chan struct{}
}

func (g *splitGate) arm() {
	g.mu.Lock()
	g.armed, g.holding, g.resume = true, make(chan struct{}, 1), make(chan struct{})
	g.mu.Unlock()
}

func (g *splitGate) release() { close(g.resume) }

// splitPool returns a pool of one connection to the test database whose
// writes go through a splitGate.
func splitPool(t *testing.T) (*pgxpool.Pool, *splitGate) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(serverURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns, cfg.MinConns = 1, 1
	cfg.ConnConfig.TLSConfig, cfg.ConnConfig.Fallbacks = nil, nil // the gate reads the protocol in the clear
	g := &splitGate{}
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &splitConn{Conn: c, gate: g}, nil
	}
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, g
}

// A splitConn is a connection whose writes an armed splitGate splits.
type splitConn struct {
	net.Conn
	gate *splitGate
}

func (c *splitConn) Write(b []byte) (int, error) {
	g := c.gate
	g.mu.Lock()
	armed := g.armed && len(b) > 5 && b[0] == 'B'
	if armed {
		g.armed = false
	}
	g.mu.Unlock()
	if !armed {
		return c.Conn.Write(b)
	}
	// A message is its type byte and a length that counts itself.
	n := 1 + int(binary.BigEndian.Uint32(b[1:5]))
	if n >= len(b) {
		return c.Conn.Write(b)
	}
	if _, err := c.Conn.Write(b[:n]); err != nil {
		return 0, err
	}
	g.holding <- struct{}{}
	<-g.resume
	m, err := c.Conn.Write(b[n:])
	return n + m, err
}
