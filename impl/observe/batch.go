package observe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// batchOptions are the batching settings of the standard OTEL_BSP_*
// variables, with the SDK's defaults.
type batchOptions struct {
	delay    time.Duration // OTEL_BSP_SCHEDULE_DELAY: the longest a span waits
	timeout  time.Duration // OTEL_BSP_EXPORT_TIMEOUT: one export's limit
	queue    int           // OTEL_BSP_MAX_QUEUE_SIZE: spans held; more are dropped
	maxBatch int           // OTEL_BSP_MAX_EXPORT_BATCH_SIZE: spans per export
}

// batchFromEnv reads the OTEL_BSP_* variables. A value that is not a
// positive integer is refused, not replaced by the default as the SDK's
// batcher would: an operator who set one should learn it did not apply.
// A batch larger than the queue is cut to the queue, as the SDK does.
func batchFromEnv() (batchOptions, error) {
	o := batchOptions{
		delay:    time.Duration(sdktrace.DefaultScheduleDelay) * time.Millisecond,
		timeout:  time.Duration(sdktrace.DefaultExportTimeout) * time.Millisecond,
		queue:    sdktrace.DefaultMaxQueueSize,
		maxBatch: sdktrace.DefaultMaxExportBatchSize,
	}
	var errs []error
	read := func(name string, set func(int)) {
		v := strings.TrimSpace(os.Getenv(name))
		if v == "" {
			return
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a positive integer", name, v))
			return
		}
		set(n)
	}
	read("OTEL_BSP_SCHEDULE_DELAY", func(n int) { o.delay = time.Duration(n) * time.Millisecond })
	read("OTEL_BSP_EXPORT_TIMEOUT", func(n int) { o.timeout = time.Duration(n) * time.Millisecond })
	read("OTEL_BSP_MAX_QUEUE_SIZE", func(n int) { o.queue = n })
	read("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", func(n int) { o.maxBatch = n })
	o.maxBatch = min(o.maxBatch, o.queue)
	return o, errors.Join(errs...)
}

// A batcher is an sdktrace.SpanProcessor that sends the sampled spans that
// end to its exporter in batches, as the SDK's BatchSpanProcessor does:
// a batch as soon as maxBatch spans wait, and whatever waits every delay;
// spans past the queue's bound are dropped, never waited for. It differs
// in one thing: an ending span is appended under a mutex, and the
// exporting goroutine is woken only when a batch is full. The SDK's
// batcher hands each span to its goroutine over a channel, which wakes it
// (often another thread with it) for every span: four per confirmed
// call, about 1 % of the call's time (BENCHMARKS.md, row 23).
type batcher struct {
	exp sdktrace.SpanExporter
	o   batchOptions

	mu      sync.Mutex
	spans   []sdktrace.ReadOnlySpan // waiting, at most o.queue
	dropped int                     // since the last export, for the log
	stopped bool

	full     chan struct{} // a batch is waiting (buffered 1)
	stop     chan struct{} // closed by Shutdown
	done     chan struct{} // closed when the goroutine has returned
	exportMu sync.Mutex    // one export at a time: exporters need not be safe for concurrent use
	shutOnce sync.Once
	shutErr  error
}

var _ sdktrace.SpanProcessor = (*batcher)(nil)

// newBatcher starts a batcher sending to exp.
func newBatcher(exp sdktrace.SpanExporter, o batchOptions) *batcher {
	b := &batcher{exp: exp, o: o, full: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

func (b *batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues s if it is sampled, and wakes the goroutine only if that
// makes a batch.
func (b *batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	b.mu.Lock()
	switch {
	case b.stopped:
		b.mu.Unlock()
		return
	case len(b.spans) >= b.o.queue:
		// A flood of spans (or an exporter that cannot keep up) costs
		// spans, not memory or the caller's time.
		b.dropped++
		b.mu.Unlock()
		return
	}
	b.spans = append(b.spans, s)
	batch := len(b.spans) == b.o.maxBatch
	b.mu.Unlock()
	if batch {
		select {
		case b.full <- struct{}{}:
		default: // already woken
		}
	}
}

// run exports full batches when woken and everything waiting every delay,
// until Shutdown.
func (b *batcher) run() {
	defer close(b.done)
	tick := time.NewTicker(b.o.delay)
	defer tick.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-b.full:
			b.export(context.Background(), false)
		case <-tick.C:
			b.export(context.Background(), true)
		}
	}
}

// export sends what waits, in batches of at most maxBatch: every span if
// all, else only full batches. It returns the first error.
func (b *batcher) export(ctx context.Context, all bool) error {
	b.exportMu.Lock()
	defer b.exportMu.Unlock()
	var first error
	for {
		b.mu.Lock()
		n := min(len(b.spans), b.o.maxBatch)
		if n == 0 || (!all && n < b.o.maxBatch) {
			b.mu.Unlock()
			return first
		}
		batch := make([]sdktrace.ReadOnlySpan, n)
		copy(batch, b.spans)
		rest := copy(b.spans, b.spans[n:])
		clear(b.spans[rest:]) // hold no exported span
		b.spans = b.spans[:rest]
		dropped := b.dropped
		b.dropped = 0
		b.mu.Unlock()
		if dropped > 0 {
			otel.Handle(fmt.Errorf("traces: %d span(s) dropped: more than OTEL_BSP_MAX_QUEUE_SIZE=%d waited", dropped, b.o.queue))
		}
		ectx, cancel := context.WithTimeout(ctx, b.o.timeout)
		err := b.exp.ExportSpans(ectx, batch)
		cancel()
		if err != nil {
			otel.Handle(err)
			if first == nil {
				first = err
			}
		}
	}
}

// ForceFlush exports every span that has ended, and returns the first
// export's error, if any.
func (b *batcher) ForceFlush(ctx context.Context) error {
	return b.export(ctx, true)
}

// Shutdown stops the goroutine, exports what waits, then shuts the
// exporter down; spans that end later are dropped. If ctx ends first
// (the goroutine still in an export to a collector that does not
// answer), it returns ctx's error rather than wait for the export's own
// timeout. Later calls return the first's result.
func (b *batcher) Shutdown(ctx context.Context) error {
	b.shutOnce.Do(func() {
		b.mu.Lock()
		b.stopped = true
		b.mu.Unlock()
		close(b.stop)
		select {
		case <-b.done:
		case <-ctx.Done():
			b.shutErr = ctx.Err()
			return
		}
		b.shutErr = errors.Join(b.export(ctx, true), b.exp.Shutdown(ctx))
	})
	return b.shutErr
}
