package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/net/netutil"

	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
)

// Defaults of [HTTPOptions] and [StdioOptions].
const (
	// DefaultMaxMessageBytes bounds one request: the largest delete_file
	// call (a 4096-byte path, every byte escaped as \u00XX, and its sealed
	// requestState) is about 25 KiB.
	DefaultMaxMessageBytes = 64 << 10
	// DefaultSessionTimeout is the default TTL of a question: a session
	// idle that long has no question left that could still be answered
	// (see [HTTPOptions.ForTTL]).
	DefaultSessionTimeout = requeststate.DefaultTTL
	// DefaultMaxSessions bounds the stateful sessions (about 12 KiB each).
	DefaultMaxSessions = 1000
	// DefaultRequestTimeout outlives the longest wait for an answer to a
	// question asked in-process (older era): the TTL, plus answerGrace
	// (see [HTTPOptions.ForTTL]).
	DefaultRequestTimeout = DefaultSessionTimeout + answerGrace
	// DefaultMaxConns stays well below the usual 1024 file descriptors.
	DefaultMaxConns          = 256
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	// DefaultMaxHeaderBytes leaves room for a large bearer token, not for
	// net/http's 1 MiB default on every connection.
	DefaultMaxHeaderBytes = 32 << 10
)

// HTTPOptions configures [NewHTTP]. A zero field means its default; a
// negative one is an error.
type HTTPOptions struct {
	// Auth, if set, wraps the MCP handler (for instance go-sdk's
	// auth.RequireBearerToken): every request passes through it after the
	// per-request deadline and before any session is looked up or created.
	Auth func(http.Handler) http.Handler

	// MaxMessageBytes is the largest request body; a larger one gets 413.
	// Default [DefaultMaxMessageBytes].
	MaxMessageBytes int64
	// SessionTimeout closes a stateful session that has had no request in
	// flight for this long. Default [DefaultSessionTimeout]; a server with
	// another TTL sets it with [HTTPOptions.ForTTL].
	SessionTimeout time.Duration
	// MaxSessions caps the live stateful sessions. Default
	// [DefaultMaxSessions].
	MaxSessions int
	// RequestTimeout ends every request (a stream included) this long after
	// it started. It must outlive the TTL for older-era clients to answer a
	// question late. Default [DefaultRequestTimeout]; a server with another
	// TTL sets it with [HTTPOptions.ForTTL].
	RequestTimeout time.Duration

	// The rest apply to [HTTP.Serve] (the http.Server and its listener),
	// not to ServeHTTP.

	// MaxConns caps the open connections. Default [DefaultMaxConns].
	MaxConns int
	// ReadHeaderTimeout bounds reading a request's headers. Default
	// [DefaultReadHeaderTimeout].
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included. Default
	// [DefaultReadTimeout].
	ReadTimeout time.Duration
	// IdleTimeout closes a keep-alive connection with no request for this
	// long. Default [DefaultIdleTimeout].
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers. Default
	// [DefaultMaxHeaderBytes].
	MaxHeaderBytes int

	// Logger receives refusals and the server's own errors; nil means
	// slog.Default().
	Logger *slog.Logger

	// Page, if set, serves every request whose path starts with
	// PagePrefix (which begins and ends with '/'): the approval page
	// (package approve's Handler, mounted at its Prefix), beside the MCP
	// endpoint, under the same deadline and connection limits, but not
	// through Auth: approvers sign in on the page itself, and the
	// caller's bearer token, which the agent holds, must not be what
	// lets anyone in.
	Page       http.Handler
	PagePrefix string
}

// answerGrace is how long a request may outlive the TTL: an older-era call
// waits in-process up to the TTL for its answer, then acts and replies.
const answerGrace = time.Minute

// ForTTL returns o with the two limits tied to the TTL of a question (ttl:
// how long the requestState and the ledger keep it answerable) set, where
// o leaves them zero: SessionTimeout to ttl, as a session idle that long
// has no question left that could still be answered, and RequestTimeout to
// ttl plus a minute, so that an older-era call waiting in-process for its
// answer can still act and reply. A server whose TTL is not
// requeststate.DefaultTTL passes its options through ForTTL; both
// mcp-confirm front ends and the binary do.
func (o HTTPOptions) ForTTL(ttl time.Duration) HTTPOptions {
	if o.SessionTimeout == 0 {
		o.SessionTimeout = ttl
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = ttl + answerGrace
	}
	return o
}

// withDefaults validates o and fills in the defaults.
func (o HTTPOptions) withDefaults() (HTTPOptions, error) {
	err := errors.Join(
		orDefault("MaxMessageBytes", &o.MaxMessageBytes, DefaultMaxMessageBytes),
		orDefault("SessionTimeout", &o.SessionTimeout, DefaultSessionTimeout),
		orDefault("MaxSessions", &o.MaxSessions, DefaultMaxSessions),
		orDefault("RequestTimeout", &o.RequestTimeout, DefaultRequestTimeout),
		orDefault("MaxConns", &o.MaxConns, DefaultMaxConns),
		orDefault("ReadHeaderTimeout", &o.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		orDefault("ReadTimeout", &o.ReadTimeout, DefaultReadTimeout),
		orDefault("IdleTimeout", &o.IdleTimeout, DefaultIdleTimeout),
		orDefault("MaxHeaderBytes", &o.MaxHeaderBytes, DefaultMaxHeaderBytes),
	)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, err
}

// orDefault sets a zero *v to def, and refuses a negative one.
func orDefault[T int | int64 | time.Duration](name string, v *T, def T) error {
	switch {
	case *v < 0:
		return fmt.Errorf("serve: %s %v is negative", name, *v)
	case *v == 0:
		*v = def
	}
	return nil
}

// HTTP is the streamable HTTP front door of one [mcp.Server]. It is an
// http.Handler (for tests, or to mount in a server of your own, which then
// owns the connection limits) and can run its own http.Server ([HTTP.Serve]).
type HTTP struct {
	opts    HTTPOptions
	handler http.Handler
	capped  *sessionCap
}

// NewHTTP returns the front door of s. It starts nothing.
func NewHTTP(s *mcp.Server, opts HTTPOptions) (*HTTP, error) {
	if s == nil {
		return nil, errors.New("serve: nil server")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	get := func(*http.Request) *mcp.Server { return s }
	stateful := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		SessionTimeout:      opts.SessionTimeout,
		MaxRequestBodyBytes: opts.MaxMessageBytes,
		Logger:              opts.Logger,
	})
	stateless := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		MaxRequestBodyBytes: opts.MaxMessageBytes,
		Logger:              opts.Logger,
		// Without it a handler outlives its request's deadline, and go-sdk
		// holds the request open until the handler returns.
		PropagateRequestCancellation: true,
	})
	capped := &sessionCap{server: s, max: opts.MaxSessions, next: stateful, log: opts.Logger}
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w = &answerWriter{ResponseWriter: w}
		}
		if v := r.Header.Get("Mcp-Protocol-Version"); v >= requeststate.ProtocolMRTR {
			stateless.ServeHTTP(w, r)
			return
		}
		capped.ServeHTTP(w, r)
	})
	if opts.Auth != nil {
		h = opts.Auth(h)
	}
	if opts.Page != nil {
		if !strings.HasPrefix(opts.PagePrefix, "/") || !strings.HasSuffix(opts.PagePrefix, "/") {
			return nil, fmt.Errorf("serve: PagePrefix %q: want a path beginning and ending with /", opts.PagePrefix)
		}
		endpoint, page, prefix := h, opts.Page, opts.PagePrefix
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, prefix) {
				page.ServeHTTP(w, r)
				return
			}
			endpoint.ServeHTTP(w, r)
		})
	}
	return &HTTP{opts: opts, handler: deadline(opts.RequestTimeout, h), capped: capped}, nil
}

// Sessions counts the live stateful (older-era) sessions, the ones
// MaxSessions caps and SessionTimeout closes: an O(sessions) scan, for a
// gauge read at a scrape, not for every request.
func (h *HTTP) Sessions() int { return h.capped.live() }

// ServeHTTP serves one request.
func (h *HTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.handler.ServeHTTP(w, r) }

// shutdownTimeout bounds the graceful part of [HTTP.Serve]'s shutdown.
const shutdownTimeout = 5 * time.Second

// Serve serves HTTP on ln, with the connection limits and timeouts of the
// options, until ctx is done; then it stops accepting, gives requests in
// flight a few seconds, and closes the rest. It closes ln. It returns nil
// after ctx is done, or the error that stopped it.
func (h *HTTP) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: h.opts.ReadHeaderTimeout,
		ReadTimeout:       h.opts.ReadTimeout,
		IdleTimeout:       h.opts.IdleTimeout,
		MaxHeaderBytes:    h.opts.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(h.opts.Logger.Handler(), slog.LevelWarn),
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if hs.Shutdown(sctx) != nil {
			hs.Close() // streams still open: cut them
		}
	}()
	// Stops file-descriptor exhaustion by many connections; x/net's
	// LimitListener rather than our own: it is the field's standard one.
	err := hs.Serve(netutil.LimitListener(ln, h.opts.MaxConns))
	close(done)
	<-stopped
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// deadline ends every request d after it starts: its context is cancelled
// then, and its connection's write deadline passes writeGrace later (time
// to write the error that ends it), so that a stream a client never reads,
// or a handler that never returns, cannot hold the connection.
func deadline(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		end := time.Now().Add(d)
		// A handler run outside net/http's server may not support it.
		_ = http.NewResponseController(w).SetWriteDeadline(end.Add(writeGrace))
		ctx, cancel := context.WithDeadline(r.Context(), end)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// writeGrace is how long after its deadline a request may still write.
const writeGrace = 5 * time.Second

// sessionCap refuses a request that would create a stateful session while
// max of them are alive. go-sdk creates one for every POST without an
// Mcp-Session-Id (and closes it again if it was not an initialize).
//
// go-sdk tells nobody when a session closes, so the cap counts the
// server's sessions now and then (an O(sessions) scan) and, in between,
// adds every admitted request: an upper bound, which is exact after each
// count. It counts again only when the bound reaches max, at most every
// recountEvery, so a flood at the cap costs a few scans a second.
type sessionCap struct {
	server *mcp.Server
	max    int
	next   http.Handler
	log    *slog.Logger

	mu        sync.Mutex
	counted   int       // stateful sessions at the last count
	admitted  int       // requests admitted since, each maybe a new session
	inFlight  int       // admitted requests not yet done
	countedAt time.Time // of the last count

	refused    atomic.Int64
	lastLogged atomic.Int64 // unix seconds
}

// recountEvery bounds how often a flood at the cap makes the cap count.
const recountEvery = 10 * time.Millisecond

func (c *sessionCap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
		c.next.ServeHTTP(w, r)
		return
	}
	// Stops memory exhaustion by initialize floods: the timeout frees idle
	// sessions, this bounds how many can be made before it does.
	if !c.admit() {
		c.refuse(w)
		return
	}
	defer func() {
		c.mu.Lock()
		c.inFlight--
		c.mu.Unlock()
	}()
	c.next.ServeHTTP(w, r)
}

// admit reports whether a request may create a session, and counts it.
func (c *sessionCap) admit() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counted+c.admitted >= c.max && time.Since(c.countedAt) >= recountEvery {
		// A request in flight may have created its session already, and
		// is counted twice: the bound errs on the side of refusing.
		c.counted, c.admitted, c.countedAt = c.live(), c.inFlight, time.Now()
	}
	if c.counted+c.admitted >= c.max {
		return false
	}
	c.admitted++
	c.inFlight++
	return true
}

// live counts the server's stateful sessions (stateless requests and stdio
// have no session id).
func (c *sessionCap) live() int {
	n := 0
	for ss := range c.server.Sessions() {
		if ss.ID() != "" {
			n++
		}
	}
	return n
}

// refuse answers 503 with a JSON-RPC error, which go-sdk and TypeScript
// clients both surface, and logs at most once every ten seconds.
func (c *sessionCap) refuse(w http.ResponseWriter) {
	n := c.refused.Add(1)
	if now, last := time.Now().Unix(), c.lastLogged.Load(); now-last >= 10 && c.lastLogged.CompareAndSwap(last, now) {
		c.log.Warn("serve: refusing new sessions: too many live sessions", "max_sessions", c.max, "refused_so_far", n)
	}
	writeError(w, http.StatusServiceUnavailable, -32000, fmt.Sprintf("Too many live sessions (the limit is %d); try again later", c.max))
}

// writeError writes a JSON-RPC error response with id null.
func writeError(w http.ResponseWriter, status, code int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(errorLine(code, message))
}
