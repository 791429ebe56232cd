package ledgertest

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// ClosedAddr returns an address on which nothing listens.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// SilentAddr returns an address that accepts connections and never
// answers, like a server that hangs, until t ends.
func SilentAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// GoneAway checks that a store whose server went away fails every
// operation, within the caller's deadline, with an error that is not a
// ledger answer: an answer (ErrUnknown, say, for a confirmation that is
// pending) would be taken as the truth about the confirmation. It tries
// a store closed by its owner (closed: opened on a working server, then
// closed), one whose server is not listening and one whose server hangs
// (at, given [ClosedAddr] and [SilentAddr]); on each, Add, Spend, Complete,
// Decide, Lookup and the store's own operations in more, by name.
func GoneAway[S ledger.Store](t *testing.T, closed func(t *testing.T) S, at func(t *testing.T, addr string) S, more map[string]func(context.Context, S) error) {
	const timeout = 300 * time.Millisecond
	storeAt := func(addr string) func(t *testing.T) S {
		return func(t *testing.T) S { return at(t, addr) }
	}
	tests := []struct {
		name  string
		store func(t *testing.T) S
	}{
		{"closed store", closed},
		{"nothing listening", storeAt(ClosedAddr(t))},
		{"server hangs", storeAt(SilentAddr(t))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.store(t)
			ops := map[string]func(context.Context) error{
				"Add": func(ctx context.Context) error { return s.Add(ctx, Fresh(t)) },
				"Spend": func(ctx context.Context) error {
					_, err := s.Spend(ctx, NewID(t), ledger.Acting, Long)
					return err
				},
				"Complete": func(ctx context.Context) error {
					return s.Complete(ctx, NewID(t), outcome(ledger.OutcomeDone))
				},
				"Decide": func(ctx context.Context) error {
					_, err := s.Decide(ctx, NewID(t), ledger.Approver{ID: "alice"}, true)
					return err
				},
				"Lookup": func(ctx context.Context) error {
					_, err := s.Lookup(ctx, NewID(t))
					return err
				},
			}
			for name, op := range more {
				ops[name] = func(ctx context.Context) error { return op(ctx, s) }
			}
			for name, op := range ops {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				start := time.Now()
				err := op(ctx)
				elapsed := time.Since(start)
				cancel()
				if ledger.ResultOf(err) != ledger.ResultError {
					t.Errorf("%s = %v, want an error that is not a ledger sentinel", name, err)
				}
				if elapsed > timeout+2*time.Second {
					t.Errorf("%s took %v with a %v deadline", name, elapsed, timeout)
				}
				t.Logf("%s after %v: %v", name, elapsed.Round(time.Millisecond), err)
			}
		})
	}
}

// An OpenFailure is a URL, carrying the password, on which a store's
// Open must fail with an error that names Want.
type OpenFailure struct {
	Name, URL, Want string
}

// OpenErrors checks that open fails on each case within 300 ms, with an
// error that names what the case wants (the server, so an operator can
// tell which one failed) and never contains password: Open errors end up
// in logs, and a URL's password must not. open opens a store on url and,
// if that succeeds, closes it and returns nil.
func OpenErrors(t *testing.T, password string, open func(ctx context.Context, url string) error, cases []OpenFailure) {
	for _, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err := open(ctx, tt.URL)
			if err == nil {
				t.Fatal("Open succeeded")
			}
			msg := err.Error()
			if strings.Contains(msg, password) {
				t.Fatalf("error echoes the password: %v", msg)
			}
			if !strings.Contains(msg, tt.Want) {
				t.Fatalf("error %q does not name %q", msg, tt.Want)
			}
			t.Log(msg)
		})
	}
}
