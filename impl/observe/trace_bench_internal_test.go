package observe

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// countingExporter counts the spans exported to it, and drops them.
type countingExporter struct{ n atomic.Int64 }

func (e *countingExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.n.Add(int64(len(spans)))
	return nil
}

func (e *countingExporter) Shutdown(context.Context) error { return nil }

// BenchmarkTelemetryCall is what this package does in a confirmed call
// with metrics and traces on, and nothing else: the two rounds' requests
// through Middleware, each continuing a client's sampled traceparent, and
// in them the four stages' spans (ask; redeem, act, complete), with their
// metrics, ended as the flow ends them. The spans go to this package's
// batcher and an exporter that drops them, so the time is the calls' own,
// on the caller's goroutine: the part of BenchmarkObservabilityRatio's
// on/off that is spent here and in the SDK's span code (BENCHMARKS.md,
// row 23).
func BenchmarkTelemetryCall(b *testing.B) {
	exp := new(countingExporter)
	o, err := batchFromEnv()
	if err != nil {
		b.Fatal(err)
	}
	o.queue = 1 << 16 // never a span dropped: its goroutine may lag on a loaded machine
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(newBatcher(exp, o)))
	t, err := New(Options{Metrics: true, TracerProvider: tp})
	if err != nil {
		b.Fatal(err)
	}
	const tool = "delete_file"
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: tool,
		Meta: mcp.Meta{MetaTraceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}
	id := ledger.ID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	issued := time.Now()
	ask := t.Middleware()(func(ctx context.Context, _ string, _ mcp.Request) (mcp.Result, error) {
		_, s := t.Start(ctx, Ask, tool)
		s.EndAsk(ledger.Confirmation{ID: id}, nil)
		return nil, nil
	})
	answer := t.Middleware()(func(ctx context.Context, _ string, _ mcp.Request) (mcp.Result, error) {
		t.Answered(true)
		_, s := t.Start(ctx, Redeem, tool)
		s.EndSpend(Redeem, id, issued, nil)
		_, s = t.Start(ctx, Act, tool)
		s.EndAct(ledger.OutcomeDone)
		_, s = t.Start(ctx, Complete, "")
		s.EndComplete(ledger.OutcomeDone, nil)
		return nil, nil
	})
	ctx := context.Background()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		ask(ctx, "tools/call", req)
		answer(ctx, "tools/call", req)
		n++
	}
	b.StopTimer()
	if err := tp.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	if got, want := exp.n.Load(), int64(4*n); got != want {
		b.Fatalf("%d spans exported, want %d (four a call)", got, want)
	}
}
