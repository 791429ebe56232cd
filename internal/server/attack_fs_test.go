//go:build linux

package server_test

// The filesystem rows of the attack table: paths that lead elsewhere than
// the file the person approved — through a symbolic link on the path, a
// directory swapped for one between check and unlink, a root replaced, or
// input too long to resolve. Each runs through a real go-sdk client and
// server in both eras over both transports, with both of package beneath's
// resolvers (openat2, and the openat walk kernels without it get), and
// asserts which layer refused and that no file outside what was approved
// disappeared. Where the attack is another local user's, that user is a
// separate process, unprivileged when the test runs as root (see
// beneathtest).

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
	"github.com/mcp-confirm/mcp-confirm/impl/serve"
	"github.com/mcp-confirm/mcp-confirm/internal/beneath"
	"github.com/mcp-confirm/mcp-confirm/internal/beneath/beneathtest"
)

func TestMain(m *testing.M) {
	beneathtest.Main()
	code := m.Run()
	removeBinary() // attack_auth_test.go
	os.Exit(code)
}

// eachResolver runs f with openat2 and with the openat walk.
func eachResolver(t *testing.T, f func(t *testing.T, walk bool)) {
	t.Run("openat2", func(t *testing.T) { f(t, false) })
	t.Run("walk", func(t *testing.T) { f(t, true) })
}

// wantNoneGone asserts that every inode of before is still under dir,
// except those approved for deletion.
func wantNoneGone(t *testing.T, dir string, before map[uint64]string, approved map[uint64]bool) {
	t.Helper()
	after := beneathtest.Inodes(t, dir)
	for ino, p := range before {
		if _, ok := after[ino]; !ok && !approved[ino] {
			t.Errorf("%s (inode %d) disappeared, and it was never approved", p, ino)
		}
	}
}

// Layer: tool, before asking. A user who can write alice/ links
// alice/junk to ../bob (inside the root) or to a directory outside it; the
// agent asks to delete alice/junk/thesis.txt. os.Root followed the link in
// the middle of the path and deleted bob's thesis; now the path is refused,
// naming the link, and nothing is asked.
func TestAttackSymlinkDirectoryOnPath(t *testing.T) {
	att := beneathtest.New(t)
	base := beneathtest.Dir(t)
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{"root/alice/deep", "root/bob", "outside"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	victims := []string{filepath.Join(root, "bob", "thesis.txt"), filepath.Join(outside, "thesis.txt")}
	for _, v := range victims {
		if err := os.WriteFile(v, []byte("years of work"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	att.Own(filepath.Join(root, "alice"), filepath.Join(root, "alice", "deep"))
	links := map[string]string{ // link under root/alice -> target
		"junk":    "../bob",
		"abs-in":  filepath.Join(root, "bob"),
		"out":     "../../outside",
		"abs-out": outside,
		"deep/er": "../../bob",
		"dot":     ".",
	}
	for l, target := range links {
		if err := att.Do("symlink", target, filepath.Join(root, "alice", l)); err != nil {
			t.Fatalf("the attacker cannot link alice/%s: %v", l, err)
		}
	}
	if att.Unprivileged() {
		for _, v := range victims {
			if err := att.Do("unlink", v); !errors.Is(err, fs.ErrPermission) {
				t.Fatalf("the attacker can delete %s itself (%v): the test would prove nothing", v, err)
			}
		}
	}
	paths := map[string]string{ // path -> the component the refusal must name
		"alice/junk/thesis.txt":             "alice/junk",
		"alice/abs-in/thesis.txt":           "alice/abs-in",
		"alice/out/thesis.txt":              "alice/out",
		"alice/abs-out/thesis.txt":          "alice/abs-out",
		"alice/deep/er/thesis.txt":          "alice/deep/er",
		"alice/dot/junk/thesis.txt":         "alice/dot",
		"alice/dot/dot/dot/junk/thesis.txt": "alice/dot",
	}
	before := beneathtest.Inodes(t, base)
	eachResolver(t, func(t *testing.T, walk bool) {
		e := newEnv(t, envOptions{roots: []string{root}, walk: walk})
		eachEraAndTransport(t, func(t *testing.T, era, transport string) {
			for rel, component := range paths {
				ans := accept()
				res, err := call(e.connect(clientOptions{era: era, transport: transport, answer: ans}), filepath.Join(root, rel))
				wantToolRefusal(t, res, err, "is a symbolic link")
				if want := prompt.Path(filepath.Join(root, component), prompt.Options{}); !strings.Contains(text(res), want) {
					t.Errorf("%s: the refusal %q does not name %s", rel, text(res), want)
				}
				if !strings.Contains(text(res), "Nothing was asked or deleted") {
					t.Errorf("%s: the refusal does not say nothing was asked: %q", rel, text(res))
				}
				if n := len(ans.Questions()); n != 0 {
					t.Fatalf("%s: %d questions asked", rel, n)
				}
			}
		})
		if n := e.issued(); n != 0 {
			t.Fatalf("%d confirmations issued", n)
		}
	})
	wantNoneGone(t, base, before, nil)
	t.Logf("attacker unprivileged (uid %d): %v", beneathtest.Nobody, att.Unprivileged())

	// Negative control: the os.Root code this replaced deletes bob's thesis.
	t.Run("control: os.Root", func(t *testing.T) {
		r, err := os.OpenRoot(root)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if err := osRootDelete(r, "alice/junk/thesis.txt", ""); err != nil {
			t.Fatalf("os.Root refused: %v", err)
		}
		if _, err := os.Lstat(victims[0]); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("os.Root did not delete bob's thesis (%v): the control shows nothing", err)
		}
	})
}

// osRootDelete is the check and unlink delete_file did before package
// beneath: look the path up through os.Root (not following a final
// symlink), compare the identity with the approved one (if any), and remove
// it — each step walking the path from the root again.
func osRootDelete(r *os.Root, rel, approved string) error {
	fi, err := r.Lstat(rel)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	if id := osRootIdentity(fi); approved != "" && id != approved {
		return errors.New("replaced")
	}
	return r.Remove(rel)
}

func osRootIdentity(fi fs.FileInfo) string {
	st := fi.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("%d:%d %d %d", st.Dev, st.Ino, fi.Size(), fi.ModTime().UnixNano())
}

// swapTree is the directory-swap scene: root/p/…/shared/ is the attacker's
// (it can rename entries there), shared/d/x/…/thesis.txt is the approved
// file and root/p/…/bob/x/…/thesis.txt the victim, both root's in root's
// directories the attacker cannot write. The attacker links shared/s to
// ../bob and exchanges shared/d with shared/s in a tight loop, so every
// walk through shared/d meets either the directory or a link to bob.
type swapTree struct {
	root, shared     string
	rel              string   // the approved file, relative to root
	approvedDir      *os.File // held: the approved file's real directory
	victimDir        *os.File // held: the victim's directory
	victimIno        uint64
	approvedInodes   map[uint64]bool
	beforeExchanging map[uint64]string
}

func newSwapTree(t *testing.T, att *beneathtest.Attacker, above, below int) *swapTree {
	t.Helper()
	base := beneathtest.Dir(t)
	st := &swapTree{root: filepath.Join(base, "root"), approvedInodes: map[uint64]bool{}}
	top := filepath.Join(append([]string{st.root}, repeat("p", above)...)...)
	st.shared = filepath.Join(top, "shared")
	deep := filepath.Join(repeat("x", below)...)
	approvedDir := filepath.Join(st.shared, "d", deep)
	victimDir := filepath.Join(top, "bob", deep)
	for _, d := range []string{approvedDir, victimDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	att.Own(st.shared)
	if err := att.Do("symlink", "../bob", filepath.Join(st.shared, "s")); err != nil {
		t.Fatalf("the attacker cannot link shared/s: %v", err)
	}
	victim := filepath.Join(victimDir, "thesis.txt")
	if err := os.WriteFile(victim, []byte("years of work"), 0o644); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(st.root, filepath.Join(approvedDir, "thesis.txt"))
	if err != nil {
		t.Fatal(err)
	}
	st.rel = rel
	if st.approvedDir, err = os.Open(approvedDir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.approvedDir.Close() })
	if st.victimDir, err = os.Open(victimDir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.victimDir.Close() })
	st.victimIno = st.victimInode(t)
	st.approve(t)
	if att.Unprivileged() {
		for _, p := range []string{victim, filepath.Join(st.root, st.rel)} {
			if err := att.Do("unlink", p); !errors.Is(err, fs.ErrPermission) {
				t.Fatalf("the attacker can delete %s itself (%v): the test would prove nothing", p, err)
			}
		}
	}
	st.beforeExchanging = beneathtest.Inodes(t, st.root)
	return st
}

func repeat(s string, n int) []string {
	r := make([]string, n)
	for i := range r {
		r[i] = s
	}
	return r
}

// approve makes sure the approved file exists, creating it through the held
// handle on its real directory (a path would go through the swap).
func (st *swapTree) approve(t *testing.T) {
	t.Helper()
	fd, err := unix.Openat(int(st.approvedDir.Fd()), "thesis.txt", unix.O_CREAT|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var s unix.Stat_t
	if err := unix.Fstat(fd, &s); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	st.approvedInodes[s.Ino] = true
}

// approvedExists reports whether the approved file is in its directory.
func (st *swapTree) approvedExists(t *testing.T) bool {
	var s unix.Stat_t
	err := unix.Fstatat(int(st.approvedDir.Fd()), "thesis.txt", &s, unix.AT_SYMLINK_NOFOLLOW)
	if err != nil && !errors.Is(err, unix.ENOENT) {
		t.Fatal(err)
	}
	return err == nil
}

// victimInode is the victim's inode, or 0 if it is gone.
func (st *swapTree) victimInode(t *testing.T) uint64 {
	var s unix.Stat_t
	if err := unix.Fstatat(int(st.victimDir.Fd()), "thesis.txt", &s, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return 0
		}
		t.Fatal(err)
	}
	return s.Ino
}

// Layer: tool (before asking, or at execution). Another local user who can
// write only an ancestor of the approved file exchanges an intermediate
// directory with a symlink to bob's directory (renameat2 RENAME_EXCHANGE) in
// a tight loop, while approvals are redeemed, at a shallow and a deep path.
// Before, the re-check and the unlink walked the path separately and the
// unlink landed in bob's directory; now the parent is resolved once more,
// never following a link, and checked and unlinked through that one
// handle: bob's thesis survives every one of at least 200 redeemed
// approvals per case.
func TestAttackDirectorySwapBeforeUnlink(t *testing.T) {
	const redeems = 200
	// stalled: calls in a row without a redeem after which the race is
	// stuck, every call refused before asking (measured: at most 70 in a
	// row, in 450 to 1,014 calls for 200 redeems per case).
	const stalled = 1000
	att := beneathtest.New(t)
	t.Logf("attacker unprivileged (uid %d): %v", beneathtest.Nobody, att.Unprivileged())
	depths := []struct {
		name         string
		above, below int
	}{{"shallow", 0, 0}, {"deep", 8, 500}}
	for _, depth := range depths {
		t.Run(depth.name, func(t *testing.T) {
			eachResolver(t, func(t *testing.T, walk bool) {
				st := newSwapTree(t, att, depth.above, depth.below)
				e := newEnv(t, envOptions{roots: []string{st.root}, walk: walk})
				type session struct {
					name string
					cs   *mcp.ClientSession
				}
				var sessions []session
				for _, era := range []string{eraMRTR, eraLegacy} {
					for _, transport := range []string{inMemory, httpT} {
						sessions = append(sessions, session{era + "/" + transport, e.connect(clientOptions{era: era, transport: transport, answer: accept()})})
					}
				}
				path := filepath.Join(st.root, st.rel)
				stop := att.Swap(filepath.Join(st.shared, "d"), filepath.Join(st.shared, "s"))
				// The race runs until enough approvals were redeemed, however
				// slow the machine: it fails if redeems stop (stalled), or at
				// the test's own deadline, not at a fixed time (40 s ran out at
				// load average 16 with 134 redeemed).
				deadline, bounded := t.Deadline()
				deadline = deadline.Add(-min(time.Until(deadline)/10, 30*time.Second))
				var deleted, refusedAsk, refusedAct, calls, lastRedeemed, sinceRedeem, longest int
				for i := 0; e.count(ledger.ActionRedeem, ledger.ResultOK) < redeems; i++ {
					if n := e.count(ledger.ActionRedeem, ledger.ResultOK); n > lastRedeemed {
						lastRedeemed, sinceRedeem = n, 0
					} else if sinceRedeem++; sinceRedeem > stalled {
						t.Fatalf("no approval redeemed in %d calls (%d so far)", stalled, n)
					}
					longest = max(longest, sinceRedeem)
					if bounded && time.Now().After(deadline) {
						t.Fatalf("only %d approvals redeemed before the test's deadline", e.count(ledger.ActionRedeem, ledger.ResultOK))
					}
					s := sessions[i%len(sessions)]
					st.approve(t)
					res, err := call(s.cs, path)
					calls++
					switch {
					case err != nil:
						t.Fatalf("%s: protocol error: %v", s.name, err)
					case !res.IsError && strings.HasPrefix(text(res), "Deleted "):
						deleted++
						if st.approvedExists(t) {
							t.Fatalf("%s: reported a deletion, but the approved file is there", s.name)
						}
					case res.IsError && strings.Contains(text(res), "Nothing was asked or deleted") &&
						(strings.Contains(text(res), "is a symbolic link") || strings.Contains(text(res), "changed while the path was resolved")):
						refusedAsk++
					case res.IsError && strings.Contains(text(res), "Nothing was deleted"):
						refusedAct++
					default:
						t.Fatalf("%s: unexpected outcome %s", s.name, describe(res))
					}
					if st.victimInode(t) != st.victimIno {
						t.Fatalf("%s: bob's thesis is gone after %d calls (%d deleted, %d refused at execution)", s.name, calls, deleted, refusedAct)
					}
				}
				exchanges := stop()
				redeemed := e.count(ledger.ActionRedeem, ledger.ResultOK)
				t.Logf("%d calls, %d approvals redeemed: %d deleted the approved file, %d refused at execution, %d refused before asking (at most %d in a row); %d exchanges",
					calls, redeemed, deleted, refusedAct, refusedAsk, longest, exchanges)
				if refusedAsk == 0 || exchanges < int64(calls) {
					t.Fatalf("the swap did not race the calls (%d refusals before asking, %d exchanges for %d calls)", refusedAsk, exchanges, calls)
				}
				if deleted+refusedAct != redeemed {
					t.Fatalf("%d deletions and %d refusals at execution for %d redemptions", deleted, refusedAct, redeemed)
				}
				wantNoneGone(t, st.root, st.beforeExchanging, st.approvedInodes)
			})
		})
	}

	// Negative control: the os.Root code this replaced, racing the same
	// attacker, deletes bob's thesis.
	t.Run("control: os.Root", func(t *testing.T) {
		st := newSwapTree(t, att, depths[1].above, depths[1].below)
		r, err := os.OpenRoot(st.root)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		stop := att.Swap(filepath.Join(st.shared, "d"), filepath.Join(st.shared, "s"))
		defer stop()
		deadline := time.Now().Add(20 * time.Second)
		for try := 1; time.Now().Before(deadline); try++ {
			st.approve(t)
			fi, err := r.Lstat(st.rel) // the question
			if err != nil {
				continue
			}
			approved := osRootIdentity(fi)
			if err := osRootDelete(r, st.rel, approved); err != nil { // the answer
				continue
			}
			if st.victimInode(t) == 0 {
				t.Logf("os.Root deleted bob's thesis on try %d", try)
				return
			}
		}
		t.Fatal("os.Root never lost the race in 20 s: the control shows nothing")
	})
}

// Layer: tool (re-check at execution). After the question, the approved
// file's directory is renamed away and a new directory put in its place,
// holding a hard link to the very same file: the file's identity (device,
// inode, size, mtime, mode) is unchanged, only its directory differs. The
// approval bound the directory too, so the answer is refused.
func TestAttackDirectoryReplacedAfterApproval(t *testing.T) {
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		e := newEnv(t, envOptions{})
		f := e.file("d/a.txt", "a")
		d := filepath.Dir(f)
		ans := accept()
		ans.Before = func() {
			if err := os.Rename(d, d+"-old"); err != nil {
				t.Error(err)
			}
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Error(err)
			}
			if err := os.Link(filepath.Join(d+"-old", "a.txt"), f); err != nil {
				t.Error(err)
			}
		}
		before := beneathtest.Inodes(t, e.root)
		res, err := call(e.connect(clientOptions{era: era, transport: transport, answer: ans}), f)
		wantToolRefusal(t, res, err, "replaced or modified after it was approved")
		wantExists(t, f, filepath.Join(d+"-old", "a.txt"))
		wantNoneGone(t, e.root, before, nil)
		// The file itself is indistinguishable: only the directory tells.
		old, err1 := os.Lstat(filepath.Join(d+"-old", "a.txt"))
		cur, err2 := os.Lstat(f)
		if err1 != nil || err2 != nil || !os.SameFile(old, cur) || old.ModTime() != cur.ModTime() || old.Size() != cur.Size() {
			t.Fatalf("the link is not the same file (%v, %v): the test shows nothing", err1, err2)
		}
	})
}

// Layer: tool. A root directory renamed away and another created in its
// place while the person reads the question (or one of the root's names,
// a symlink, repointed): the question named a file in the old directory,
// the name now shows another. The answer is refused and nothing is
// deleted, as is every later call until the name is restored.
func TestAttackRootReplaced(t *testing.T) {
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		base := t.TempDir()
		data, link, other := filepath.Join(base, "data"), filepath.Join(base, "link"), filepath.Join(base, "other")
		for _, d := range []string{data, other} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink("data", link); err != nil {
			t.Fatal(err)
		}
		e := newEnv(t, envOptions{roots: []string{data, link}})
		write := func(p string) {
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		session := func(before func()) (*mcp.ClientSession, *answerer) {
			ans := accept()
			ans.Before = before
			return e.connect(clientOptions{era: era, transport: transport, answer: ans}), ans
		}

		// The directory replaced.
		write(filepath.Join(data, "a.txt"))
		cs, _ := session(func() {
			if err := os.Rename(data, data+"-old"); err != nil {
				t.Error(err)
			}
			if err := os.Mkdir(data, 0o755); err != nil {
				t.Error(err)
			}
			write(filepath.Join(data, "a.txt"))
		})
		before := beneathtest.Inodes(t, base)
		res, err := call(cs, filepath.Join(data, "a.txt"))
		wantToolRefusal(t, res, err, "no longer names the directory")
		wantToolRefusal(t, res, err, "Nothing was deleted")
		cs, ans := session(nil)
		res, err = call(cs, filepath.Join(data, "a.txt"))
		wantToolRefusal(t, res, err, "no longer names the directory")
		if len(ans.Questions()) != 0 {
			t.Fatal("a question was asked about the replaced root")
		}
		wantNoneGone(t, base, before, nil)
		// Restored, it works again.
		if err := os.RemoveAll(data); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(data+"-old", data); err != nil {
			t.Fatal(err)
		}
		res, err = call(cs, filepath.Join(link, "a.txt"))
		wantDeleted(t, res, err, filepath.Join(data, "a.txt"))

		// The root's other name repointed.
		write(filepath.Join(data, "b.txt"))
		write(filepath.Join(other, "b.txt"))
		cs, _ = session(func() {
			os.Remove(link)
			if err := os.Symlink("other", link); err != nil {
				t.Error(err)
			}
		})
		before = beneathtest.Inodes(t, base)
		for ino, p := range before {
			if filepath.Join(base, p) == link {
				delete(before, ino) // the attacker replaces the link itself
			}
		}
		res, err = call(cs, filepath.Join(link, "b.txt"))
		wantToolRefusal(t, res, err, "no longer names the directory")
		wantToolRefusal(t, res, err, "Nothing was deleted")
		// Every call to that root is refused while one of its names is wrong.
		cs, ans = session(nil)
		res, err = call(cs, filepath.Join(data, "b.txt"))
		wantToolRefusal(t, res, err, prompt.Path(link, prompt.Options{}))
		if len(ans.Questions()) != 0 {
			t.Fatal("a question was asked while a root's name was wrong")
		}
		wantNoneGone(t, base, before, nil)
		if n := e.count(ledger.ActionRedeem, ledger.ResultOK); n != 3 {
			t.Fatalf("%d approvals redeemed, want 3 (two refused at execution, one deletion)", n)
		}
	})
}

// Layer: tool, before asking, before any other work. A path over PATH_MAX
// (3 MiB of combining marks, which cost the old sanitizer over a second),
// or with a component over NAME_MAX, is refused by its length; the refusal
// shows only a short head and tail, and the tool's share of the call's CPU
// time does not grow with the path.
func TestAttackOverlongPath(t *testing.T) {
	zalgo := strings.Repeat("a\u0301\u0302\u0303\u0304", (3<<20)/9)
	ascii := strings.Repeat("a", len(zalgo))
	eachEraAndTransport(t, func(t *testing.T, era, transport string) {
		e := newEnv(t, envOptions{})
		keep := e.file("keep.txt", "x")
		atLimit := e.file(strings.Repeat("n", beneath.MaxName), "x")
		paths := map[string]string{
			"3 MiB":               e.root + "/" + zalgo,
			"PATH_MAX + 1":        e.root + "/" + strings.Repeat("d/", (beneath.MaxPath+1-len(e.root))/2) + "f",
			"name over NAME_MAX":  e.root + "/" + strings.Repeat("n", beneath.MaxName+1),
			"name over, relative": strings.Repeat("é", 128),
		}
		before := beneathtest.Inodes(t, e.root)
		for name, p := range paths {
			ans := accept()
			res, err := call(e.connect(clientOptions{era: era, transport: transport, answer: ans}), p)
			if transport == httpT && len(p) > serve.DefaultMaxMessageBytes {
				// Layer: the HTTP front door, before the boundary (413).
				if err == nil || !strings.Contains(err.Error(), "Request Entity Too Large") {
					t.Fatalf("%s over HTTP: want 413, got err=%v res=%s", name, err, describe(res))
				}
				continue
			}
			wantToolRefusal(t, res, err, "over the limit of")
			if len(text(res)) > 600 {
				t.Errorf("%s: a refusal of %d bytes", name, len(text(res)))
			}
			if len(ans.Questions()) != 0 {
				t.Fatalf("%s: a question was asked", name)
			}
		}
		if e.issued() != 0 {
			t.Fatal("a confirmation was issued for an over-long path")
		}
		wantNoneGone(t, e.root, before, nil)
		wantExists(t, keep)
		// At the limits, a path is asked about as usual.
		ans := decline()
		res, err := call(e.connect(clientOptions{era: era, transport: transport, answer: ans}), atLimit)
		if err != nil || res.IsError || len(ans.Questions()) != 1 {
			t.Fatalf("a name of exactly NAME_MAX bytes: %v %s", err, describe(res))
		}
	})

	// CPU: the call with 3 MiB of combining marks costs no more than the
	// call with 3 MiB of plain letters (the transport's share) plus half of
	// what sanitizing it would cost: the tool does not look at it.
	e := newEnv(t, envOptions{})
	c0 := cpuTime(t)
	prompt.Value(e.root+"/"+zalgo, prompt.Options{})
	prompt.Warnings(e.root + "/" + zalgo)
	sanitize := cpuTime(t) - c0
	for _, transport := range []string{inMemory} { // the tool's share is the same over HTTP
		cs := e.connect(clientOptions{transport: transport, answer: accept()})
		cost := func(p string) time.Duration {
			best := time.Duration(1<<63 - 1)
			for range 3 {
				c0 := cpuTime(t)
				res, err := call(cs, p)
				wantToolRefusal(t, res, err, "over the limit of")
				best = min(best, cpuTime(t)-c0)
			}
			return best
		}
		plain, hostile := cost(e.root+"/"+ascii), cost(e.root+"/"+zalgo)
		t.Logf("%s: CPU per call: plain 3 MiB %v, combining marks %v; sanitizing it would add %v", transport, plain, hostile, sanitize)
		if hostile > plain+sanitize/2 {
			t.Errorf("%s: the hostile path cost %v, the plain one %v: more than half the %v sanitizing would", transport, hostile, plain, sanitize)
		}
	}
}

// cpuTime is the CPU time this process has used.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// --root / is a root like any other: a file on its mount can be deleted; a
// path into another mount (such as /proc) is refused, naming the mount
// point.
func TestRootSlash(t *testing.T) {
	e := newEnv(t, envOptions{roots: []string{"/"}})
	dir := t.TempDir()
	f := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, era := range []string{eraMRTR, eraLegacy} {
		cs := e.connect(clientOptions{era: era, answer: accept()})
		res, err := call(cs, "/proc/self/status")
		wantToolRefusal(t, res, err, prompt.Path("/proc", prompt.Options{})+" is a mount point")
		res, err = call(cs, "/")
		wantToolRefusal(t, res, err, "outside the server's roots")
	}
	cs := e.connect(clientOptions{answer: accept()})
	res, err := call(cs, f)
	if mp := mountPointOf(t, dir); mp != "/" {
		// This machine's temporary directory is on another mount.
		wantToolRefusal(t, res, err, prompt.Path(mp, prompt.Options{})+" is a mount point")
		wantExists(t, f)
		return
	}
	wantDeleted(t, res, err, f)
}

// mountPointOf is the mount point of the mount dir is on.
func mountPointOf(t *testing.T, dir string) string {
	t.Helper()
	id := func(p string) uint64 {
		var sx unix.Statx_t
		if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &sx); err != nil {
			t.Fatal(err)
		}
		return sx.Mnt_id
	}
	for p := dir; ; p = filepath.Dir(p) {
		if p == "/" || id(p) != id(filepath.Dir(p)) {
			return p
		}
	}
}

// Overlapping roots: a path is resolved beneath the root with the longest
// name, so the inner root's checks apply inside it, and a directory given
// twice is one root.
func TestOverlappingRoots(t *testing.T) {
	base := t.TempDir()
	data := filepath.Join(base, "data")
	if err := os.MkdirAll(filepath.Join(data, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{roots: []string{base, data, data + "/", filepath.Join(data, "sub", "..")}})
	// With several roots a relative path names no file: it is refused
	// before asking, not resolved under the first root.
	rel := filepath.Join(base, "rel.txt")
	if err := os.WriteFile(rel, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ans := accept()
	res, err := call(e.connect(clientOptions{answer: ans}), "rel.txt")
	wantToolRefusal(t, res, err, "must be absolute")
	if len(ans.Questions()) != 0 {
		t.Fatal("a question was asked about a relative path")
	}
	wantExists(t, rel)
	cs := e.connect(clientOptions{answer: accept()})
	for _, p := range []string{filepath.Join(base, "a.txt"), filepath.Join(data, "b.txt"), filepath.Join(data, "sub", "c.txt")} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := call(cs, p)
		wantDeleted(t, res, err, p)
	}
	// The inner root replaced: its files are refused, not reached through
	// the outer root.
	if err := os.Rename(data, data+"-old"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(data, "d.txt")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = call(cs, f)
	wantToolRefusal(t, res, err, "no longer names the directory")
	wantExists(t, f)
}
