package observe_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/observe"
)

// countingStore is a real memory store that counts the Pending calls
// made of it.
type countingStore struct {
	*ledger.Memory
	counts atomic.Int64
}

func (s *countingStore) Pending(ctx context.Context) (int, error) {
	s.counts.Add(1)
	return s.Memory.Pending(ctx)
}

// TestTelemetryStore: the timed store is the store it wraps, to the
// ledger: it chooses ids when the store does (the memory store places a
// principal's confirmations by them) and not otherwise; and without
// metrics it is the store itself. However often the metrics are scraped
// at once, the store is asked for its pending count at most once a
// second; the Handler answers 404 without metrics.
func TestTelemetryStore(t *testing.T) {
	tel, err := observe.New(observe.Options{Metrics: true})
	if err != nil {
		t.Fatal(err)
	}
	mem := &countingStore{Memory: ledger.NewMemory(ledger.MemoryOptions{})}
	if _, ok := tel.Store(mem).(ledger.IDSource); !ok {
		t.Fatal("the timed memory store is no IDSource")
	}
	type plain struct{ ledger.Store } // a store that chooses no ids
	if _, ok := tel.Store(plain{mem}).(ledger.IDSource); ok {
		t.Fatal("the timed store of a store that chooses no ids is an IDSource")
	}
	if s := (*observe.Telemetry)(nil).Store(mem); s != ledger.Store(mem) {
		t.Fatal("a nil Telemetry wrapped the store")
	}
	l, err := ledger.New(tel.Store(mem), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Issue(context.Background(), ledger.Confirmation{Tool: "t", ArgsDigest: "d", Principal: "p"}); err != nil {
		t.Fatal(err)
	}

	srv := httptest.NewServer(tel.Handler())
	defer srv.Close()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				res, err := http.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				res.Body.Close()
			}
		})
	}
	wg.Wait()
	if n := mem.counts.Load(); n < 1 || n > 2 {
		t.Fatalf("80 scrapes asked the store %d times, want once (twice across a second)", n)
	}
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || !strings.Contains(string(b), "\nmcp_confirm_pending 1\n") {
		t.Fatalf("the exposition lacks mcp_confirm_pending 1 (%v):\n%s", err, b)
	}
	off, err := observe.New(observe.Options{TracerProvider: nil})
	if err != nil || off != nil {
		t.Fatalf("New with nothing on = %v, %v", off, err)
	}
	rec := httptest.NewRecorder()
	off.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("a nil Telemetry's Handler answered %d", rec.Code)
	}
}

// settableStore is a memory store whose pending count, or its error, the
// test sets; Pending blocks while block is open, once entered says so on
// entered.
type settableStore struct {
	*ledger.Memory
	mu      sync.Mutex
	n       int
	err     error
	block   chan struct{} // nil: do not block
	entered chan struct{}
}

func (s *settableStore) set(n int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n, s.err = n, err
}

func (s *settableStore) Pending(ctx context.Context) (int, error) {
	if s.block != nil {
		select {
		case s.entered <- struct{}{}:
		default:
		}
		select {
		case <-s.block:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.err
}

// exposition scrapes h and returns its body.
func exposition(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d\n%s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// TestPendingGaugeFollowsTheStore: the gauge is the first timed store's
// count (a second store given to Store is timed, not counted), read again
// once its reading is a second old; a count the store cannot give leaves
// the gauge out of the exposition, never a stale or zero value, and the
// rest is still served.
func TestPendingGaugeFollowsTheStore(t *testing.T) {
	tel, err := observe.New(observe.Options{Metrics: true})
	if err != nil {
		t.Fatal(err)
	}
	first := &settableStore{Memory: ledger.NewMemory(ledger.MemoryOptions{})}
	second := &settableStore{Memory: ledger.NewMemory(ledger.MemoryOptions{})}
	first.set(3, nil)
	second.set(7, nil)
	tel.Store(first)
	tel.Store(second)
	h := tel.Handler()
	if got := exposition(t, h); !strings.Contains(got, "\nmcp_confirm_pending 3\n") {
		t.Fatalf("want the first store's count, 3:\n%s", got)
	}
	first.set(4, nil)
	time.Sleep(1100 * time.Millisecond) // past the reading's second
	if got := exposition(t, h); !strings.Contains(got, "\nmcp_confirm_pending 4\n") {
		t.Fatalf("a second later, want the new count, 4:\n%s", got)
	}
	first.set(0, errors.New("store unreachable"))
	time.Sleep(1100 * time.Millisecond)
	got := exposition(t, h)
	if strings.Contains(got, "\nmcp_confirm_pending ") {
		t.Fatalf("a store that cannot count still has a gauge:\n%s", got)
	}
	if !strings.Contains(got, "\nmcp_confirm_questions_total 0\n") {
		t.Fatalf("the rest of the metrics are not served:\n%s", got)
	}
}

// TestHandlerBoundsScrapes: with four scrapes in flight (held by a store
// slow to count), another is answered 503 at once rather than queued.
func TestHandlerBoundsScrapes(t *testing.T) {
	tel, err := observe.New(observe.Options{Metrics: true, PendingTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	s := &settableStore{Memory: ledger.NewMemory(ledger.MemoryOptions{}), block: make(chan struct{}), entered: make(chan struct{}, 1)}
	tel.Store(s)
	srv := httptest.NewServer(tel.Handler())
	defer srv.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(s.block)
	for range 4 {
		wg.Go(func() {
			if res, err := http.Get(srv.URL); err == nil {
				res.Body.Close()
			}
		})
	}
	<-s.entered
	client := &http.Client{Timeout: 200 * time.Millisecond}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		res, err := client.Get(srv.URL)
		if err != nil {
			continue // not yet four in flight: this one waits with them
		}
		res.Body.Close()
		if res.StatusCode == http.StatusServiceUnavailable {
			return
		}
		t.Fatalf("a fifth scrape answered %d", res.StatusCode)
	}
	t.Fatal("no scrape was refused with four in flight")
}

// TestNewRefusesBadOptions: a store name outside the fixed set (it is a
// label value) or a negative timeout is refused; each known store is
// accepted (the control).
func TestNewRefusesBadOptions(t *testing.T) {
	for _, c := range []struct {
		opts   observe.Options
		refuse string
	}{
		{observe.Options{Metrics: true, Store: "mysql"}, `"mysql"`},
		{observe.Options{Metrics: true, Store: "memory\n"}, "want memory, redis or postgres"},
		{observe.Options{Metrics: true, PendingTimeout: -time.Second}, "negative PendingTimeout"},
		{observe.Options{Metrics: true, Store: "memory"}, ""},
		{observe.Options{Metrics: true, Store: "redis"}, ""},
		{observe.Options{Metrics: true, Store: "postgres"}, ""},
	} {
		tel, err := observe.New(c.opts)
		switch {
		case c.refuse == "" && (err != nil || tel == nil):
			t.Errorf("%+v: %v", c.opts, err)
		case c.refuse != "" && (err == nil || !strings.Contains(err.Error(), c.refuse)):
			t.Errorf("%+v: err = %v, want one saying %s", c.opts, err, c.refuse)
		}
	}
}
