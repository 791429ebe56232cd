package spec

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// rootModule is the module every configuration instantiates.
const rootModule = "MCLedger.tla"

// A config is one Ledger*.cfg and the outcome it declares in its
// "\* TLC-EXPECT: <exit> <line>" comment.
type config struct {
	name     string // file name without ".cfg"
	wantExit int    // TLC's exit code: 0 ok, 12 invariant, 13 liveness violated
	wantLine string // a line TLC's output must contain
}

var expectRE = regexp.MustCompile(`(?m)^\\\* TLC-EXPECT: (\d+) (.+)$`)

// configs reads every *.cfg in fsys and the outcome it declares.
func configs(fsys fs.FS) ([]config, error) {
	names, err := fs.Glob(fsys, "*.cfg")
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, errors.New("no *.cfg files")
	}
	var cs []config
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		m := expectRE.FindAllSubmatch(b, -1)
		if len(m) != 1 {
			return nil, fmt.Errorf("%s: want exactly one TLC-EXPECT line, have %d", n, len(m))
		}
		exit, err := strconv.Atoi(string(m[0][1]))
		if err != nil || !slices.Contains([]int{0, 11, 12, 13}, exit) {
			return nil, fmt.Errorf("%s: TLC-EXPECT exit code %q is not one TLC reports (0, 11, 12, 13)", n, m[0][1])
		}
		cs = append(cs, config{
			name:     strings.TrimSuffix(n, ".cfg"),
			wantExit: exit,
			wantLine: strings.TrimRight(string(m[0][2]), "\r"),
		})
	}
	return cs, nil
}

var (
	extendsRE  = regexp.MustCompile(`(?m)^\s*EXTENDS\s+([\w\s,]+?)\s*$`)
	instanceRE = regexp.MustCompile(`\bINSTANCE\s+(\w+)`)
	commentRE  = regexp.MustCompile(`\\\*.*`)
)

// modules returns root and every module it extends or instantiates,
// transitively, that is a file in fsys (standard modules are not), sorted.
func modules(fsys fs.FS, root string) ([]string, error) {
	seen := map[string]bool{}
	todo := []string{root}
	for len(todo) > 0 {
		m := todo[0]
		todo = todo[1:]
		if seen[m] {
			continue
		}
		b, err := fs.ReadFile(fsys, m)
		if errors.Is(err, fs.ErrNotExist) && m != root {
			continue // a standard module, inside the TLC jar
		}
		if err != nil {
			return nil, err
		}
		seen[m] = true
		text := commentRE.ReplaceAll(b, nil)
		var deps []string
		for _, e := range extendsRE.FindAllSubmatch(text, -1) {
			for d := range strings.SplitSeq(string(e[1]), ",") {
				deps = append(deps, strings.TrimSpace(d))
			}
		}
		for _, i := range instanceRE.FindAllSubmatch(text, -1) {
			deps = append(deps, string(i[1]))
		}
		for _, d := range deps {
			todo = append(todo, d+".tla")
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// checkRecord verifies what tlc.sh recorded for c: tlc/<name>.sha256 lists
// exactly the modules TLC read, the configuration and tlc/<name>.out, each
// with its current SHA-256.
func checkRecord(fsys fs.FS, c config) error {
	mods, err := modules(fsys, rootModule)
	if err != nil {
		return err
	}
	want := append(mods, c.name+".cfg", "tlc/"+c.name+".out")
	slices.Sort(want)

	sumFile := "tlc/" + c.name + ".sha256"
	b, err := fs.ReadFile(fsys, sumFile)
	if err != nil {
		return fmt.Errorf("%s.cfg has never been checked: %w", c.name, err)
	}
	recorded := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 2*sha256.Size {
			return fmt.Errorf("%s: malformed line %q", sumFile, sc.Text())
		}
		recorded[file] = sum
	}
	if have := slices.Sorted(maps.Keys(recorded)); !slices.Equal(have, want) {
		return fmt.Errorf("%s covers %q, want %q", sumFile, have, want)
	}
	var stale []string
	for _, f := range want {
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		if hex.EncodeToString(sum[:]) != recorded[f] {
			stale = append(stale, f)
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("%s.cfg: %s changed since TLC last checked it (%s)", c.name, strings.Join(stale, ", "), sumFile)
	}
	return nil
}

// stats are the numbers TLC reports at the end of a run.
type stats struct {
	generated, distinct, left, depth int
}

var (
	statesRE = regexp.MustCompile(`(?m)^(\d+) states generated, (\d+) distinct states found, (\d+) states left on queue\.`)
	depthRE  = regexp.MustCompile(`(?m)^The depth of the complete state graph search is (\d+)\.`)
)

func parseStats(out []byte) (stats, error) {
	m := statesRE.FindSubmatch(out)
	d := depthRE.FindSubmatch(out)
	if m == nil || d == nil {
		return stats{}, errors.New("no state counts or depth in TLC output")
	}
	n := func(b []byte) int { v, _ := strconv.Atoi(string(b)); return v }
	return stats{generated: n(m[1]), distinct: n(m[2]), left: n(m[3]), depth: n(d[1])}, nil
}

// checkOutcome verifies that TLC output out shows the outcome c declares.
func checkOutcome(out []byte, c config) error {
	lines := strings.Split(strings.ReplaceAll(string(out), "\r\n", "\n"), "\n")
	if !slices.Contains(lines, c.wantLine) {
		return fmt.Errorf("%s.cfg: TLC output lacks the line %q", c.name, c.wantLine)
	}
	st, err := parseStats(out)
	if err != nil {
		return fmt.Errorf("%s.cfg: %w", c.name, err)
	}
	switch c.wantExit {
	case 0:
		if st.left != 0 || bytes.Contains(out, []byte("\nError:")) {
			return fmt.Errorf("%s.cfg: search incomplete or an error reported", c.name)
		}
	default:
		// A violation must come with its counterexample.
		if !slices.Contains(lines, "State 1: <Initial predicate>") {
			return fmt.Errorf("%s.cfg: violation reported without a counterexample trace", c.name)
		}
	}
	return nil
}

// TestConfigsDeclareOutcome checks that the success configurations and the
// negative controls exist and declare what the project relies on: each
// broken design (Flaw) is refuted by the invariant that guards against it
// -- redeem (check-then-act, replay, blind complete), out-of-band
// approval (self-approval, a second decision, redemption before approval,
// an unlisted approver), failover (acting before the standby's
// acknowledgement), clocks (a step back the store does not guard, no
// expiry check in the store) and leases (unbounded renewal, a read that
// ignores the lease, a Complete without its lease check) alike.
func TestConfigsDeclareOutcome(t *testing.T) {
	cs, err := configs(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	const pass = "Model checking completed. No error has been found."
	want := map[string]struct {
		config
		flaw string // the Flaw constant the configuration sets
	}{
		"Ledger":      {config{wantExit: 0, wantLine: pass}, "none"},
		"LedgerLive":  {config{wantExit: 0, wantLine: pass}, "none"},
		"LedgerRace":  {config{wantExit: 12, wantLine: "Error: Invariant AtMostOnce is violated."}, "check-then-act"},
		"LedgerRerun": {config{wantExit: 12, wantLine: "Error: Invariant ReplayEqualsRecord is violated."}, "replay-reruns"},
		"LedgerBlind": {config{wantExit: 12, wantLine: "Error: Invariant ReplayEqualsRecord is violated."}, "blind-complete"},

		"LedgerApprove":          {config{wantExit: 0, wantLine: pass}, "none"},
		"LedgerFourEyes":         {config{wantExit: 0, wantLine: pass}, "none"},
		"LedgerApproveReach":     {config{wantExit: 12, wantLine: "Error: Invariant NoOutOfBandRedeem is violated."}, "none"},
		"LedgerSelfApproval":     {config{wantExit: 12, wantLine: "Error: Invariant NoSelfDecision is violated."}, "self-approval"},
		"LedgerDecideTwice":      {config{wantExit: 12, wantLine: "Error: Invariant DecidedOnce is violated."}, "decide-twice"},
		"LedgerRedeemUnapproved": {config{wantExit: 12, wantLine: "Error: Invariant NoRedeemWithoutApproval is violated."}, "redeem-unapproved"},
		"LedgerUnlisted":         {config{wantExit: 12, wantLine: "Error: Invariant OnlyAuthorizedDecide is violated."}, "unlisted-approver"},

		"LedgerFailover":       {config{wantExit: 0, wantLine: pass}, "none"},
		"LedgerClock":          {config{wantExit: 0, wantLine: pass}, "none"},
		"LedgerRenew":          {config{wantExit: 0, wantLine: pass}, "none"},
		"LedgerUnacked":        {config{wantExit: 12, wantLine: "Error: Invariant AtMostOnce is violated."}, "act-before-ack"},
		"LedgerClockStep":      {config{wantExit: 12, wantLine: "Error: Invariant ExpiredStaysExpired is violated."}, "clock-unguarded"},
		"LedgerRenewUnbounded": {config{wantExit: 12, wantLine: "Error: Invariant InProgressBounded is violated."}, "unbounded-renewal"},
		"LedgerStaleRead":      {config{wantExit: 12, wantLine: "Error: Invariant InProgressBounded is violated."}, "stale-read"},
		"LedgerLateComplete":   {config{wantExit: 12, wantLine: "Error: Invariant ReplayEqualsRecord is violated."}, "complete-no-lease"},
		"LedgerNoStoreExpiry":  {config{wantExit: 12, wantLine: "Error: Invariant NoEffectAfterExpiry is violated."}, "no-store-expiry"},
	}
	for _, c := range cs {
		t.Logf("%s.cfg: exit %d, %q", c.name, c.wantExit, c.wantLine)
		w, ok := want[c.name]
		if !ok {
			continue
		}
		if c.wantExit != w.wantExit || c.wantLine != w.wantLine {
			t.Errorf("%s.cfg declares exit %d %q, want exit %d %q", c.name, c.wantExit, c.wantLine, w.wantExit, w.wantLine)
		}
		b, err := os.ReadFile(c.name + ".cfg")
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`(?m)^\s*Flaw = "` + regexp.QuoteMeta(w.flaw) + `"\s*$`).Match(b) {
			t.Errorf("%s.cfg: want Flaw = %q", c.name, w.flaw)
		}
		delete(want, c.name)
	}
	for n := range want {
		t.Errorf("%s.cfg is missing", n)
	}
}

// TestCheckedSpecMatchesRecordedHashes is what CI relies on: it fails when
// a module, a configuration or a recorded output no longer has the SHA-256
// recorded when TLC checked it, i.e. when the spec was edited without
// re-running spec/tlc.sh.
func TestCheckedSpecMatchesRecordedHashes(t *testing.T) {
	fsys := os.DirFS(".")
	cs, err := configs(fsys)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if err := checkRecord(fsys, c); err != nil {
			t.Errorf("%v\n\tre-check with: TLA2TOOLS_JAR=/path/to/tla2tools.jar spec/tlc.sh %s", err, c.name)
		}
	}
	// Records of configurations that no longer exist are stale too.
	recs, _ := fs.Glob(fsys, "tlc/*")
	for _, r := range recs {
		name := strings.TrimSuffix(strings.TrimSuffix(path.Base(r), ".out"), ".sha256")
		if !slices.ContainsFunc(cs, func(c config) bool { return c.name == name }) {
			t.Errorf("%s: no %s.cfg; delete the stale record", r, name)
		}
	}
}

// TestRecordedOutputsShowDeclaredOutcome checks the committed TLC outputs:
// the success configurations completed without error, the controls failed
// as declared, with a counterexample.
func TestRecordedOutputsShowDeclaredOutcome(t *testing.T) {
	cs, err := configs(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		out, err := os.ReadFile("tlc/" + c.name + ".out")
		if err != nil {
			t.Errorf("%s.cfg: %v", c.name, err)
			continue
		}
		if err := checkOutcome(out, c); err != nil {
			t.Error(err)
			continue
		}
		st, _ := parseStats(out)
		t.Logf("%s.cfg: %d states generated, %d distinct, depth %d", c.name, st.generated, st.distinct, st.depth)
	}
}

// TestCheckersRejectTampering is the negative control for the two checks
// above: a copy of this directory with a one-byte change to the spec, or
// with the success line removed from an output, must be refused.
func TestCheckersRejectTampering(t *testing.T) {
	dir := os.DirFS(".")
	ledger := config{name: "Ledger", wantExit: 0, wantLine: "Model checking completed. No error has been found."}
	race := config{name: "LedgerRace", wantExit: 12, wantLine: "Error: Invariant AtMostOnce is violated."}

	copyWith := func(t *testing.T, file string, edit func([]byte) []byte) fstest.MapFS {
		t.Helper()
		m := fstest.MapFS{}
		err := fs.WalkDir(dir, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := fs.ReadFile(dir, p)
			if p == file {
				b = edit(slices.Clone(b))
			}
			m[p] = &fstest.MapFile{Data: b}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	appendSpace := func(b []byte) []byte { return append(b, ' ') }

	for _, file := range []string{"Ledger.tla", "MCLedger.tla", "Ledger.cfg", "tlc/Ledger.out"} {
		if err := checkRecord(copyWith(t, file, appendSpace), ledger); err == nil {
			t.Errorf("checkRecord accepted an edited %s", file)
		}
	}
	if err := checkRecord(copyWith(t, "tlc/Ledger.sha256", func(b []byte) []byte {
		return bytes.Join(bytes.Split(b, []byte("\n"))[1:], []byte("\n"))
	}), ledger); err == nil {
		t.Error("checkRecord accepted a hash file that omits a module")
	}

	out, err := os.ReadFile("tlc/Ledger.out")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkOutcome(bytes.ReplaceAll(out, []byte(ledger.wantLine), []byte("Model checking completed.")), ledger); err == nil {
		t.Error("checkOutcome accepted a success output without the success line")
	}
	if err := checkOutcome(out, race); err == nil {
		t.Error("checkOutcome accepted the success output as the negative control's")
	}
	raceOut, err := os.ReadFile("tlc/LedgerRace.out")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkOutcome(raceOut, ledger); err == nil {
		t.Error("checkOutcome accepted the negative control's output as a success")
	}
}

// beforeDeadline returns a context that ends shortly before t's deadline
// (a tenth of the time left, at most 30 s, to stop TLC and report what it
// printed), or with t if it has none: TLC is stopped by the test, never
// left running when go test's -timeout ends the test binary.
func beforeDeadline(t *testing.T) (context.Context, context.CancelFunc) {
	d, ok := t.Deadline()
	if !ok {
		return context.WithCancel(t.Context())
	}
	return context.WithDeadline(t.Context(), d.Add(-min(time.Until(d)/10, 30*time.Second)))
}

// TestTLC runs TLC on every configuration when $TLA2TOOLS_JAR names
// tla2tools.jar ($TLC_WORKERS workers, default one per core), and checks
// the declared outcome; for the configurations
// that must pass it also checks that the state counts recorded in tlc/ are
// reproduced. Without TLC it is skipped: TestCheckedSpecMatchesRecordedHashes
// is then the check that matters.
func TestTLC(t *testing.T) {
	jar := os.Getenv("TLA2TOOLS_JAR")
	if jar == "" {
		t.Skip("TLA2TOOLS_JAR not set: TLC NOT RUN. CI relies on TestCheckedSpecMatchesRecordedHashes, " +
			"which proves the committed TLC results (spec/tlc/) are for the committed spec; " +
			"set TLA2TOOLS_JAR=/path/to/tla2tools.jar to model-check here")
	}
	if _, err := os.Stat(jar); err != nil {
		t.Fatalf("TLA2TOOLS_JAR: %v", err)
	}
	cs, err := configs(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := beforeDeadline(t)
			defer cancel()
			workers := cmp.Or(os.Getenv("TLC_WORKERS"), "auto")
			cmd := exec.CommandContext(ctx, "java", "-XX:+UseParallelGC", "-cp", jar, "tlc2.TLC",
				"-workers", workers, "-noGenerateSpecTE", "-metadir", t.TempDir(),
				"-config", c.name+".cfg", rootModule)
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("TLC did not finish before the test's deadline (go test -timeout):\n%s", out)
			}
			exit := 0
			var ee *exec.ExitError
			switch {
			case errors.As(err, &ee):
				exit = ee.ExitCode()
			case err != nil:
				t.Fatalf("running TLC: %v", err)
			}
			if exit != c.wantExit {
				t.Errorf("TLC exited %d, want %d", exit, c.wantExit)
			}
			if err := checkOutcome(out, c); err != nil {
				t.Error(err)
			}
			if t.Failed() {
				t.Logf("TLC output:\n%s", out)
				return
			}
			st, err := parseStats(out)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d states generated, %d distinct, depth %d", st.generated, st.distinct, st.depth)
			if c.wantExit != 0 {
				return
			}
			rec, err := os.ReadFile("tlc/" + c.name + ".out")
			if err != nil {
				t.Fatal(err)
			}
			want, err := parseStats(rec)
			if err != nil {
				t.Fatal(err)
			}
			if st.distinct != want.distinct || st.depth != want.depth {
				t.Errorf("TLC found %d distinct states, depth %d; tlc/%s.out records %d, depth %d",
					st.distinct, st.depth, c.name, want.distinct, want.depth)
			}
		})
	}
}
