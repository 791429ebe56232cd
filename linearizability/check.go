package linearizability

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// A Report is the outcome of checking a history.
type Report struct {
	// Result is porcupine.Ok, porcupine.Illegal, or porcupine.Unknown when
	// the check timed out (which is not a pass).
	Result  porcupine.CheckResult
	Info    porcupine.LinearizationInfo
	Stats   Stats
	Elapsed time.Duration // time spent checking

	history History
}

// Verify checks h against [Model], giving up after timeout (0: never).
func Verify(h History, timeout time.Duration) Report {
	begin := time.Now()
	res, info := porcupine.CheckOperationsVerbose(Model(), h.Operations, timeout)
	return Report{Result: res, Info: info, Stats: h.Stats(), Elapsed: time.Since(begin), history: h}
}

// Visualize writes porcupine's HTML view of the history and the longest
// linearizations found to path.
func (r Report) Visualize(path string) error {
	return porcupine.VisualizePath(Model(), r.Info, path)
}

// Violations returns the operations of every partition (confirmation id)
// that has no linearization, each sorted by call time.
func (r Report) Violations() [][]porcupine.Operation {
	if r.Result != porcupine.Illegal {
		return nil
	}
	parts := Partition(r.history.Operations)
	partials := r.Info.PartialLinearizations()
	var bad [][]porcupine.Operation
	for i, part := range parts {
		longest := 0
		if i < len(partials) {
			for _, p := range partials[i] {
				longest = max(longest, len(p))
			}
		}
		if longest < len(part) {
			ops := append([]porcupine.Operation(nil), part...)
			sort.SliceStable(ops, func(a, b int) bool { return ops[a].Call < ops[b].Call })
			bad = append(bad, ops)
		}
	}
	return bad
}

// Describe renders operations one per line, as the visualization names
// them, with their client and call/return times.
func Describe(ops []porcupine.Operation) string {
	m := Model()
	var b strings.Builder
	for _, op := range ops {
		ret := "∞"
		if op.Return != math.MaxInt64 {
			ret = time.Duration(op.Return).String()
		}
		fmt.Fprintf(&b, "  client %3d [%s, %s] %s\n", op.ClientId, time.Duration(op.Call), ret,
			m.DescribeOperation(op.Input, op.Output))
	}
	return b.String()
}

// maxLogged caps the operations of a failing partition that Check logs.
const maxLogged = 40

// Check verifies h and fails t unless it is linearizable: an Illegal
// history fails with the first offending partition in the log and the
// HTML visualization written to a file under os.TempDir() (named in the
// log); a check that timed out fails too, since it proved nothing.
func Check(t testing.TB, h History, timeout time.Duration) Report {
	t.Helper()
	r := Verify(h, timeout)
	t.Logf("history: %v", r.Stats)
	t.Logf("porcupine: %s in %v", r.Result, r.Elapsed.Round(time.Millisecond))
	switch r.Result {
	case porcupine.Ok:
		return r
	case porcupine.Unknown:
		t.Fatalf("linearizability check timed out after %v: no verdict, which is not a pass", timeout)
	}
	msg := "history is not linearizable"
	if bad := r.Violations(); len(bad) > 0 {
		first := bad[0]
		more := ""
		if len(first) > maxLogged {
			first, more = first[:maxLogged], fmt.Sprintf("  … and %d more\n", len(bad[0])-maxLogged)
		}
		msg += fmt.Sprintf("; %d confirmation(s) without a linearization, the first:\n%s%s",
			len(bad), Describe(first), more)
	}
	if f, err := os.CreateTemp("", "linearizability-*.html"); err != nil {
		t.Logf("visualization not written: %v", err)
	} else {
		f.Close()
		if err := r.Visualize(f.Name()); err != nil {
			t.Logf("visualization not written: %v", err)
		} else {
			msg += "\nvisualization: " + f.Name()
		}
	}
	t.Fatal(msg)
	return r
}
