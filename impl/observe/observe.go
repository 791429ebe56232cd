// Package observe counts and traces what a confirming server does:
// Prometheus metrics on a registry of its own, and OpenTelemetry spans
// that continue the W3C trace a client names in a request's _meta.
//
// A [Telemetry] is given to [confirm.Setup] (its Telemetry field), and
// [confirm.Assemble] wires it into every part it builds, so that both
// front ends (the reference server and the proxy) get the same metrics
// and spans from one place: the ledger's store is timed ([Telemetry.Store]),
// the requestState boundary reports its refusals ([Telemetry.Refused]), the
// flow reports each step ([Telemetry.Start]), and the receiving chain
// gains a span per tools/call ([Telemetry.Middleware]). A nil *Telemetry
// is valid and does nothing: with neither metrics nor traces configured,
// nothing is wrapped, timed or allocated.
//
// # Metrics
//
// All on the Telemetry's own registry (never the global default), served
// by [Telemetry.Handler]; see docs/operating.md for the list. Every label
// takes its values from a fixed set this package names (a refusal's class,
// an outcome, a store operation): no label carries a tool name, a
// principal, an argument or anything else a caller or an upstream server
// chooses, so no caller can add series (a tool name from an upstream, or a
// principal from a token issuer, would let them grow without bound).
// Counts are this process's: replicas are summed by the scraper. The
// pending gauge is the store's own count, the same for every replica that
// shares it.
//
// # Traces
//
// A tools/call whose _meta names a valid W3C traceparent (with its
// tracestate) runs in that trace: the steps' spans are the children of
// the client's span — confirm.ask (the question validated and issued),
// confirm.redeem (an approval spent) or confirm.cancel (a decline),
// confirm.act (the action) and confirm.complete (its outcome recorded);
// in the proxy, proxy.forward (the call sent upstream) under
// confirm.act, and the upstream is told of that span in the forwarded
// _meta. No span is made for the request itself: the client's stands for
// it, and one more per request would cost a third of a confirmed call's
// spans. A call with no traceparent, or a malformed one (which is
// ignored, and marked mcp_confirm.traceparent_invalid), gets a server
// span, tools/call, the root of a trace of its own with the steps
// beneath. A call the boundary refuses is a span requeststate.refused in
// the client's trace, or marks its tools/call span, with the class. Spans
// carry the tool's name, the confirmation's id and the ledger's result
// words; never arguments, the question's text, a principal or a
// requestState. Sampling follows the SDK's configuration (by default, the
// client's sampled flag decides: set OTEL_TRACES_SAMPLER=traceidratio to
// decide locally).
//
// What it does not do: count what never reaches this process (a question
// no one answers is not an expiry here; it leaves the pending gauge when
// its deadline passes), or what a crash cuts short (an approval whose
// process died while acting is in doubt, and counted only when a retry
// finds it so, as a replay). Metrics are not authenticated: serve them on
// loopback (the binary's default), where every local user can read them.
package observe

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
)

// Options configures a [Telemetry].
type Options struct {
	// Metrics turns on the Prometheus metrics, which [Telemetry.Handler]
	// serves.
	Metrics bool
	// Store names the ledger's store in mcp_confirm_ledger_seconds:
	// "memory", "redis" or "postgres" (storeurl.Kind names a URL's).
	// Default "memory".
	Store string
	// TracerProvider makes the spans; nil means none. [FromEnv] builds one
	// from the standard OTEL_* variables.
	TracerProvider trace.TracerProvider
	// PendingTimeout bounds the store's count behind mcp_confirm_pending
	// at a scrape. Default 2 seconds.
	PendingTimeout time.Duration
	// Logger receives the errors of scrapes (a store that cannot count);
	// nil means slog.Default().
	Logger *slog.Logger
}

// Stores are the names Options.Store accepts.
var Stores = []string{"memory", "redis", "postgres"}

// Telemetry counts and traces one confirming server. It is safe for
// concurrent use; a nil *Telemetry does nothing.
type Telemetry struct {
	reg     *prometheus.Registry // nil without metrics
	m       *metrics             // nil without metrics
	tracer  trace.Tracer         // nil without traces
	store   string
	pending *pendingCollector // nil without metrics
	log     *slog.Logger
}

// New returns a Telemetry, or nil (which does nothing) when opts turn
// nothing on.
func New(opts Options) (*Telemetry, error) {
	if opts.Store == "" {
		opts.Store = "memory"
	}
	known := false
	for _, s := range Stores {
		known = known || s == opts.Store
	}
	if !known {
		// A label value from configuration, but still one of a fixed set.
		return nil, fmt.Errorf("observe: Options.Store %q: want memory, redis or postgres", opts.Store)
	}
	if opts.PendingTimeout < 0 {
		return nil, fmt.Errorf("observe: negative PendingTimeout %v", opts.PendingTimeout)
	}
	if opts.PendingTimeout == 0 {
		opts.PendingTimeout = 2 * time.Second
	}
	if !opts.Metrics && opts.TracerProvider == nil {
		return nil, nil
	}
	t := &Telemetry{store: opts.Store, log: opts.Logger}
	if t.log == nil {
		t.log = slog.Default()
	}
	if opts.TracerProvider != nil {
		t.tracer = opts.TracerProvider.Tracer(instrumentation)
	}
	if opts.Metrics {
		t.reg = prometheus.NewRegistry()
		t.m = newMetrics(t.reg, opts.Store)
		t.pending = &pendingCollector{desc: pendingDesc, timeout: opts.PendingTimeout}
		t.reg.MustRegister(t.pending,
			// The default Go metrics and the live heap (what the last GC
			// marked), the one that shows what memory the process holds:
			// the memstats gauges count garbage not yet collected too.
			collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
				collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return t, nil
}

// instrumentation names this package to the tracer provider.
const instrumentation = "github.com/mcp-confirm/mcp-confirm/impl/observe"

// Metrics reports whether t collects metrics.
func (t *Telemetry) Metrics() bool { return t != nil && t.m != nil }

// Tracing reports whether t makes spans.
func (t *Telemetry) Tracing() bool { return t != nil && t.tracer != nil }

// CountSessions adds the gauge mcp_confirm_http_sessions, which calls
// count at each scrape: the front end's live stateful HTTP sessions
// (package serve's HTTP.Sessions). It does nothing without metrics, and must be
// called at most once.
func (t *Telemetry) CountSessions(count func() int) {
	if !t.Metrics() {
		return
	}
	t.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mcp_confirm_http_sessions",
		Help: "Stateful (older-era) HTTP sessions live in this process: opened, not yet closed by their client or by the session timeout.",
	}, func() float64 { return float64(count()) }))
}

// Gatherer returns t's registry, or nil without metrics.
func (t *Telemetry) Gatherer() prometheus.Gatherer {
	if !t.Metrics() {
		return nil
	}
	return t.reg
}

// Handler serves t's metrics in the Prometheus exposition formats: at most
// four scrapes at once (more get 503), each bounded by ten seconds; a
// metric that cannot be read (the store's pending count) is left out and
// logged, the rest still served. Without metrics it answers 404.
func (t *Telemetry) Handler() http.Handler {
	if !t.Metrics() {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(t.reg, promhttp.HandlerOpts{
		ErrorLog:      errorLog{t.log},
		ErrorHandling: promhttp.ContinueOnError,
		// A local caller hammering the port costs at most four
		// collections at once, never a queue of them.
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	})
}

// errorLog passes promhttp's errors to a logger.
type errorLog struct{ log *slog.Logger }

func (l errorLog) Println(v ...any) { l.log.Warn("metrics: " + fmt.Sprint(v...)) }

// pendingDesc describes mcp_confirm_pending.
var pendingDesc = prometheus.NewDesc("mcp_confirm_pending",
	"Confirmations pending in the ledger's store: asked, not yet answered, not expired (the store's own count, shared by its replicas).",
	nil, nil)

// pendingCollector reads the gauge of pending confirmations from the store
// when scraped, at most once a second: however often a local caller
// scrapes, the store is asked at most that often.
type pendingCollector struct {
	desc    *prometheus.Desc
	timeout time.Duration

	mu      sync.Mutex
	counter interface {
		Pending(context.Context) (int, error)
	}
	read time.Time // when n was read
	n    int
	err  error
}

// pendingEvery is how long a reading of the pending count is reused.
const pendingEvery = time.Second

func (c *pendingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *pendingCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counter == nil {
		return // a store that cannot count: no gauge rather than a wrong one
	}
	if now := time.Now(); c.read.IsZero() || now.Sub(c.read) >= pendingEvery {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		c.n, c.err = c.counter.Pending(ctx)
		cancel()
		c.read = now
	}
	if c.err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, fmt.Errorf("the ledger's store did not count its pending confirmations: %w", c.err))
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(c.n))
}
