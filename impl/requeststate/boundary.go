package requeststate

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
	"github.com/mcp-confirm/mcp-confirm/internal/statetoken"
)

// MinSecretLen is the shortest secret New accepts, in bytes.
const MinSecretLen = statetoken.MinSecretLen // 32

// ErrKey: key material or a key file is unusable ([New]). Check it with
// errors.Is.
var ErrKey = statetoken.ErrKey

// Reasons a call is refused besides the token's own ([statetoken.ErrMalformed],
// [statetoken.ErrUnknownKey], [statetoken.ErrAuth]). They go to the server
// log, never to the wire, which only ever carries [Rejection]; tests find
// them there by their text.
var (
	// errExpired: the token's expiry has passed, or its lifetime exceeds the TTL.
	errExpired = errors.New("requeststate: token expired")
	// errFuture: the token's issue time lies beyond the allowed clock skew.
	errFuture = errors.New("requeststate: token issued in the future")
	// errMismatch: the token is bound to another method, target, arguments,
	// audience or principal.
	errMismatch = errors.New("requeststate: token bound to a different request")
	// errPrincipal: the principal could not be determined.
	errPrincipal = errors.New("requeststate: principal unavailable")
)

// ProtocolMRTR is the first MCP protocol version with multi round-trip
// requests, the version whose input_required results carry a requestState.
// Every mcp-confirm package that tells the protocol eras apart compares
// with this one constant.
const ProtocolMRTR = "2026-07-28"

// Defaults for [Options].
const (
	DefaultTTL     = 600 * time.Second
	DefaultMaxSkew = 60 * time.Second
)

// The frozen wire rejection; see [Rejection].
const (
	RejectCode    = jsonrpc.CodeInvalidParams // -32602
	RejectMessage = "Invalid or expired requestState"
	RejectData    = `{"reason":"invalid_request_state"}`
)

// The methods whose results may carry requestState.
const (
	methodCallTool     = "tools/call"
	methodGetPrompt    = "prompts/get"
	methodReadResource = "resources/read"
)

// Options configures a [Boundary]. The zero value of every field except
// Audience is a secure default.
type Options struct {
	// Keys are the secrets, each at least MinSecretLen bytes of randomness.
	// Keys[0] seals; every key verifies. Rotate without downtime in three
	// phases, each fully rolled out before the next: [old, new], then
	// [new, old], then, one TTL later, [new].
	//
	// nil means one random key made by New and held only by this process
	// (tokens do not survive a restart and are refused by other replicas). A
	// non-nil empty slice is an error, so a key file that loaded nothing
	// cannot fall back to an ephemeral key unnoticed.
	Keys [][]byte
	// TTL is how long a sealed token stays valid; 0 means DefaultTTL.
	// Every round is re-sealed with a fresh expiry.
	TTL time.Duration
	// MaxSkew is how far in the future a token's issue time may lie (clock
	// skew between replicas); 0 means DefaultMaxSkew.
	MaxSkew time.Duration
	// Audience names the server tokens are for; required. Server assembly
	// passes the server name. It stops a token minted by another service
	// that shares the keys.
	Audience string
	// Principal returns who is calling. nil means the authenticated user:
	// req.GetExtra().TokenInfo.UserID, "" when unauthenticated. An error
	// refuses the call (fail closed).
	Principal func(ctx context.Context, req mcp.Request) (string, error)
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Logger receives one Warn record per rejection (method and reason,
	// never the token or key material); nil means slog.Default(), so that
	// rejections are visible unless deliberately silenced.
	Logger *slog.Logger
	// Refused, if set, is called once for every call the boundary refuses,
	// with the class of its reason (for metrics: package observe), before
	// the refusal is returned. It must be safe for concurrent use and
	// must not block.
	Refused func(ctx context.Context, method string, class Refusal)
}

// A Boundary seals and verifies requestState. It is safe for concurrent use;
// it holds only keys derived from the secrets, never the secrets themselves.
type Boundary struct {
	ring      *statetoken.Ring // its first key seals
	ttl       int64            // ms
	skew      int64            // ms
	audience  string
	principal func(context.Context, mcp.Request) (string, error)
	now       func() time.Time
	log       *slog.Logger
	refused   func(context.Context, string, Refusal)
}

// New validates opts and returns a Boundary. Errors never contain key bytes.
func New(opts Options) (*Boundary, error) {
	if opts.Audience == "" {
		return nil, errors.New("requeststate: Options.Audience is required")
	}
	ttl, skew := opts.TTL, opts.MaxSkew
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if skew == 0 {
		skew = DefaultMaxSkew
	}
	if ttl < time.Millisecond {
		return nil, fmt.Errorf("requeststate: TTL %v must be at least 1ms", opts.TTL)
	}
	if skew < 0 {
		return nil, fmt.Errorf("requeststate: MaxSkew %v is negative", opts.MaxSkew)
	}
	secrets := opts.Keys
	if secrets == nil {
		secret := make([]byte, MinSecretLen)
		rand.Read(secret) // crypto/rand.Read never fails
		secrets = [][]byte{secret}
	}
	ring, err := statetoken.NewRing(secrets)
	if err != nil {
		return nil, err
	}
	b := &Boundary{
		ring:      ring,
		ttl:       ttl.Milliseconds(),
		skew:      skew.Milliseconds(),
		audience:  opts.Audience,
		principal: opts.Principal,
		now:       opts.Now,
		log:       opts.Logger,
		refused:   opts.Refused,
	}
	if b.principal == nil {
		b.principal = userID
	}
	if b.now == nil {
		b.now = time.Now
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	return b, nil
}

func userID(_ context.Context, req mcp.Request) (string, error) {
	if x := req.GetExtra(); x != nil && x.TokenInfo != nil {
		return x.TokenInfo.UserID, nil
	}
	return "", nil
}

// Rejection returns a new copy of the one error the boundary puts on the
// wire, whatever made it refuse a call:
//
//	{"code":-32602,"message":"Invalid or expired requestState","data":{"reason":"invalid_request_state"}}
func Rejection() *jsonrpc.Error {
	return &jsonrpc.Error{Code: RejectCode, Message: RejectMessage, Data: json.RawMessage(RejectData)}
}

// Binding is what the boundary established for the current call. The
// middleware puts it in the context of every tools/call, prompts/get and
// resources/read it lets through, first round or verified retry.
type Binding struct {
	Method string // tools/call, prompts/get or resources/read
	Target string // tool or prompt name, or resource URI
	// ArgsDigest is ArgumentsDigest of the arguments (of the absent
	// arguments for resources/read; of the decoded string map for
	// prompts/get).
	ArgsDigest string
	// Arguments is CanonicalArguments of the arguments: the bytes
	// ArgsDigest digests, computed once for the call. A handler that
	// forwards them forwards exactly what was bound. Read only.
	Arguments []byte
	// Principal is what the Principal option returned. Server-side only: on
	// the wire it appears only as a salted keyed hash inside the token.
	Principal string
	// Verified is true when this call carried a requestState the boundary
	// verified; the handler's RequestState is then its own plaintext (which
	// may be ""). It is false on first rounds and on the in-process
	// re-invocation by go-sdk's older-era shim, whose RequestState never
	// left the process: a non-empty RequestState that was not Verified can
	// only come from that shim, because every non-empty requestState on the
	// wire is verified or refused before the handler runs.
	Verified bool
}

type bindingKey struct{}

// BindingFrom returns the Binding the middleware put in ctx.
func BindingFrom(ctx context.Context) (Binding, bool) {
	b, ok := ctx.Value(bindingKey{}).(Binding)
	return b, ok
}

// Middleware returns the go-sdk receiving middleware. Add it with
// server.AddReceivingMiddleware, before any middleware that could call the
// handler on its own, so that nothing reaches a handler around it.
func (b *Boundary) Middleware() mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case methodCallTool, methodGetPrompt, methodReadResource:
			default:
				return next(ctx, method, req)
			}
			bind, wire, err := b.bind(ctx, method, req)
			if err != nil && wire == "" && errors.Is(err, ErrArguments) {
				// A first round carries no requestState, so no reason of
				// a token's can leak: say what is wrong with the
				// arguments, and nothing runs.
				b.log.LogAttrs(ctx, slog.LevelInfo, "arguments refused",
					slog.String("method", method), slog.String("reason", err.Error()))
				if b.refused != nil {
					b.refused(ctx, method, RefusedArguments)
				}
				return nil, argumentsError(err)
			}
			if err != nil {
				return nil, b.reject(ctx, method, err)
			}
			if wire != "" {
				state, err := b.verify(wire, bind)
				if err != nil {
					return nil, b.reject(ctx, method, err)
				}
				if req, err = withState(req, state); err != nil {
					return nil, b.reject(ctx, method, err)
				}
				bind.Verified = true
			}
			call := &afterCall{}
			inner := context.WithValue(context.WithValue(ctx, bindingKey{}, bind), afterCallKey{}, call)
			res, err := next(inner, method, req)
			if err == nil {
				res, err = b.sealResult(ctx, method, res, bind)
			}
			call.run(err)
			return res, err
		}
	}
}

type afterCallKey struct{}

// afterCall holds the functions AfterCall registered for one call.
type afterCall struct {
	mu    sync.Mutex
	funcs []func(error)
	done  bool // the call has returned: too late to register
}

func (c *afterCall) run(err error) {
	c.mu.Lock()
	funcs := c.funcs
	c.funcs, c.done = nil, true
	c.mu.Unlock()
	for _, f := range funcs {
		f(err)
	}
}

// AfterCall registers f to run once the call in ctx has returned through
// the boundary's middleware, with the error it ended in: nil when it
// returned a result (an input_required one included). It reports false,
// and f never runs, when ctx did not come through the middleware or its
// call has already returned.
//
// It lets a handler undo what a first round recorded when the answer can
// no longer come back. In the older protocol era go-sdk's shim, inside the
// middleware, puts the first round's input requests to the client within
// the same call and calls the handler again with the answers; if the
// client's dialog fails, the shim ends the call with an error and the
// handler never hears of it.
func AfterCall(ctx context.Context, f func(err error)) bool {
	c, ok := ctx.Value(afterCallKey{}).(*afterCall)
	if !ok {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return false
	}
	c.funcs = append(c.funcs, f)
	return true
}

// ArgumentsMessage begins the message of the JSON-RPC error (code
// -32602) that refuses a first round whose arguments [CanonicalArguments]
// refuses; the reason follows, untrusted text in it escaped by package
// prompt. A call that carries a requestState gets [Rejection] instead,
// whatever is wrong with it.
const ArgumentsMessage = "Invalid arguments: "

// argumentsError says what is wrong with a first round's arguments.
func argumentsError(err error) *jsonrpc.Error {
	reason := strings.TrimPrefix(err.Error(), ErrArguments.Error()+": ")
	if d, ok := errors.AsType[*DuplicateKeyError](err); ok {
		reason = fmt.Sprintf("the key %s is given twice in one object; give each key once", prompt.Value(d.Key, prompt.Options{MaxWidth: 60}))
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: ArgumentsMessage + reason + ". Nothing was done."}
}

func (b *Boundary) reject(ctx context.Context, method string, reason error) error {
	b.log.LogAttrs(ctx, slog.LevelWarn, "requestState rejected",
		slog.String("method", method), slog.String("reason", reason.Error()))
	if b.refused != nil {
		b.refused(ctx, method, refusalOf(reason))
	}
	return Rejection()
}

// bind computes the Binding of a request and returns the requestState it
// carries. The digest covers an allowlist (name/URI and arguments), never
// inputResponses or _meta.
func (b *Boundary) bind(ctx context.Context, method string, req mcp.Request) (Binding, string, error) {
	bind := Binding{Method: method}
	var (
		wire string
		args json.RawMessage
		err  error
	)
	switch p := req.GetParams().(type) {
	case *mcp.CallToolParamsRaw:
		if p == nil || method != methodCallTool {
			return bind, "", fmt.Errorf("%w: params %T for %s", statetoken.ErrMalformed, p, method)
		}
		bind.Target, args, wire = p.Name, p.Arguments, p.RequestState
	case *mcp.GetPromptParams:
		if p == nil || method != methodGetPrompt {
			return bind, "", fmt.Errorf("%w: params %T for %s", statetoken.ErrMalformed, p, method)
		}
		bind.Target, wire = p.Name, p.RequestState
		if args, err = json.Marshal(p.Arguments); err != nil {
			return bind, wire, fmt.Errorf("%w: %v", ErrArguments, err)
		}
	case *mcp.ReadResourceParams:
		if p == nil || method != methodReadResource {
			return bind, "", fmt.Errorf("%w: params %T for %s", statetoken.ErrMalformed, p, method)
		}
		bind.Target, wire = p.URI, p.RequestState
	default:
		return bind, "", fmt.Errorf("%w: params %T for %s", statetoken.ErrMalformed, p, method)
	}
	// wire is returned with every error from here on: the caller must
	// know whether a requestState came with the call before it says why.
	if bind.Arguments, err = CanonicalArguments(args); err != nil {
		return bind, wire, err
	}
	sum := sha256.Sum256(bind.Arguments)
	bind.ArgsDigest = hex.EncodeToString(sum[:])
	if bind.Principal, err = b.principal(ctx, req); err != nil {
		return bind, wire, fmt.Errorf("%w: %v", errPrincipal, err)
	}
	return bind, wire, nil
}

// verify opens token and checks every claim against bind at the current
// time, returning the inner state.
func (b *Boundary) verify(token string, bind Binding) (string, error) {
	c, k, err := b.ring.Open(token)
	if err != nil {
		return "", err
	}
	now := b.now().UnixMilli()
	// Accept conditions are written positively: only what is shown to hold
	// passes.
	if !(c.IssuedAt <= now+b.skew) {
		return "", errFuture
	}
	if !(now < c.Expiry) {
		return "", errExpired
	}
	// Stops a token that outlives the current policy (e.g. after the TTL
	// was shortened). now < Expiry keeps the subtraction from overflowing.
	if !(c.Expiry-b.ttl <= c.IssuedAt) {
		return "", fmt.Errorf("%w: lifetime exceeds TTL", errExpired)
	}
	if !(c.Method == bind.Method) {
		return "", fmt.Errorf("%w: method", errMismatch)
	}
	if !(c.Target == bind.Target) {
		return "", fmt.Errorf("%w: target", errMismatch)
	}
	if !(subtle.ConstantTimeCompare([]byte(c.ArgsDigest), []byte(bind.ArgsDigest)) == 1) {
		return "", fmt.Errorf("%w: arguments", errMismatch)
	}
	if !(c.Audience == b.audience) {
		return "", fmt.Errorf("%w: audience", errMismatch)
	}
	if !k.PrincipalMatches(c.Principal, bind.Principal) {
		return "", fmt.Errorf("%w: principal", errMismatch)
	}
	return c.State, nil
}

// issue seals state for bind with fresh times under the first key.
func (b *Boundary) issue(bind Binding, state string) (string, error) {
	now := b.now().UnixMilli()
	return b.ring.Seal(statetoken.Claims{
		IssuedAt:   now,
		Expiry:     now + b.ttl,
		Method:     bind.Method,
		Target:     bind.Target,
		ArgsDigest: bind.ArgsDigest,
		Audience:   b.audience,
		Principal:  b.ring.PrincipalClaim(bind.Principal),
		State:      state,
	})
}

// withState returns req with its requestState replaced by the verified
// plaintext. The params are copied, never mutated.
func withState(req mcp.Request, state string) (mcp.Request, error) {
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		p := *r.Params
		p.RequestState = state
		return &mcp.CallToolRequest{Session: r.Session, Params: &p, Extra: r.Extra}, nil
	case *mcp.GetPromptRequest:
		p := *r.Params
		p.RequestState = state
		return &mcp.GetPromptRequest{Session: r.Session, Params: &p, Extra: r.Extra}, nil
	case *mcp.ReadResourceRequest:
		p := *r.Params
		p.RequestState = state
		return &mcp.ReadResourceRequest{Session: r.Session, Params: &p, Extra: r.Extra}, nil
	default:
		return nil, fmt.Errorf("%w: request %T", statetoken.ErrMalformed, req)
	}
}

// sealResult seals the RequestState of an input_required result (one with
// InputRequests, even an empty map) for bind. The result is copied, never
// mutated.
func (b *Boundary) sealResult(ctx context.Context, method string, res mcp.Result, bind Binding) (mcp.Result, error) {
	var (
		state *string
		out   mcp.Result
	)
	switch r := res.(type) {
	case *mcp.CallToolResult:
		if r == nil || r.InputRequests == nil {
			return res, nil
		}
		cp := *r
		state, out = &cp.RequestState, &cp
	case *mcp.GetPromptResult:
		if r == nil || r.InputRequests == nil {
			return res, nil
		}
		cp := *r
		state, out = &cp.RequestState, &cp
	case *mcp.ReadResourceResult:
		if r == nil || r.InputRequests == nil {
			return res, nil
		}
		cp := *r
		state, out = &cp.RequestState, &cp
	default:
		return res, nil
	}
	tok, err := b.issue(bind, *state)
	if err != nil {
		// Never let plaintext state out unsealed.
		b.log.LogAttrs(ctx, slog.LevelError, "requestState not sealed",
			slog.String("method", method), slog.String("reason", err.Error()))
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error"}
	}
	*state = tok
	return out, nil
}
