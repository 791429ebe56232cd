package confirmtest

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// SpentTwice checks that the same approval used twice acts once, even
// after the subject was made ready again (a file recreated at the same
// path): the second use is answered with the first one's result, marked
// as the earlier execution's. The question is asked on a 2026-07-28
// session (only that era's client holds the state); the approval is used,
// and then replayed, on sessions of the era under test.
func SpentTwice(t *testing.T, f Factory) {
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		d := newDeployment(t, f)
		fe := d.frontEnd(nil, 0)
		ready(fe, "a")
		state := ask(t, d.connect(fe, session{transport: transport, manual: true, answer: mcptest.Accept()}), fe, "a")
		p := fe.Call("a")
		res, err := retry(d.connect(fe, session{era: era, transport: transport, manual: true, answer: mcptest.Accept()}), p, state, mcptest.Yes())
		first := wantActed(t, fe, "a", 1, res, err)

		ready(fe, "a") // a second action would take effect again
		res, err = retry(d.connect(fe, session{era: era, transport: transport, manual: true, answer: mcptest.Accept()}), p, state, mcptest.Yes())
		wantReplayed(t, res, err, first)
		wantEffects(t, fe, "a", 1)
	})
}

// ReplayOntoOtherArguments checks that the approval for one call, replayed
// onto another — another subject's arguments, the same arguments and one
// more, the same arguments to another tool (one the front end lists, if it
// lists another: a tool it would run unasked) — is refused by the
// boundary, before the ledger: nothing acts, nothing is spent, and the
// approval still acts for the call it was given for.
func ReplayOntoOtherArguments(t *testing.T, f Factory) {
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		d := newDeployment(t, f)
		fe := d.frontEnd(nil, 0)
		ready(fe, "a")
		ready(fe, "b")
		state := ask(t, d.connect(fe, session{transport: transport, manual: true, answer: mcptest.Accept()}), fe, "a")
		cs := d.connect(fe, session{era: era, transport: transport, manual: true, answer: mcptest.Accept()})

		extra, tool := fe.Call("a"), fe.Call("a")
		args, ok := extra.Arguments.(map[string]any)
		if !ok {
			t.Fatalf("Call's Arguments are %T, want map[string]any", extra.Arguments)
		}
		extra.Arguments = maps.Clone(args)
		extra.Arguments.(map[string]any)["confirmtest"] = "one more"
		tool.Name = otherTool(t, cs, tool.Name)
		for _, r := range []struct {
			name string
			p    *mcp.CallToolParams
		}{{"another subject", fe.Call("b")}, {"one more argument", extra}, {"another tool", tool}} {
			t.Run(r.name, func(t *testing.T) {
				t.Logf("replayed onto %s(%v)", r.p.Name, r.p.Arguments)
				res, err := retry(cs, r.p, state, mcptest.Yes())
				mcptest.WantBoundaryRefusal(t, res, err)
			})
		}
		wantEffects(t, fe, "a", 0)
		wantEffects(t, fe, "b", 0)
		if n := d.count(ledger.ActionRedeem, ledger.ResultOK); n != 0 {
			t.Fatalf("%d replays reached the ledger and were redeemed", n)
		}

		// The refused replays spent nothing: the real answer still acts.
		res, err := retry(cs, fe.Call("a"), state, mcptest.Yes())
		wantActed(t, fe, "a", 1, res, err)
		wantEffects(t, fe, "b", 0)
	})
}

// otherTool returns a tool cs lists other than name, or, when it lists
// none, a name no tool has.
func otherTool(t *testing.T, cs *mcp.ClientSession, name string) string {
	t.Helper()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	for _, tool := range tools.Tools {
		if tool.Name != name {
			return tool.Name
		}
	}
	return name + "_other"
}

// ConcurrentRedeem checks that 32 clients racing one approval, half of
// them on older-era sessions, act once: every other racer is answered,
// acting on nothing, with that action's result marked as the earlier
// execution's, or "in progress" while it runs; the ledger redeems once and
// records one outcome. In "while acting" the store holds the outcome back
// until every racer has redeemed: all the others are answered in progress.
func ConcurrentRedeem(t *testing.T, f Factory) {
	const racers = 32
	for _, transport := range transports {
		for _, held := range []bool{false, true} {
			name := transport + "/done first"
			if held {
				name = transport + "/while acting"
			}
			t.Run(name, func(t *testing.T) {
				d := newDeployment(t, f)
				var store ledger.Store
				if held {
					store = &heldStore{Store: ledger.NewMemory(ledger.MemoryOptions{Now: d.clock.Now}), until: racers, spent: make(chan struct{})}
				}
				fe := d.frontEnd(store, 0)
				ready(fe, "a")
				state := ask(t, d.connect(fe, session{transport: transport, manual: true, answer: mcptest.Accept()}), fe, "a")
				sessions := make([]*mcp.ClientSession, racers)
				for i := range sessions {
					sessions[i] = d.connect(fe, session{era: eras[i%2], transport: transport, manual: true, answer: mcptest.Accept()})
				}
				answers := d.raceOnce(t, fe, sessions, "a", state)
				if held && answers[inProgress] != racers-1 {
					t.Fatalf("while acting, %d of %d retries were answered in progress", answers[inProgress], racers-1)
				}
			})
		}
	}
}

// heldStore holds every Complete until the store has answered until
// Spends: an action that outlasts a race of retries.
type heldStore struct {
	ledger.Store
	until int
	mu    sync.Mutex
	n     int
	spent chan struct{} // closed at the until-th Spend
}

func (h *heldStore) Spend(ctx context.Context, id ledger.ID, to ledger.State, lease time.Duration) (ledger.Record, error) {
	r, err := h.Store.Spend(ctx, id, to, lease)
	h.mu.Lock()
	if h.n++; h.n == h.until {
		close(h.spent)
	}
	h.mu.Unlock()
	return r, err
}

func (h *heldStore) Complete(ctx context.Context, id ledger.ID, o ledger.Outcome) error {
	select {
	case <-h.spent:
	case <-time.After(10 * time.Second):
	}
	return h.Store.Complete(ctx, id, o)
}

// raceOnce has every session retry the approval state of fe's call about
// subject at once, and asserts that exactly one acted, and that every
// other was answered, acting on nothing, with that action's result marked
// as the earlier execution's, or "in progress" while it ran; that the
// action took effect once; and that the ledgers redeemed the approval once
// and recorded one outcome. It returns how many retries got each answer
// but the action's.
func (d *deployment) raceOnce(t *testing.T, fe *FrontEnd, sessions []*mcp.ClientSession, subject, state string) map[string]int {
	t.Helper()
	redeemed0, completed0 := d.count(ledger.ActionRedeem, ledger.ResultOK), d.count(ledger.ActionComplete, ledger.ResultOK)
	p := fe.Call(subject)
	var mu sync.Mutex
	var acted []string // texts of the answers that acted
	answers := map[string]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, cs := range sessions {
		wg.Go(func() {
			<-start
			res, err := retry(cs, p, state, mcptest.Yes())
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && !res.IsError && !res.NeedsInput() && strings.Contains(mcptest.Text(res), markEarlier):
				answers[mcptest.Text(res)]++
			case err == nil && !res.IsError && !res.NeedsInput():
				acted = append(acted, mcptest.Text(res))
			case err == nil && res.IsError && strings.Contains(mcptest.Text(res), inProgress):
				answers[inProgress]++
			default:
				t.Errorf("unexpected outcome: err=%v res=%s", err, mcptest.Describe(res))
			}
		})
	}
	close(start)
	wg.Wait()
	if len(acted) != 1 {
		t.Fatalf("%d racers acted (%q), want one; the other answers: %v", len(acted), acted, answers)
	}
	for a, n := range answers {
		if a != inProgress && !strings.HasSuffix(a, acted[0]) {
			t.Fatalf("%d retries were answered %q; the one action returned %q", n, a, acted[0])
		}
	}
	t.Logf("one action; the other %d retries answered %v", len(sessions)-1, answers)
	wantEffects(t, fe, subject, 1)
	redeemed := d.count(ledger.ActionRedeem, ledger.ResultOK) - redeemed0
	completed := d.count(ledger.ActionComplete, ledger.ResultOK) - completed0
	if redeemed != 1 || completed != 1 {
		t.Fatalf("the ledgers redeemed %d times and recorded %d outcomes, want 1 and 1", redeemed, completed)
	}
	return answers
}

// LostReply checks a client that lost the reply to an approved call and
// retries the same approval: on 2026-07-28 it gets the action's result
// again, marked as the earlier execution's, twice, and nothing acts again
// (one Redeem and one Complete in the ledger, the retries answered from
// the record). In the older era the state never reaches the client: its
// retry is a new call, asked anew (declined here); a state asked for on a
// 2026-07-28 session and sent again on an older one gets the recorded
// answer, without a question.
func LostReply(t *testing.T, f Factory) {
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		d := newDeployment(t, f)
		fe := d.frontEnd(nil, 0)
		ready(fe, "a")
		p := fe.Call("a")
		if era == mcptest.EraMRTR {
			cs := d.connect(fe, session{transport: transport, manual: true, answer: mcptest.Accept()})
			state := ask(t, cs, fe, "a")
			res, err := retry(cs, p, state, mcptest.Yes())
			first := wantActed(t, fe, "a", 1, res, err)
			ready(fe, "a")
			for range 2 {
				res, err = retry(cs, p, state, mcptest.Yes())
				wantReplayed(t, res, err, first)
				wantEffects(t, fe, "a", 1)
			}
			d.wantEvents(t, map[event]int{
				{ledger.ActionRedeem, ledger.ResultOK, 0}:                    1,
				{ledger.ActionComplete, ledger.ResultOK, ledger.OutcomeDone}: 1,
				{ledger.ActionRedeem, ledger.ResultDone, ledger.OutcomeDone}: 2,
			})
			return
		}
		res, err := call(d.connect(fe, session{era: era, transport: transport, answer: mcptest.Accept()}), fe, "a")
		wantActed(t, fe, "a", 1, res, err)
		ready(fe, "a")
		ans := mcptest.Decline()
		res, err = call(d.connect(fe, session{era: era, transport: transport, answer: ans}), fe, "a")
		wantNotConfirmed(t, res, err)
		if n := len(ans.Questions()); n != 1 {
			t.Fatalf("the older era's retry was asked %d times, want once: a new question", n)
		}
		wantEffects(t, fe, "a", 1)

		modern := d.connect(fe, session{transport: transport, manual: true, answer: mcptest.Accept()})
		state := ask(t, modern, fe, "a")
		res, err = retry(modern, p, state, mcptest.Yes())
		first := wantActed(t, fe, "a", 2, res, err)
		ready(fe, "a")
		res, err = retry(d.connect(fe, session{era: era, transport: transport, answer: ans}), p, state, mcptest.Yes())
		wantReplayed(t, res, err, first)
		wantEffects(t, fe, "a", 2)
		if n := len(ans.Questions()); n != 1 {
			t.Fatalf("the replay on the older era asked %d more questions", n-1)
		}
		d.wantEvents(t, map[event]int{
			{ledger.ActionRedeem, ledger.ResultOK, 0}:                    2,
			{ledger.ActionComplete, ledger.ResultOK, ledger.OutcomeDone}: 2,
			{ledger.ActionCancel, ledger.ResultOK, 0}:                    1,
			{ledger.ActionRedeem, ledger.ResultDone, ledger.OutcomeDone}: 1,
		})
	})
}

// errCrashed stands for a replica that died.
var errCrashed = errors.New("confirmtest: the replica crashed")

// crashAfterRedeem is a replica's handle on a store through which the
// replica crashes right after a Redeem commits: the confirmation is acting
// in the store, and the replica never acts, nor records anything.
type crashAfterRedeem struct{ ledger.Store }

func (c crashAfterRedeem) Spend(ctx context.Context, id ledger.ID, to ledger.State, lease time.Duration) (ledger.Record, error) {
	r, err := c.Store.Spend(ctx, id, to, lease)
	if err == nil && to == ledger.Acting {
		return ledger.Record{}, errCrashed
	}
	return r, err
}

// Crash checks a replica that crashes between redeeming an approval and
// acting on it, the client retrying through another replica sharing the
// store (in memory, one clock): while the lease runs the retry is told the
// action is in progress; after it, that it may or may not have happened —
// check before asking again — for good; nothing acts, no outcome is
// recorded, and a late Complete is refused. The retries go through
// sessions of the era under test; the state was asked for on a 2026-07-28
// one.
func Crash(t *testing.T, f Factory) {
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		d := newDeployment(t, f)
		store := ledger.NewMemory(ledger.MemoryOptions{Now: d.clock.Now})
		a := d.frontEnd(crashAfterRedeem{store}, 0)
		b := d.replica(a, store, 0)
		d.crashAndRetry(t, a, b, era, transport, 0, func(time.Time) { d.clock.Advance(ledger.DefaultLease) })
		if err := store.Complete(context.Background(), d.firstIssued(t), ledger.Outcome{Kind: ledger.OutcomeDone}); !errors.Is(err, ledger.ErrInDoubt) {
			t.Fatalf("a late Complete after the lease = %v, want ErrInDoubt", err)
		}
	})
}

// crashAndRetry asks through a, whose store handle crashes after the
// redeem, retries through b on a session of era while the lease runs (in
// progress), calls pass to make the lease end (given the time the crashed
// call had returned by), and retries through b again (in doubt, twice).
//
// With lease positive the lease runs on the real clock: a retry through b
// answered in doubt more than lease after the crashed call began may have
// come after the lease's end (a loaded machine), which proves nothing;
// crashAndRetry then returns false and how long after the crashed call
// began the answer came, having checked nothing further. An answer in
// doubt sooner fails t.
func (d *deployment) crashAndRetry(t *testing.T, a, b *FrontEnd, era, transport string, lease time.Duration, pass func(crashed time.Time)) (bool, time.Duration) {
	t.Helper()
	ready(a, "a")
	csA := d.connect(a, session{transport: transport, manual: true, answer: mcptest.Accept()})
	csB := d.connect(b, session{era: era, transport: transport, manual: true, answer: mcptest.Accept()})
	state := ask(t, csA, a, "a")
	p := a.Call("a")
	began := time.Now() // the lease begins inside this call
	res, err := retry(csA, p, state, mcptest.Yes())
	crashed := time.Now()
	mcptest.WantToolRefusal(t, res, err, ledgerUnavail) // the crash, as the client sees it
	wantEffects(t, a, "a", 0)

	res, err = retry(csB, p, state, mcptest.Yes())
	if took := time.Since(began); lease > 0 && took >= lease && err == nil && strings.Contains(mcptest.Text(res), inDoubt) {
		wantEffects(t, a, "a", 0)
		return false, took
	}
	mcptest.WantToolRefusal(t, res, err, inProgress)
	wantEffects(t, a, "a", 0)
	pass(crashed)
	for range 2 {
		res, err = retry(csB, p, state, mcptest.Yes())
		mcptest.WantToolRefusal(t, res, err, inDoubt)
		if !strings.Contains(mcptest.Text(res), checkFirst) {
			t.Fatalf("the in-doubt answer %q does not say to check", mcptest.Text(res))
		}
		wantEffects(t, a, "a", 0)
	}
	if n := d.count(ledger.ActionComplete, ledger.ResultOK); n != 0 {
		t.Fatalf("%d outcomes recorded for an action that never ran", n)
	}
	return true, 0
}

// firstIssued returns the id of the first confirmation d's ledgers issued.
func (d *deployment) firstIssued(t *testing.T) ledger.ID {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, ev := range d.events {
		if ev.Action == ledger.ActionIssue && ev.Result == ledger.ResultOK {
			return ev.ID
		}
	}
	t.Fatal("nothing issued")
	return ledger.ID{}
}

// PrincipalMismatch checks that Alice's approval replayed by Bob is
// refused by the boundary, before the ledger — both before Alice's own
// answer acts and after, when her retry is answered from the record and
// his is still refused. Over HTTP the principal is the user of the bearer
// token (go-sdk's auth in serve's Auth slot; the front end's default
// principal source, confirm.Setup's Principal unset); in memory, where no
// one authenticates, the Principal the suite sets names the client. Bob's and Alice's retries go through
// sessions of the era under test.
func PrincipalMismatch(t *testing.T, f Factory) {
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		d := newDeployment(t, f)
		d.principals = map[string]string{"alice-token": "alice", "bob-token": "bob"}
		d.byName = transport == mcptest.InMemory
		fe := d.frontEnd(nil, 0)
		ready(fe, "a")
		alice := d.connect(fe, session{transport: transport, manual: true, answer: mcptest.Accept(), user: "alice"})
		bob := d.connect(fe, session{era: era, transport: transport, manual: true, answer: mcptest.Accept(), user: "bob"})
		state := ask(t, alice, fe, "a")
		p := fe.Call("a")

		res, err := retry(bob, p, state, mcptest.Yes())
		mcptest.WantBoundaryRefusal(t, res, err)
		wantEffects(t, fe, "a", 0)
		if n := d.count(ledger.ActionRedeem, ledger.ResultOK); n != 0 {
			t.Fatalf("%d redeemed after Bob's replay: the boundary must refuse before the ledger", n)
		}

		res, err = retry(alice, p, state, mcptest.Yes())
		first := wantActed(t, fe, "a", 1, res, err)

		// Once it is done, Bob's replay is still the boundary's to refuse:
		// the recorded result is Alice's answer, never his.
		ready(fe, "a")
		res, err = retry(bob, p, state, mcptest.Yes())
		mcptest.WantBoundaryRefusal(t, res, err)
		res, err = retry(d.connect(fe, session{era: era, transport: transport, manual: true, answer: mcptest.Accept(), user: "alice"}), p, state, mcptest.Yes())
		wantReplayed(t, res, err, first)
		wantEffects(t, fe, "a", 1)
		if n := d.count(ledger.ActionRedeem, ledger.ResultDone); n != 1 {
			t.Fatalf("the ledger answered %d retries from the record, want 1 (Alice's; Bob's never reaches it)", n)
		}
	})
}

// Declined checks that a declined or cancelled dialog (even one whose
// content says confirm=true, as a careless or lying client might send),
// or an "accept" without confirm=true, acts on nothing and is answered
// "Not confirmed";
// and that it spends the confirmation: the same state answered yes later
// is refused as declined.
func Declined(t *testing.T, f Factory) {
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		for _, ans := range []*mcptest.Answerer{mcptest.Decline(), {Action: "cancel"}, {Action: "accept", Confirm: false},
			{Action: "decline", Confirm: true}, {Action: "cancel", Confirm: true}} {
			name := ans.Action
			switch {
			case ans.Action == "accept":
				name = "accept without confirm"
			case ans.Confirm:
				name += " with confirm true"
			}
			t.Run(name, func(t *testing.T) {
				d := newDeployment(t, f)
				fe := d.frontEnd(nil, 0)
				ready(fe, "a")
				res, err := call(d.connect(fe, session{era: era, transport: transport, answer: ans}), fe, "a")
				wantNotConfirmed(t, res, err)
				wantEffects(t, fe, "a", 0)
				if n := len(ans.Questions()); n != 1 {
					t.Fatalf("asked %d times, want once", n)
				}
			})
		}
		t.Run("then accepted", func(t *testing.T) {
			d := newDeployment(t, f)
			fe := d.frontEnd(nil, 0)
			ready(fe, "a")
			state := ask(t, d.connect(fe, session{transport: transport, manual: true, answer: mcptest.Accept()}), fe, "a")
			cs := d.connect(fe, session{era: era, transport: transport, manual: true, answer: mcptest.Accept()})
			p := fe.Call("a")
			res, err := retry(cs, p, state, &mcp.ElicitResult{Action: "decline"})
			wantNotConfirmed(t, res, err)
			res, err = retry(cs, p, state, mcptest.Yes())
			mcptest.WantToolRefusal(t, res, err, declined)
			wantEffects(t, fe, "a", 0)
			if n := d.count(ledger.ActionRedeem, ledger.ResultOK); n != 0 {
				t.Fatalf("a declined confirmation was redeemed %d times", n)
			}
		})
	})
}

// noHang bounds a call that must be answered at once.
const noHang = 30 * time.Second

// WithoutElicitation checks that a client that declared no elicitation
// capability gets a clear tool error at once — no hang, no protocol
// error — and that nothing is issued or acted on.
func WithoutElicitation(t *testing.T, f Factory) {
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		d := newDeployment(t, f)
		fe := d.frontEnd(nil, 0)
		ready(fe, "a")
		cs := d.connect(fe, session{era: era, transport: transport})
		ctx, cancel := context.WithTimeout(context.Background(), noHang)
		defer cancel()
		res, err := cs.CallTool(ctx, fe.Call("a"))
		if ctx.Err() != nil {
			t.Fatalf("the call was not answered within %v: %v", noHang, err)
		}
		mcptest.WantToolRefusal(t, res, err, cannotAsk)
		wantEffects(t, fe, "a", 0)
		if n := d.issued(); n != 0 {
			t.Fatalf("%d confirmations were issued", n)
		}
	})
}

// Expired checks that an answer after the TTL is refused by the boundary,
// before the ledger, and acts on nothing.
func Expired(t *testing.T, f Factory) {
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		d := newDeployment(t, f)
		fe := d.frontEnd(nil, 0)
		ready(fe, "a")
		state := ask(t, d.connect(fe, session{transport: transport, manual: true, answer: mcptest.Accept()}), fe, "a")
		d.clock.Advance(ttl + time.Second)
		res, err := retry(d.connect(fe, session{era: era, transport: transport, manual: true, answer: mcptest.Accept()}), fe.Call("a"), state, mcptest.Yes())
		mcptest.WantBoundaryRefusal(t, res, err)
		wantEffects(t, fe, "a", 0)
		if n := d.count(ledger.ActionRedeem, ledger.ResultOK); n != 0 {
			t.Fatalf("an expired approval was redeemed %d times", n)
		}
	})
}

// ttl is the TTL of every front end the suite makes.
const ttl = requeststate.DefaultTTL
