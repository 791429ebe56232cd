// Package confirmtest is the contract every confirming front end must keep:
// the reference server and the proxy run the same tests, through real
// go-sdk clients of both protocol eras, in memory and over streamable HTTP
// through package serve, with the requestState boundary in the chain.
//
// The cases are the attacks and accidents that come to every front end
// alike, whatever its action: an approval spent twice ([SpentTwice]) or
// replayed onto other arguments ([ReplayOntoOtherArguments]), 32 clients
// racing one approval ([ConcurrentRedeem]), a lost reply and its retry
// ([LostReply]), a crash between redeeming an approval and acting on it
// ([Crash], and with Redis and PostgreSQL [CrashShared]), replicas sharing
// a store ([Replicas]), another user's approval ([PrincipalMismatch]), a
// declined or cancelled question ([Declined]), a client that cannot be asked
// ([WithoutElicitation]) and an answer after the TTL ([Expired]); and
// out-of-band approval: approved on the page after a retry told to wait
// ([ApproveOutOfBand]), declined there or withdrawn by the client
// ([ApproveDeclined]), four-eyes with the requester refused
// ([ApproveFourEyes]), the in-band yes and the approval both
// ([ApproveBoth]), and asked on one replica, approved on another
// ([ApproveAcrossReplicas]). Each
// asserts which layer refused — the boundary's one JSON-RPC error, or a
// tool error — and how many times the action took effect, counted by the
// front end's own test ([FrontEnd.Effects]: files deleted, calls the
// upstream received), never by the ledger alone. [Run] runs them all.
//
// The suite owns everything a front end shares ([confirm.Setup]): the
// store, the clock, the principal source, the keys, the name and the ledger
// trace. It makes the clock move (leases, the TTL), makes a crash (the
// store handle it passes one replica commits a Redeem and then fails, as
// a replica dying right after would leave it) and opens the shared stores.
// A front end's test supplies a [Factory]; it keeps only the tests of what
// is its own. The reference server (internal/server) and the proxy
// (impl/proxy) run it as TestFrontEndSuite; the suite's negative control,
// TestSuiteCatchesBrokenFrontEnds, runs it against nine broken front ends
// and requires each to fail exactly the cases that catch its fault (one
// that acts without redeeming, one with a ledger of its own, one that
// acts before the out-of-band approval, …).
//
// The out-of-band cases give the front ends an approval page of the
// suite's own, whose approvers decide through the ledger it was made
// over ([ledger.Ledger.Decide]), as the real page does once they have
// signed in: the cases check the front end's side, not the page's.
//
// The shared-store cases run against every store whose URL is set in
// MCP_CONFIRM_REDIS_URL and MCP_CONFIRM_POSTGRES_URL, and skip, naming
// the variable, where it is unset; each deployment gets a namespace of its
// own. What the suite cannot check: anything about what the action does
// beyond how often it took effect (the front end's re-checks, its
// question's wording), and anything a front end does outside the
// [confirm.Setup] it is given.
package confirmtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/serve"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// Factory makes front ends for the suite.
type Factory struct {
	// New returns a new front end built with setup, used as it is — its
	// store, clock, principal source, keys, name, lease, logger and ledger
	// observer are the suite's — acting on a target of its own (a root
	// directory, an upstream server). It registers its own cleanup.
	New func(t testing.TB, setup confirm.Setup) *FrontEnd
	// Replica returns a second front end built with setup, acting on what
	// fe (which New made) acts on, as another replica of one deployment
	// would: the suite gives both the same name and keys, and one store.
	Replica func(t testing.TB, fe *FrontEnd, setup confirm.Setup) *FrontEnd
}

// A FrontEnd is a running front end, the confirmed call the suite makes
// of it, and how to see what that call did.
type FrontEnd struct {
	// Server is the go-sdk server, its boundary in the chain. The suite
	// connects clients to it in memory, and over streamable HTTP through
	// serve.NewHTTP.
	Server *mcp.Server
	// Call returns a confirmed tools/call about subject ("a", "b", …): the
	// tool and its arguments, a map[string]any. Calls about different
	// subjects have different arguments.
	Call func(subject string) *mcp.CallToolParams
	// Ready, if set, makes subject ready to be acted on (a file created at
	// its path). The suite calls it before it first calls about subject,
	// and again after an effect, so that a second action would take
	// effect too and be counted.
	Ready func(subject string)
	// Effects returns how many times the action on subject has taken
	// effect, as the target saw it (files deleted, calls the upstream
	// received).
	Effects func(subject string) int
}

// Run runs every case against the front ends f makes.
func Run(t *testing.T, f Factory) {
	for _, c := range []struct {
		name string
		run  func(*testing.T, Factory)
	}{
		{"SpentTwice", SpentTwice},
		{"ReplayOntoOtherArguments", ReplayOntoOtherArguments},
		{"ConcurrentRedeem", ConcurrentRedeem},
		{"LostReply", LostReply},
		{"Crash", Crash},
		{"CrashShared", CrashShared},
		{"Replicas", Replicas},
		{"PrincipalMismatch", PrincipalMismatch},
		{"Declined", Declined},
		{"WithoutElicitation", WithoutElicitation},
		{"Expired", Expired},
		{"ApproveOutOfBand", ApproveOutOfBand},
		{"ApproveDeclined", ApproveDeclined},
		{"ApproveFourEyes", ApproveFourEyes},
		{"ApproveBoth", ApproveBoth},
		{"ApproveAcrossReplicas", ApproveAcrossReplicas},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, f) })
	}
}

// Protocol eras and transports under test.
var (
	eras       = []string{mcptest.EraMRTR, mcptest.EraLegacy}
	transports = []string{mcptest.InMemory, mcptest.HTTP}
)

// eachEraAndTransport runs f as subtest era/transport for both protocol
// eras over both transports.
func eachEraAndTransport(t *testing.T, f func(t *testing.T, era, transport string)) {
	for _, era := range eras {
		for _, transport := range transports {
			t.Run(era+"/"+transport, func(t *testing.T) { f(t, era, transport) })
		}
	}
}

// How confirm words its answers, as far as the suite relies on it.
const (
	markEarlier   = "result of that earlier execution" // a recorded result, given back
	inProgress    = "being acted on right now"
	inDoubt       = "may or may not have happened"
	checkFirst    = "check before asking again"
	notConfirmed  = "Not confirmed"
	declined      = "declined earlier"
	cannotAsk     = "cannot show a confirmation dialog"
	ledgerUnavail = "ledger is unavailable" // a Redeem that failed, as the crash looks
)

var testKey = []byte("confirmtest: a requestState key of 32 bytes or more")

// A clock is a settable clock, started at the real time.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// A deployment is the front ends of one case: one name, one key, one
// ledger trace (every replica's events), one log.
type deployment struct {
	t      *testing.T
	f      Factory
	name   string
	clock  *clock // nil: the real clock (shared stores decide on their own)
	log    *mcptest.SyncBuffer
	mu     sync.Mutex
	events []ledger.Event
	// principals, if set, authenticate HTTP clients by bearer token
	// (token → user); with byName, the front ends name the caller by its
	// client's name instead, as no one authenticates in memory.
	principals map[string]string
	byName     bool
	// approval, if set, is the approval the front ends need, approved on
	// pages (the out-of-band cases).
	approval *confirm.Approval
	pages    *pages
}

func newDeployment(t *testing.T, f Factory) *deployment {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	d := &deployment{t: t, f: f, name: "confirmtest-" + hex.EncodeToString(b), clock: newClock(), log: &mcptest.SyncBuffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the front ends' log:\n%s", d.log)
		}
	})
	return d
}

func (d *deployment) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(d.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// setup is what the suite builds every front end of d with, on store
// (nil: one of the front end's own, in memory, on d's clock).
func (d *deployment) setup(store ledger.Store, lease time.Duration) confirm.Setup {
	s := confirm.Setup{
		Name:   d.name,
		Keys:   [][]byte{testKey},
		TTL:    ttl,
		Store:  store,
		Lease:  lease,
		Logger: d.logger(),
		Observe: func(ev ledger.Event) {
			d.mu.Lock()
			d.events = append(d.events, ev)
			d.mu.Unlock()
		},
	}
	if d.clock != nil {
		s.Now = d.clock.Now
	}
	if d.byName {
		s.Principal = clientName
	}
	if d.approval != nil {
		s.Approval = *d.approval
		s.Page = d.pages.page
	}
	return s
}

// clientName is the principal source of PrincipalMismatch in memory,
// where no one authenticates: the client's name. Over HTTP the front end
// keeps its default, the user go-sdk's auth (in serve's Auth slot) found
// in the bearer token.
func clientName(_ context.Context, req mcp.Request) (string, error) {
	if r, ok := req.(interface{ ClientInfo() *mcp.Implementation }); ok && r.ClientInfo() != nil {
		return "client " + r.ClientInfo().Name, nil
	}
	return "", nil
}

// frontEnd makes a front end of d on store (nil: the front end's default,
// in memory on d's clock), with lease (0: the default).
func (d *deployment) frontEnd(store ledger.Store, lease time.Duration) *FrontEnd {
	d.t.Helper()
	fe := d.f.New(d.t, d.setup(store, lease))
	if fe == nil || fe.Server == nil || fe.Call == nil || fe.Effects == nil {
		d.t.Fatal("Factory.New returned a FrontEnd without Server, Call or Effects")
	}
	return fe
}

// replica makes another replica of fe on store.
func (d *deployment) replica(fe *FrontEnd, store ledger.Store, lease time.Duration) *FrontEnd {
	d.t.Helper()
	if d.f.Replica == nil {
		d.t.Fatal("Factory.Replica is nil: the replica cases need it")
	}
	return d.f.Replica(d.t, fe, d.setup(store, lease))
}

// count counts the ledger's events of action a with result r.
func (d *deployment) count(a ledger.Action, r ledger.Result) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, ev := range d.events {
		if ev.Action == a && ev.Result == r {
			n++
		}
	}
	return n
}

// issued is how many confirmations the ledgers issued.
func (d *deployment) issued() int { return d.count(ledger.ActionIssue, ledger.ResultOK) }

// event is an action, its result and (for Complete) its outcome.
type event struct {
	action  ledger.Action
	result  ledger.Result
	outcome ledger.OutcomeKind
}

// wantEvents asserts that the ledgers traced exactly these events, as many
// times each, among their Redeem, Cancel and Complete events.
func (d *deployment) wantEvents(t *testing.T, want map[event]int) {
	t.Helper()
	d.mu.Lock()
	got := map[event]int{}
	for _, ev := range d.events {
		if ev.Action != ledger.ActionIssue {
			got[event{ev.Action, ev.Result, ev.Outcome}]++
		}
	}
	d.mu.Unlock()
	same := len(got) == len(want)
	for k, n := range want {
		same = same && got[k] == n
	}
	if !same {
		t.Fatalf("ledger events %v, want %v", got, want)
	}
}

// session says how to connect a client.
type session struct {
	era       string // default EraMRTR
	transport string // default InMemory
	answer    *mcptest.Answerer
	manual    bool   // 2026-07-28 only: return input_required to the test instead of retrying
	user      string // with principals: whose client (its token over HTTP, its name in memory)
	url       bool   // the client shows URL elicitations (an approval page's link) too
}

// connect starts a real go-sdk client session to fe.
func (d *deployment) connect(fe *FrontEnd, s session) *mcp.ClientSession {
	d.t.Helper()
	o := mcptest.ClientOptions{Era: s.era, Transport: s.transport, Answer: s.answer, Manual: s.manual, URL: s.url}
	if s.user != "" {
		o.Name = s.user
	}
	return d.connectWith(fe, s.transport, o)
}

// connectWith starts a real go-sdk client session to fe over transport,
// with o (its Transport ignored), authenticated as o.Name where d knows
// users.
func (d *deployment) connectWith(fe *FrontEnd, transport string, o mcptest.ClientOptions) *mcp.ClientSession {
	d.t.Helper()
	o.Transport = transport
	var h http.Handler
	if transport == mcptest.HTTP {
		opts := serve.HTTPOptions{Logger: d.logger()}.ForTTL(ttl)
		if d.principals != nil {
			opts.Auth = auth.RequireBearerToken(d.verify, nil)
		}
		hh, err := serve.NewHTTP(fe.Server, opts)
		if err != nil {
			d.t.Fatal(err)
		}
		h = hh
	}
	if o.Name != "" {
		for token, user := range d.principals {
			if user == o.Name {
				o.Header = http.Header{"Authorization": {"Bearer " + token}}
			}
		}
	}
	return mcptest.Connect(d.t, fe.Server, h, o)
}

// verify is the bearer token verifier of PrincipalMismatch.
func (d *deployment) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	user, ok := d.principals[token]
	if !ok {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: user, Expiration: time.Now().Add(time.Hour)}, nil
}

// call makes fe's call about subject.
func call(cs *mcp.ClientSession, fe *FrontEnd, subject string) (*mcp.CallToolResult, error) {
	return cs.CallTool(context.Background(), fe.Call(subject))
}

// retry answers a question by hand, with state, as a 2026-07-28 client
// does; p is the call it retries.
func retry(cs *mcp.ClientSession, p *mcp.CallToolParams, state string, answer *mcp.ElicitResult) (*mcp.CallToolResult, error) {
	q := *p
	q.InputResponses = mcp.InputResponseMap{confirm.InputID: answer}
	q.RequestState = state
	return cs.CallTool(context.Background(), &q)
}

// ask makes fe's call about subject, first round by hand, and returns the
// sealed state.
func ask(t *testing.T, cs *mcp.ClientSession, fe *FrontEnd, subject string) string {
	t.Helper()
	res, err := call(cs, fe, subject)
	if err != nil {
		t.Fatalf("first round: %v", err)
	}
	if !res.NeedsInput() || res.RequestState == "" {
		t.Fatalf("first round: want input_required with a requestState, got %s", mcptest.Describe(res))
	}
	if _, ok := res.InputRequests[confirm.InputID].(*mcp.ElicitParams); !ok {
		t.Fatalf("first round: no elicitation in %s", mcptest.Describe(res))
	}
	return res.RequestState
}

// ready makes subject ready to be acted on.
func ready(fe *FrontEnd, subject string) {
	if fe.Ready != nil {
		fe.Ready(subject)
	}
}

// wantEffects asserts that the action on subject took effect n times.
func wantEffects(t *testing.T, fe *FrontEnd, subject string, n int) {
	t.Helper()
	if got := fe.Effects(subject); got != n {
		t.Fatalf("the action on %s took effect %d times, want %d", subject, got, n)
	}
}

// wantActed asserts that the call acted (a result, neither an error nor a
// question) and that the action on subject has now taken effect n times;
// it returns the result's text.
func wantActed(t *testing.T, fe *FrontEnd, subject string, n int, res *mcp.CallToolResult, err error) string {
	t.Helper()
	if err != nil || res == nil || res.IsError || res.NeedsInput() {
		t.Fatalf("want the action's result, got err=%v res=%s", err, mcptest.Describe(res))
	}
	wantEffects(t, fe, subject, n)
	return mcptest.Text(res)
}

// wantReplayed asserts that a retry was answered with first, the result
// of the approval's one execution, marked as the earlier execution's.
func wantReplayed(t *testing.T, res *mcp.CallToolResult, err error, first string) {
	t.Helper()
	if err != nil || res == nil || res.IsError || res.NeedsInput() {
		t.Fatalf("want the earlier result, got err=%v res=%s", err, mcptest.Describe(res))
	}
	if got := mcptest.Text(res); !strings.Contains(got, markEarlier) || !strings.HasSuffix(got, first) {
		t.Fatalf("retry answered %q, want %q marked as the earlier execution's", got, first)
	}
}

// wantNotConfirmed asserts the answer to a declined question.
func wantNotConfirmed(t *testing.T, res *mcp.CallToolResult, err error) {
	t.Helper()
	if err != nil || res == nil || res.IsError || res.NeedsInput() || !strings.Contains(mcptest.Text(res), notConfirmed) {
		t.Fatalf("want %q, got err=%v res=%s", notConfirmed, err, mcptest.Describe(res))
	}
}

// sharedStores lists the shared stores under test, kind → URL ("" when
// its variable is unset).
func sharedStores() map[string]string {
	return map[string]string{
		"redis":    os.Getenv("MCP_CONFIRM_REDIS_URL"),
		"postgres": os.Getenv("MCP_CONFIRM_POSTGRES_URL"),
	}
}
