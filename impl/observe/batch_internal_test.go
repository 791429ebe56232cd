package observe

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func TestBatchFromEnv(t *testing.T) {
	def := batchOptions{delay: 5 * time.Second, timeout: 30 * time.Second, queue: 2048, maxBatch: 512}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want batchOptions
		err  string // in the error; "" for none
	}{
		{"defaults", nil, def, ""},
		{"each set", map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "250", "OTEL_BSP_EXPORT_TIMEOUT": " 1000 ", "OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "10"},
			batchOptions{delay: 250 * time.Millisecond, timeout: time.Second, queue: 100, maxBatch: 10}, ""},
		{"batch cut to the queue", map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "100"}, batchOptions{delay: def.delay, timeout: def.timeout, queue: 100, maxBatch: 100}, ""},
		{"not a number", map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "5s"}, batchOptions{}, `OTEL_BSP_SCHEDULE_DELAY="5s"`},
		{"zero", map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "0"}, batchOptions{}, `OTEL_BSP_MAX_QUEUE_SIZE="0"`},
		{"negative", map[string]string{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "-1"}, batchOptions{}, `OTEL_BSP_MAX_EXPORT_BATCH_SIZE="-1"`},
		{"fraction", map[string]string{"OTEL_BSP_EXPORT_TIMEOUT": "1.5"}, batchOptions{}, `OTEL_BSP_EXPORT_TIMEOUT="1.5"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []string{"OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_EXPORT_TIMEOUT", "OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"} {
				t.Setenv(v, tc.env[v])
			}
			got, err := batchFromEnv()
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("batchFromEnv: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("batchFromEnv = %v, want an error naming %s", err, tc.err)
			case tc.err == "" && got != tc.want:
				t.Fatalf("batchFromEnv = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// batches is an exporter that records the size of each batch it is given,
// and can be held: an export then waits until release.
type batches struct {
	mu       sync.Mutex
	sizes    []int
	shutdown int
	hold     chan struct{} // nil: never held
}

func (e *batches) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.hold != nil {
		<-e.hold
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sizes = append(e.sizes, len(spans))
	return nil
}

func (e *batches) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.shutdown++
	return nil
}

func (e *batches) got() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.sizes)
}

// until waits up to 10 seconds for cond.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %s", what)
		}
	}
}

// endSpans ends n spans of a provider sending to b, sampled or not.
func endSpans(b *batcher, n int, sampled bool) {
	sampler := sdktrace.NeverSample()
	if sampled {
		sampler = sdktrace.AlwaysSample()
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSpanProcessor(b))
	tr := tp.Tracer("test")
	for range n {
		_, s := tr.Start(context.Background(), "s")
		s.End()
	}
}

func TestBatcherSendsFullBatchesAtOnce(t *testing.T) {
	e := new(batches)
	b := newBatcher(e, batchOptions{delay: time.Hour, timeout: time.Minute, queue: 100, maxBatch: 4})
	defer b.Shutdown(context.Background())
	endSpans(b, 9, true)
	until(t, "two full batches exported without waiting for the delay", func() bool { return len(e.got()) == 2 })
	// The ninth waits for the delay (an hour) or a flush: not a batch.
	time.Sleep(50 * time.Millisecond)
	if got := e.got(); !slices.Equal(got, []int{4, 4}) {
		t.Fatalf("exported batches %v, want [4 4] before a flush", got)
	}
	if err := b.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := e.got(); !slices.Equal(got, []int{4, 4, 1}) {
		t.Fatalf("exported batches %v, want [4 4 1] after a flush", got)
	}
}

func TestBatcherSendsOnlySampledSpans(t *testing.T) {
	e := new(batches)
	b := newBatcher(e, batchOptions{delay: time.Hour, timeout: time.Minute, queue: 100, maxBatch: 4})
	endSpans(b, 10, false)
	endSpans(b, 1, true) // control: a sampled one is sent
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := e.got(); !slices.Equal(got, []int{1}) {
		t.Fatalf("exported batches %v, want only the sampled span's [1]", got)
	}
}

func TestBatcherSendsAfterTheDelay(t *testing.T) {
	e := new(batches)
	b := newBatcher(e, batchOptions{delay: 20 * time.Millisecond, timeout: time.Minute, queue: 100, maxBatch: 50})
	defer b.Shutdown(context.Background())
	endSpans(b, 3, true)
	until(t, "the spans exported after the delay", func() bool { return slices.Equal(e.got(), []int{3}) })
}

// TestBatcherDropsPastTheQueue: with the exporter stuck, spans past the
// queue's bound are dropped, and ending a span never waits for it.
func TestBatcherDropsPastTheQueue(t *testing.T) {
	e := &batches{hold: make(chan struct{})}
	b := newBatcher(e, batchOptions{delay: time.Hour, timeout: time.Minute, queue: 6, maxBatch: 3})
	endSpans(b, 3, true) // a batch: the goroutine takes it and is stuck exporting it
	until(t, "the first batch taken", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.spans) == 0
	})
	done := make(chan struct{})
	go func() { endSpans(b, 10, true); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("ending spans waited for a stuck exporter")
	}
	close(e.hold)
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := e.got(); !slices.Equal(got, []int{3, 3, 3}) {
		t.Fatalf("exported batches %v, want [3 3 3]: the first, then the queue's 6, 4 dropped", got)
	}
}

func TestBatcherShutdown(t *testing.T) {
	e := new(batches)
	b := newBatcher(e, batchOptions{delay: time.Hour, timeout: time.Minute, queue: 100, maxBatch: 50})
	endSpans(b, 5, true)
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	endSpans(b, 5, true) // after Shutdown: dropped
	if err := b.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := e.got(); !slices.Equal(got, []int{5}) {
		t.Fatalf("exported batches %v, want the 5 that waited at Shutdown, and nothing after", got)
	}
	if e.shutdown != 1 {
		t.Fatalf("the exporter was shut down %d times, want 1", e.shutdown)
	}
}

// failing is an exporter whose every export fails.
type failing struct{ batches }

var errExport = errors.New("collector unreachable")

func (f *failing) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	f.batches.ExportSpans(ctx, spans)
	return errExport
}

func TestBatcherFlushReportsExportErrors(t *testing.T) {
	f := new(failing)
	b := newBatcher(f, batchOptions{delay: time.Hour, timeout: time.Minute, queue: 100, maxBatch: 50})
	defer b.Shutdown(context.Background())
	endSpans(b, 2, true)
	if err := b.ForceFlush(context.Background()); !errors.Is(err, errExport) {
		t.Fatalf("ForceFlush = %v, want the export's error", err)
	}
	// The spans were handed over once, not kept for another try.
	if err := b.ForceFlush(context.Background()); err != nil {
		t.Fatalf("a second ForceFlush = %v, want nothing to export", err)
	}
	if got := f.got(); !slices.Equal(got, []int{2}) {
		t.Fatalf("exported batches %v, want [2]", got)
	}
}

// TestBatcherShutdownKeepsItsDeadline: with the goroutine stuck in an
// export, Shutdown returns when its context ends, not when the export's
// timeout (here an hour) would.
func TestBatcherShutdownKeepsItsDeadline(t *testing.T) {
	e := &batches{hold: make(chan struct{})}
	defer close(e.hold)
	b := newBatcher(e, batchOptions{delay: time.Hour, timeout: time.Hour, queue: 10, maxBatch: 2})
	endSpans(b, 2, true)
	until(t, "the batch taken", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.spans) == 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.Shutdown(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown = %v, want its context's deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown waited past its context for a stuck export")
	}
}
