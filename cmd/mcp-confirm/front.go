package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/approve"
	"github.com/mcp-confirm/mcp-confirm/impl/observe"
	"github.com/mcp-confirm/mcp-confirm/impl/serve"
)

// frontFlags are the front door's transport and limits, shared by the
// server and the proxy: --http and every limit of package serve.
type frontFlags struct {
	httpAddr          string
	maxMessageBytes   int64
	sessionTimeout    time.Duration // 0 unless given: ttl's (serve.HTTPOptions.ForTTL)
	requestTimeout    time.Duration // 0 unless given: ttl's
	ttl               time.Duration // the --ttl value, once resolved
	maxSessions       int
	maxConns          int
	readHeaderTimeout time.Duration
	readTimeout       time.Duration
	idleTimeout       time.Duration
	maxHeaderBytes    int
	auth              authFlags    // auth.go
	observe           observeFlags // observe.go
	// page, if set (by out-of-band approval, approval.go), is served
	// beside the MCP endpoint under its prefix, outside auth.
	page *approve.Handler
	// tel, if set (by --metrics), counts the HTTP sessions.
	tel *observe.Telemetry
}

// register defines the flags on fs.
func (f *frontFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.httpAddr, "http", "", "serve streamable HTTP on this address (e.g. 127.0.0.1:8080) instead of stdio; both protocol eras are served")
	fs.Int64Var(&f.maxMessageBytes, "max-message-bytes", serve.DefaultMaxMessageBytes, "largest request accepted: a larger HTTP body gets 413, a longer stdio line a -32600 error")
	fs.DurationVar(&f.sessionTimeout, "session-timeout", 0, "HTTP: close an older-era session after this long without a request (default: the --ttl value)")
	fs.DurationVar(&f.requestTimeout, "request-timeout", 0, "HTTP: end every request, a stream included, this long after it started (default: the --ttl value plus 1m)")
	fs.IntVar(&f.maxSessions, "max-sessions", serve.DefaultMaxSessions, "HTTP: most older-era sessions alive at once; an initialize beyond them gets 503")
	fs.IntVar(&f.maxConns, "max-conns", serve.DefaultMaxConns, "HTTP: most connections open at once; more wait until one closes")
	fs.DurationVar(&f.readHeaderTimeout, "read-header-timeout", serve.DefaultReadHeaderTimeout, "HTTP: time allowed to read a request's headers")
	fs.DurationVar(&f.readTimeout, "read-timeout", serve.DefaultReadTimeout, "HTTP: time allowed to read a whole request, body included")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", serve.DefaultIdleTimeout, "HTTP: close a keep-alive connection idle this long")
	fs.IntVar(&f.maxHeaderBytes, "max-header-bytes", serve.DefaultMaxHeaderBytes, "HTTP: largest request headers accepted")
	f.auth.register(fs)
	f.observe.register(fs)
}

// resolve checks the flags fs parsed and records ttl, to which the unset
// timeouts are tied.
// Every limit must be positive: none can be switched off.
func (f *frontFlags) resolve(fs *flag.FlagSet, ttl time.Duration) error {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	for name, v := range map[string]int64{
		"max-message-bytes":   f.maxMessageBytes,
		"session-timeout":     int64(f.sessionTimeout),
		"request-timeout":     int64(f.requestTimeout),
		"max-sessions":        int64(f.maxSessions),
		"max-conns":           int64(f.maxConns),
		"read-header-timeout": int64(f.readHeaderTimeout),
		"read-timeout":        int64(f.readTimeout),
		"idle-timeout":        int64(f.idleTimeout),
		"max-header-bytes":    int64(f.maxHeaderBytes),
	} {
		if set[name] && v <= 0 {
			return fmt.Errorf("--%s %s: must be positive", name, fs.Lookup(name).Value)
		}
	}
	if f.maxMessageBytes > 1<<30 {
		return fmt.Errorf("--max-message-bytes %d: at most 1 GiB", f.maxMessageBytes)
	}
	if err := f.auth.check(f.httpAddr); err != nil {
		return err
	}
	if err := f.observe.check(); err != nil {
		return err
	}
	f.ttl = ttl
	return nil
}

// httpOptions are the HTTP front door's options, with the timeouts not
// given tied to the TTL; auth may be nil.
func (f *frontFlags) httpOptions(log *slog.Logger, auth func(http.Handler) http.Handler) serve.HTTPOptions {
	o := serve.HTTPOptions{
		Auth:              auth,
		MaxMessageBytes:   f.maxMessageBytes,
		SessionTimeout:    f.sessionTimeout,
		MaxSessions:       f.maxSessions,
		RequestTimeout:    f.requestTimeout,
		MaxConns:          f.maxConns,
		ReadHeaderTimeout: f.readHeaderTimeout,
		ReadTimeout:       f.readTimeout,
		IdleTimeout:       f.idleTimeout,
		MaxHeaderBytes:    f.maxHeaderBytes,
		Logger:            log,
	}.ForTTL(f.ttl)
	if f.page != nil {
		o.Page, o.PagePrefix = f.page, f.page.Prefix()
	}
	return o
}

// serve serves s on stdio, or over streamable HTTP when --http was given,
// until ctx is done or the client ends stdio. auth (nil: the one the auth
// flags ask for) wraps the HTTP handler. attrs are logged with the serving
// line.
func (f *frontFlags) serve(ctx context.Context, s *mcp.Server, auth func(http.Handler) http.Handler, stdin io.Reader, stdout io.Writer, log *slog.Logger, attrs ...any) error {
	if f.httpAddr == "" {
		log.Info("serving MCP on stdio", attrs...)
		return serve.Stdio(ctx, s, stdin, stdout, serve.StdioOptions{MaxMessageBytes: int(f.maxMessageBytes), Logger: log})
	}
	if auth == nil {
		mw, done, err := f.auth.middleware(ctx, f.httpAddr, log)
		if err != nil {
			return err
		}
		defer done()
		auth = mw
	}
	h, err := serve.NewHTTP(s, f.httpOptions(log, auth))
	if err != nil {
		return err
	}
	f.tel.CountSessions(h.Sessions)
	ln, err := net.Listen("tcp", f.httpAddr)
	if err != nil {
		return err
	}
	// The address line is how scripts learn the port when ADDR ends in :0.
	log.Info("serving MCP over streamable HTTP", append([]any{"addr", "http://" + ln.Addr().String()}, attrs...)...)
	return h.Serve(ctx, ln)
}
