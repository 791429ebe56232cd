package confirmtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/storeurl"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// eachSharedStore runs f as subtest kind/era/transport for every shared
// store, both protocol eras and both transports, with its URL; a store
// whose variable is unset is skipped, naming the variable.
func eachSharedStore(t *testing.T, f func(t *testing.T, url, era, transport string)) {
	for _, kind := range []string{"redis", "postgres"} {
		url := sharedStores()[kind]
		t.Run(kind, func(t *testing.T) {
			if url == "" {
				t.Skipf("set MCP_CONFIRM_%s_URL to run against a real %s", strings.ToUpper(kind), kind)
			}
			eachEraAndTransport(t, func(t *testing.T, era, transport string) { f(t, url, era, transport) })
		})
	}
}

// openStore opens a handle on the store at url, in d's namespace, as one
// replica of d would.
func (d *deployment) openStore(t *testing.T, url string) ledger.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, closeStore, err := storeurl.Open(ctx, url, d.name, storeurl.Options{})
	if err != nil {
		t.Fatalf("storeurl.Open: %v", err)
	}
	t.Cleanup(closeStore)
	return s
}

// sharedDeployment is a deployment on a shared store: on the real clock,
// which the store decides expiry and leases on.
func sharedDeployment(t *testing.T, f Factory) *deployment {
	d := newDeployment(t, f)
	d.clock = nil
	return d
}

// Replicas checks two replicas of one deployment, each with a handle of
// its own on one Redis or PostgreSQL store: a question asked by A is
// answered through B and acts once; its replay through A is answered from
// the record; then 16 clients race one approval through both replicas,
// half on older-era sessions, and it acts once.
func Replicas(t *testing.T, f Factory) {
	eachSharedStore(t, func(t *testing.T, url, era, transport string) {
		d := sharedDeployment(t, f)
		a := d.frontEnd(d.openStore(t, url), 0)
		b := d.replica(a, d.openStore(t, url), 0)
		manual := func(fe *FrontEnd, era string) *mcp.ClientSession {
			return d.connect(fe, session{era: era, transport: transport, manual: true, answer: mcptest.Accept()})
		}
		ready(a, "a")
		state := ask(t, manual(a, mcptest.EraMRTR), a, "a")
		p := a.Call("a")
		res, err := retry(manual(b, era), p, state, mcptest.Yes())
		first := wantActed(t, a, "a", 1, res, err)
		ready(a, "a")
		res, err = retry(manual(a, era), p, state, mcptest.Yes())
		wantReplayed(t, res, err, first)
		wantEffects(t, b, "a", 1)

		ready(b, "b")
		state = ask(t, manual(b, mcptest.EraMRTR), b, "b")
		const racers = 16
		sessions := make([]*mcp.ClientSession, racers)
		for i := range sessions {
			sessions[i] = manual([]*FrontEnd{a, b}[i%2], eras[i/2%2])
		}
		d.raceOnce(t, a, sessions, "b", state)
	})
}

// CrashShared checks Crash with two replicas on one Redis or PostgreSQL
// store: while the lease runs (a short one here, on the store's own clock)
// the retry through the other replica is told the action is in progress;
// after it, in doubt; nothing acts.
//
// The lease is real time, so it must outlast the retry's round trip: a
// fixed 500 ms did not on a loaded machine (the retry was told in doubt).
// An attempt whose retry came back in doubt after the lease could have
// ended is made again on a fresh deployment, with a lease of four times
// that round trip (at least twice the last), at most five times.
func CrashShared(t *testing.T, f Factory) {
	eachSharedStore(t, func(t *testing.T, url, era, transport string) {
		lease := 500 * time.Millisecond
		for attempt := 1; ; attempt++ {
			d := sharedDeployment(t, f)
			a := d.frontEnd(crashAfterRedeem{d.openStore(t, url)}, lease)
			b := d.replica(a, d.openStore(t, url), lease)
			ok, took := d.crashAndRetry(t, a, b, era, transport, lease, func(crashed time.Time) {
				// The lease began inside the crashed call, before it returned.
				time.Sleep(time.Until(crashed.Add(lease + 10*time.Millisecond)))
			})
			if ok {
				return
			}
			if attempt == 5 {
				t.Fatalf("the retry came back %v after the crashed call began, past even a %v lease, %d times: in progress was never seen", took, lease, attempt)
			}
			t.Logf("attempt %d: the retry came back %v after the crashed call began, past the %v lease (in doubt): again with a longer lease", attempt, took, lease)
			lease = max(2*lease, 4*took)
		}
	})
}
