package linearizability

import (
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// capture is a testing.TB that records a failure instead of failing.
type capture struct {
	testing.TB
	failed bool
	out    strings.Builder
}

func (c *capture) Helper()                         {}
func (c *capture) Logf(format string, args ...any) { fmt.Fprintf(&c.out, format+"\n", args...) }
func (c *capture) Fatal(args ...any)               { c.out.WriteString(fmt.Sprint(args...)); c.FailNow() }
func (c *capture) Fatalf(format string, args ...any) {
	fmt.Fprintf(&c.out, format, args...)
	c.FailNow()
}
func (c *capture) FailNow() { c.failed = true; runtime.Goexit() }

// runCheck runs Check on h with a capturing TB, in a goroutine of its own
// so that FailNow can end it.
func runCheck(t *testing.T, h History, timeout time.Duration) *capture {
	c := &capture{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Check(c, h, timeout)
	}()
	<-done
	return c
}

func TestCheck(t *testing.T) {
	t.Run("ok", func(t *testing.T) {
		h := History{Operations: []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok)}, Clients: 2}
		if c := runCheck(t, h, time.Minute); c.failed {
			t.Fatalf("Check failed a linearizable history:\n%s", c.out.String())
		}
	})

	t.Run("illegal", func(t *testing.T) {
		ops := []porcupine.Operation{issue(idA, far, 0, 1, ok), redeem(idA, 2, 3, ok), cancel(idA, 4, 5, ok)}
		for i := range ops {
			ops[i].ClientId = i
		}
		c := runCheck(t, History{Operations: ops, Clients: len(ops)}, time.Minute)
		out := c.out.String()
		if !c.failed {
			t.Fatalf("Check passed a double spend:\n%s", out)
		}
		for _, want := range []string{"Illegal", "1 confirmation(s) without a linearization", "cancel …00000000 in [4ns, 5ns] → ok"} {
			if !strings.Contains(out, want) {
				t.Errorf("failure message lacks %q:\n%s", want, out)
			}
		}
		m := regexp.MustCompile(`visualization: (\S+\.html)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("failure message names no visualization:\n%s", out)
		}
		t.Cleanup(func() { os.Remove(m[1]) })
		if fi, err := os.Stat(m[1]); err != nil || fi.Size() == 0 {
			t.Fatalf("visualization %s not written: %v", m[1], err)
		}
	})

	// A history whose check takes exponential time: 24 concurrent redeems
	// answered "cancelled" can be ordered in 2^24 ways after the cancel,
	// and the one answered "in progress" fits none of them.
	t.Run("timed out", func(t *testing.T) {
		ops := []porcupine.Operation{issue(idA, far, 0, 1, ok), cancel(idA, 2, 100, ok), redeem(idA, 2, 100, progress)}
		for range 24 {
			ops = append(ops, redeem(idA, 2, 100, cancelledR))
		}
		for i := range ops {
			ops[i].ClientId = i
		}
		c := runCheck(t, History{Operations: ops, Clients: len(ops)}, 50*time.Millisecond)
		out := c.out.String()
		if !c.failed || !strings.Contains(out, "timed out") {
			t.Fatalf("Check did not fail a timed-out check:\n%s", out)
		}
	})
}
