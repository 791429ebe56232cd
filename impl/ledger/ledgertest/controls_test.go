package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// goneStore is a store whose server went away. Broken ones answer as if
// it had not (answer), or keep the caller waiting past its deadline
// (stall).
type goneStore struct {
	answer error         // what Spend returns; nil: a plain error
	stall  time.Duration // how long Spend waits, whatever the deadline
}

var errGone = errors.New("connection refused")

func (s goneStore) Add(context.Context, ledger.Confirmation) error {
	if s.answer != nil {
		return nil // pretends the confirmation was stored
	}
	return errGone
}

func (s goneStore) Spend(context.Context, ledger.ID, ledger.State, time.Duration) (ledger.Record, error) {
	<-time.After(s.stall) // ignores the caller's context, as a broken client would
	if s.answer != nil {
		return ledger.Record{}, s.answer
	}
	return ledger.Record{}, errGone
}

func (s goneStore) Complete(context.Context, ledger.ID, ledger.Outcome) error {
	<-time.After(s.stall)
	if s.answer != nil {
		return s.answer
	}
	return errGone
}

func (s goneStore) Decide(context.Context, ledger.ID, ledger.Approver, bool) (ledger.Record, error) {
	<-time.After(s.stall)
	if s.answer != nil {
		return ledger.Record{}, s.answer
	}
	return ledger.Record{}, errGone
}

func (s goneStore) Lookup(context.Context, ledger.ID) (ledger.Record, error) {
	<-time.After(s.stall)
	if s.answer != nil {
		return ledger.Record{}, s.answer
	}
	return ledger.Record{}, errGone
}

// replayStore never marks a confirmation spent: every Spend succeeds, and
// a replay runs again.
type replayStore map[ledger.ID]ledger.Confirmation

func (s replayStore) Add(_ context.Context, c ledger.Confirmation) error {
	s[c.ID] = c
	return nil
}

func (s replayStore) Spend(_ context.Context, id ledger.ID, to ledger.State, _ time.Duration) (ledger.Record, error) {
	c, ok := s[id]
	if !ok {
		return ledger.Record{}, ledger.ErrUnknown
	}
	return ledger.Record{Confirmation: c, State: to}, nil
}

func (s replayStore) Complete(context.Context, ledger.ID, ledger.Outcome) error { return nil }

func (s replayStore) Decide(_ context.Context, id ledger.ID, _ ledger.Approver, _ bool) (ledger.Record, error) {
	return s.Lookup(context.Background(), id)
}

func (s replayStore) Lookup(_ context.Context, id ledger.ID) (ledger.Record, error) {
	c, ok := s[id]
	if !ok {
		return ledger.Record{}, ledger.ErrUnknown
	}
	return ledger.Record{Confirmation: c, State: ledger.Pending}, nil
}

// A control runs one of the shared checks against a store broken in the
// way the check looks for; the check must fail with want.
type control struct {
	name, want string
	run        func(t *testing.T)
}

func controls() []control {
	gone := func(closed, at goneStore) func(t *testing.T) {
		return func(t *testing.T) {
			GoneAway(t,
				func(*testing.T) goneStore { return closed },
				func(*testing.T, string) goneStore { return at },
				nil)
		}
	}
	openErrors := func(open func(ctx context.Context, url string) error) func(t *testing.T) {
		return func(t *testing.T) {
			OpenErrors(t, "s3cret", open, []OpenFailure{{Name: "refused", URL: "db://u:s3cret@127.0.0.1:1/x", Want: "127.0.0.1:1"}})
		}
	}
	cs := []control{
		{"GoneAway/answers ErrUnknown", "want an error that is not a ledger sentinel",
			gone(goneStore{}, goneStore{answer: ledger.ErrUnknown})},
		{"GoneAway/ignores the deadline", "took",
			gone(goneStore{stall: 2500 * time.Millisecond}, goneStore{})},
		{"Namespaces/one ledger", "Spend in another namespace",
			func(t *testing.T) {
				m := ledger.NewMemory(ledger.MemoryOptions{})
				Namespaces(t, Factory{New: func(testing.TB) ledger.Store { return m }})
			}},
		{"RedeemOnce/replays", "second Redeem",
			func(t *testing.T) { RedeemOnce(t, replayStore{}) }},
		{"OpenErrors/succeeds", "Open succeeded",
			openErrors(func(context.Context, string) error { return nil })},
		{"OpenErrors/echoes the password", "error echoes the password",
			openErrors(func(_ context.Context, url string) error { return fmt.Errorf("connect to %s: refused", url) })},
		{"OpenErrors/names no server", "does not name",
			openErrors(func(context.Context, string) error { return errGone })},
	}
	broken := func(f fault) Factory {
		return Factory{New: func(testing.TB) ledger.Store { return newBrokenStore(f, new(atomic.Int64)) }}
	}
	cs = append(cs,
		control{"Approvals/self-approval", "want ledger: the requester cannot decide their own request",
			func(t *testing.T) { Approvals(t, broken(fault{self: true})) }},
		control{"Approvals/decided twice", "want ledger: approval already decided",
			func(t *testing.T) { Approvals(t, broken(fault{twice: true})) }},
		control{"Approvals/redeem before approval", "= <nil>, want ledger: confirmation awaiting out-of-band approval",
			func(t *testing.T) { Approvals(t, broken(fault{unapproved: true})) }},
		control{"ConcurrentDecide/decided twice", "both recorded a decision",
			func(t *testing.T) { ConcurrentDecide(t, broken(fault{twice: true})) }},
	)
	return append(cs, capsControls()...)
}

const controlEnv = "LEDGERTEST_CONTROL"

// TestSharedChecksCatchBrokenStores is the negative control for
// GoneAway, Namespaces, RedeemOnce, OpenErrors, Caps, Approvals and
// ConcurrentDecide: each control runs in a test
// process of its own (the checks run subtests, which fail their parent),
// and must fail there with the check's message.
func TestSharedChecksCatchBrokenStores(t *testing.T) {
	if name := os.Getenv(controlEnv); name != "" { // the child
		for _, c := range controls() {
			if c.name == name {
				c.run(t)
				return
			}
		}
		t.Fatalf("no control %q", name)
	}
	for _, c := range controls() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSharedChecksCatchBrokenStores$", "-test.count=1")
			cmd.Env = append(os.Environ(), controlEnv+"="+c.name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the check passed a broken store (%v):\n%s", err, out)
			}
			if !strings.Contains(string(out), c.want) {
				t.Fatalf("the check failed, but not with %q:\n%s", c.want, out)
			}
		})
	}
}
