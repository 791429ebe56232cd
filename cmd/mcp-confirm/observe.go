package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/storeurl"
	"github.com/mcp-confirm/mcp-confirm/impl/observe"
)

// observeFlags are the metrics flags, shared by the server and the proxy
// (through frontFlags). Traces are configured by the standard OTEL_*
// variables (observe.FromEnv), not by flags.
type observeFlags struct {
	metrics          string // --metrics as given
	allowOffLoopback bool
	addr             string // the address to listen on, once resolved
}

func (o *observeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&o.metrics, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics, on a port of their own (e.g. 127.0.0.1:9464; a bare :PORT\nmeans 127.0.0.1:PORT); a non-loopback address is refused without --allow-metrics-off-loopback.\nTraces are exported when the OTEL_EXPORTER_OTLP_* variables name a collector (docs/operating.md)")
	fs.BoolVar(&o.allowOffLoopback, "allow-metrics-off-loopback", false, "serve --metrics on a non-loopback address: the metrics are unauthenticated, and anyone who can reach the\nport reads the counts")
}

// check resolves --metrics: loopback unless allowed otherwise.
func (o *observeFlags) check() error {
	if o.metrics == "" {
		if o.allowOffLoopback {
			return errors.New("--allow-metrics-off-loopback applies to --metrics")
		}
		return nil
	}
	host, port, err := net.SplitHostPort(o.metrics)
	if err != nil || port == "" {
		return fmt.Errorf("--metrics %q: want HOST:PORT, or :PORT for 127.0.0.1:PORT", o.metrics)
	}
	if host == "" {
		host = "127.0.0.1" // loopback by default, not every interface
	}
	o.addr = net.JoinHostPort(host, port)
	// Unauthenticated counts of every approval, for whoever reaches the port.
	if !loopbackAddr(o.addr) && !o.allowOffLoopback {
		return fmt.Errorf("--metrics %s: not a loopback address; the metrics are unauthenticated: serve them on 127.0.0.1 or ::1, or accept that anyone who reaches the port reads them with --allow-metrics-off-loopback", o.metrics)
	}
	return nil
}

// Limits of the metrics listener: a scraper or two, never a flood.
const (
	metricsMaxConns = 16
	metricsTimeout  = 15 * time.Second
)

// open returns the telemetry the flags and the environment ask for — nil
// (nothing counted or traced) when neither --metrics nor an OTEL_*
// exporter is given — and starts serving --metrics. storeURL is the
// ledger's, service the service's name (the traces' default
// service.name). stop stops serving and sends the spans not yet sent.
func (o *observeFlags) open(ctx context.Context, log *slog.Logger, storeURL, service string) (_ *observe.Telemetry, stop func(), err error) {
	stop = func() {}
	kind, err := storeurl.Kind(storeURL)
	if err != nil {
		return nil, stop, err
	}
	tp, err := observe.FromEnv(ctx, service, confirm.Version())
	if err != nil {
		return nil, stop, err
	}
	opts := observe.Options{Metrics: o.addr != "", Store: kind, Logger: log}
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if tp != nil {
		opts.TracerProvider = tp
		stops = append(stops, func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := tp.Shutdown(ctx); err != nil {
				log.Warn("traces: not every span was sent", "err", err)
			}
		})
		log.Info("exporting traces over OTLP/HTTP (OTEL_* variables)")
	}
	t, err := observe.New(opts)
	if err != nil {
		stop()
		return nil, func() {}, err
	}
	if o.addr == "" {
		return t, stop, nil
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		stop()
		return nil, func() {}, fmt.Errorf("--metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", t.Handler())
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       metricsTimeout,
		WriteTimeout:      metricsTimeout,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    8 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(netutil.LimitListener(ln, metricsMaxConns)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics: server stopped", "err", err)
		}
	}()
	stops = append(stops, func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	})
	// The address line is how scripts learn the port when ADDR ends in :0.
	log.Info("serving metrics", "metrics", "http://"+ln.Addr().String()+"/metrics")
	return t, stop, nil
}
