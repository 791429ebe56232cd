package observe_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

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
