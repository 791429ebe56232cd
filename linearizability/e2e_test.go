package linearizability

// End-to-end histories: the reference server (internal/server) over streamable
// HTTP, driven by real go-sdk clients speaking 2026-07-28 multi round-trip
// requests with the retries done by hand, one ClientSession per goroutine.
//
//   issue    = the first round of delete_file on a fresh file (input_required
//              with a sealed requestState);
//   redeem   = the retry carrying an accept with confirm=true;
//   cancel   = the retry carrying a decline;
//   complete = what the server records after acting, inside the redeem
//              that acted: recorded beside that redeem, with its window.
//
// Each answer is mapped back onto the ledger's vocabulary from the texts of
// impl/confirm, and the history is checked with the same model as the
// store-level tests: a retry answered with the earlier execution's result
// must carry exactly the outcome the acting redeem recorded. The
// filesystem is checked too: a file is gone iff exactly one redeem
// answered "Deleted" unmarked (or, failing that, a redeem's outcome was
// unknown), and a retry answered "Deleted", marked as the earlier
// execution's, only for a file that is gone.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/pgledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/storeurl"
	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
	"github.com/mcp-confirm/mcp-confirm/internal/server"
)

const (
	// e2eTTL is the servers' TTL. Nothing in a run comes near it, so every
	// spend must be decided on the confirmation's state: an "expired"
	// answer is a violation. (Expiry is checked at the store level, where
	// the test picks the expiry; here the server picks it, somewhere
	// inside the first round.)
	e2eTTL = 10 * time.Minute
	// e2eOpTimeout bounds each MCP call; one that times out is recorded
	// with its outcome unknown.
	e2eOpTimeout = 10 * time.Second
	// e2eBudget bounds a whole recording (connecting included); a
	// recording that runs out fails the test.
	e2eBudget = 4 * time.Minute
	// e2eHot approvals are raced at any moment: about goroutines/e2eHot
	// clients contend for each.
	e2eHot = 8
	// e2eRacers caps the retries in flight on one approval, which keeps
	// porcupine's search bounded (see Workload.Racers).
	e2eRacers = DefaultRacers
	// e2eIssueMix is the share of operations, per thousand, that ask a new
	// question even when a hot approval is free; the rest redeem (¾) or
	// cancel (¼) a hot one.
	e2eIssueMix = 100
)

// e2eSize is the CI size of an end-to-end history, or a reduced one under
// -short.
func e2eSize() (goroutines, operations int) {
	if testing.Short() {
		return 16, 1_000
	}
	return 64, 10_000
}

// codeRejectedByTransport is the code of go-sdk's (internal)
// jsonrpc2.ErrRejected, which wraps every failure of an HTTP round trip:
// the client got no answer from the server.
const codeRejectedByTransport = -32005

// errLedgerUnavailable stands for the server's "ledger is unavailable"
// answer: its store call failed, so whether it applied is unknown.
var errLedgerUnavailable = errors.New("server: the confirmation ledger is unavailable")

// fileID is the partition key of the approval for the file at path.
//
// The ledger's confirmation id travels sealed inside the requestState, so
// a client never sees it. Each approval here gets a file of its own and
// exactly one first round, so the file names the confirmation one to one;
// its path, hashed with SHA-256 and truncated to the 16 bytes of a
// ledger.ID, is a deterministic key that the recorder knows when the
// first round is called (the requestState token only exists once it has
// returned). Every retry carries that file's path with that file's token.
func fileID(path string) ledger.ID {
	sum := sha256.Sum256([]byte("mcp-confirm linearizability e2e\x00" + path))
	var id ledger.ID
	copy(id[:], sum[:])
	return id
}

// approval is one file and the question asked about it.
type approval struct {
	path    string
	id      ledger.ID
	replica int    // the replica that asked
	state   string // the sealed requestState; set before it is published

	racers atomic.Int32 // retries in flight
	// deleted counts "Deleted" answers, notDeleted the redeems the ledger
	// let through but the tool then refused or failed (the file was gone
	// or changed), unknownRedeems the redeems whose outcome is unknown,
	// and replayed the retries answered "Deleted" from the record.
	deleted, notDeleted, unknownRedeems, replayed atomic.Int32
}

// claim takes one of the approval's racer slots, if one is free.
func (a *approval) claim() bool {
	for {
		n := a.racers.Load()
		if n >= e2eRacers {
			return false
		}
		if a.racers.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// e2eRun is one recording against a set of replicas sharing a root.
type e2eRun struct {
	t    *testing.T
	rec  *Recorder
	root string
	hot  []atomic.Pointer[approval]
	next atomic.Uint64 // the hot slot the next question fills
	seq  atomic.Uint64 // file names

	mu    sync.Mutex
	files []*approval // every file created, asked about or not

	problems atomic.Int32 // answers the test did not expect (each fails it)
	unknown  atomic.Int32 // outcomes unknown (transport errors, timeouts)
	// crossSpends and crossOK count retries sent to another replica than
	// the one that asked, and those that spent the confirmation.
	crossSpends, crossOK atomic.Int32
	// noRecord counts "no record of this confirmation" answers.
	noRecord atomic.Int32
}

// problem fails the test with an unexpected answer, logging the first few.
func (r *e2eRun) problem(format string, args ...any) {
	if r.problems.Add(1) <= 20 {
		r.t.Errorf(format, args...)
	}
}

// startReplica serves one server over streamable HTTP and returns its URL.
func startReplica(t *testing.T, name string, keys [][]byte, root string, store ledger.Store) string {
	t.Helper()
	srv, err := server.New(server.Options{
		Setup: confirm.Setup{
			Name:   name,
			Keys:   keys,
			TTL:    e2eTTL,
			Store:  store,
			Logger: slog.New(slog.DiscardHandler), // thousands of expected refusals
		},
		Roots: []string{root},
	})
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

// newKeys returns fresh requestState keys, shared by a test's replicas.
func newKeys(t *testing.T) [][]byte {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return [][]byte{key}
}

// connectMRTR opens a 2026-07-28 session to url with its own HTTP
// connection pool, as a separate client would. The client declares
// elicitation (the tool refuses clients that cannot answer) but returns
// input_required to the caller instead of retrying itself.
func connectMRTR(ctx context.Context, url string, loss *lossyHTTP) (*mcp.ClientSession, func(), error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	var rt http.RoundTripper = tr
	if loss != nil {
		rt = lossyTransport{loss, tr}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "linearizability", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return nil, errors.New("in-process elicitation: this client retries by hand")
		},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: rt}},
		&mcp.ClientSessionOptions{ProtocolVersion: requeststate.ProtocolMRTR})
	if err != nil {
		tr.CloseIdleConnections()
		return nil, nil, err
	}
	if v := cs.InitializeResult().ProtocolVersion; v != requeststate.ProtocolMRTR {
		cs.Close()
		tr.CloseIdleConnections()
		return nil, nil, fmt.Errorf("negotiated protocol %s, want %s", v, requeststate.ProtocolMRTR)
	}
	return cs, func() { cs.Close(); tr.CloseIdleConnections() }, nil
}

// lossyHTTP makes the clients' connections lose some tools/call requests
// before they are sent and some replies after the server has answered —
// the caller sees an error either way and cannot tell which: every 37th
// request, every 41st reply, and the reply of every 4th deletion (so that
// some deletions surely go unseen, and their retries are answered from the
// record). Faults are deterministic in the count
// of calls over all sessions, not random.
type lossyHTTP struct {
	armed                     atomic.Bool // set once every session is connected
	calls, deletions          atomic.Uint64
	lostRequests, lostReplies atomic.Int32
}

var (
	errLostRequest = errors.New("injected fault: request lost before it was sent")
	errLostReply   = errors.New("injected fault: reply lost after the server answered")
)

// lossyTransport is one session's connection through a lossyHTTP.
type lossyTransport struct {
	loss *lossyHTTP
	next http.RoundTripper
}

func (l lossyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !l.loss.armed.Load() || req.Method != http.MethodPost {
		return l.next.RoundTrip(req)
	}
	n := l.loss.calls.Add(1)
	if n%37 == 0 {
		if req.Body != nil {
			req.Body.Close()
		}
		l.loss.lostRequests.Add(1)
		return nil, errLostRequest
	}
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	// Read the reply to its end (the server has finished), then lose it
	// or hand it on.
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	deleted := bytes.Contains(body, []byte(`Deleted `)) && !bytes.Contains(body, []byte(`earlier execution`)) &&
		l.loss.deletions.Add(1)%4 == 0
	if n%41 == 0 || deleted {
		l.loss.lostReplies.Add(1)
		return nil, errLostReply
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// e2eSetup is what recordEndToEnd runs against.
type e2eSetup struct {
	urls                   []string // the replicas, sharing root
	root                   string
	goroutines, operations int
	skew                   time.Duration // the recorder's clock-skew allowance
	loss                   *lossyHTTP    // nil: no injected faults
}

// recordEndToEnd races s.goroutines clients, spread round-robin over the
// replicas, through s.operations operations.
func recordEndToEnd(t *testing.T, s e2eSetup) (History, *e2eRun) {
	t.Helper()
	urls, root, goroutines, operations := s.urls, s.root, s.goroutines, s.operations
	ctx, cancel := context.WithTimeout(t.Context(), e2eBudget)
	defer cancel()
	rec, err := NewRecorder(RecorderOptions{Skew: s.skew})
	if err != nil {
		t.Fatal(err)
	}
	r := &e2eRun{t: t, rec: rec, root: root, hot: make([]atomic.Pointer[approval], e2eHot)}

	begin := time.Now()
	sessions := make([]*mcp.ClientSession, goroutines)
	for g := range sessions {
		cctx, ccancel := context.WithTimeout(ctx, e2eOpTimeout)
		cs, closeSession, err := connectMRTR(cctx, urls[g%len(urls)], s.loss)
		ccancel()
		if err != nil {
			t.Fatalf("client %d: connect to replica %d: %v", g, g%len(urls), err)
		}
		t.Cleanup(closeSession) // before the servers' cleanups
		sessions[g] = cs
	}
	connected := time.Since(begin)
	if s.loss != nil {
		s.loss.armed.Store(true)
	}

	begin = time.Now()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g, cs := range sessions {
		n := operations / goroutines
		if g < operations%goroutines {
			n++
		}
		c := rec.Client()
		rnd := mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))
		wg.Go(func() {
			<-start
			for range n {
				if ctx.Err() != nil {
					return
				}
				opCtx, opCancel := context.WithTimeout(ctx, e2eOpTimeout)
				r.act(opCtx, cs, g%len(urls), c, rnd)
				opCancel()
			}
		})
	}
	close(start)
	wg.Wait()
	elapsed := time.Since(begin)

	h := rec.History()
	h.Goroutines = goroutines
	t.Logf("%d sessions over %d replica(s) connected in %v; %d operations recorded in %v (%.0f/s); %d outcomes unknown",
		goroutines, len(urls), connected.Round(time.Millisecond), len(h.Operations), elapsed.Round(time.Millisecond),
		float64(operations)/elapsed.Seconds(), r.unknown.Load())
	// Besides the clients' calls, the history holds the Complete each
	// redeem that acted made inside its call.
	calls := len(h.Operations)
	for _, op := range h.Operations {
		if op.Input.(Input).Op == OpComplete {
			calls--
		}
	}
	if ctx.Err() != nil || calls != operations {
		t.Fatalf("recorded %d of %d calls (%v); budget %v", calls, operations, ctx.Err(), e2eBudget)
	}
	return h, r
}

// act performs one operation: mostly a retry of a hot approval, otherwise
// (or when none is free) a new question.
func (r *e2eRun) act(ctx context.Context, cs *mcp.ClientSession, replica int, c *Client, rnd *mrand.Rand) {
	if rnd.IntN(1000) >= e2eIssueMix {
		if a := r.hot[rnd.IntN(len(r.hot))].Load(); a != nil && a.claim() {
			op := OpRedeem
			if rnd.IntN(4) == 0 {
				op = OpCancel
			}
			r.spend(ctx, cs, replica, c, a, op)
			a.racers.Add(-1)
			return
		}
	}
	r.issue(ctx, cs, replica, c)
}

// issue creates a file and asks to delete it: the first round.
func (r *e2eRun) issue(ctx context.Context, cs *mcp.ClientSession, replica int, c *Client) {
	path := filepath.Join(r.root, fmt.Sprintf("f%06d.txt", r.seq.Add(1)))
	if err := os.WriteFile(path, []byte(path), 0o600); err != nil {
		r.problem("create %s: %v", path, err)
		return
	}
	a := &approval{path: path, id: fileID(path), replica: replica}
	r.mu.Lock()
	r.files = append(r.files, a)
	r.mu.Unlock()

	// The server sets the expiry inside the call; now+TTL is a lower
	// bound of it, far beyond the end of the run either way.
	var state string
	c.Do(Call{Op: OpIssue, ID: a.id, Expires: time.Now().Add(e2eTTL)}, func() (ledger.Record, error) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": path}})
		var outcome error
		state, outcome = r.asked(res, err)
		return ledger.Record{}, outcome
	})
	if state != "" {
		a.state = state
		r.hot[r.next.Add(1)%uint64(len(r.hot))].Store(a)
	}
}

// asked maps the answer to a first round: the requestState, or the
// ledger's error.
func (r *e2eRun) asked(res *mcp.CallToolResult, err error) (string, error) {
	if err != nil {
		r.unknown.Add(1)
		return "", fmt.Errorf("first round, outcome unknown: %w", err)
	}
	if res.NeedsInput() {
		if _, ok := res.InputRequests[confirm.InputID].(*mcp.ElicitParams); ok && res.RequestState != "" {
			return res.RequestState, nil
		}
	}
	msg := resultText(res)
	if res.IsError {
		switch {
		case strings.Contains(msg, "Too many confirmations"):
			return "", ledger.ErrFull
		case strings.Contains(msg, "ledger is unavailable"):
			r.unknown.Add(1)
			return "", errLedgerUnavailable
		}
	}
	r.problem("unexpected answer to a first round: %s", describeResult(res))
	return "", fmt.Errorf("unexpected answer %q", msg)
}

// spend retries a's question with an accept (OpRedeem) or a decline
// (OpCancel). A redeem that acted (or may have) is followed, in the
// history, by the Complete the server made inside it.
func (r *e2eRun) spend(ctx context.Context, cs *mcp.ClientSession, replica int, c *Client, a *approval, op Op) {
	reply := &mcp.ElicitResult{Action: "decline"}
	call := Call{Op: op, ID: a.id}
	if op == OpRedeem {
		reply = &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}
		call.Lease = ledger.DefaultLease // the servers'
	}
	var ans answer
	_, err := c.Do(call, func() (ledger.Record, error) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{
			Name:           "delete_file",
			Arguments:      map[string]any{"path": a.path},
			InputResponses: mcp.InputResponseMap{confirm.InputID: reply},
			RequestState:   a.state,
		})
		ans = r.answered(op, a, res, err)
		return ans.rec, ans.err
	})
	if ans.acted != nil {
		c.Also(*ans.acted, ans.actedErr)
	}
	if replica != a.replica {
		r.crossSpends.Add(1)
		if err == nil {
			r.crossOK.Add(1)
		}
	}
}

// tagDeleted names, in the history, the outcome of a successful deletion:
// "Deleted" and the approval's own file, whatever the exact text.
const tagDeleted = 1

// replayNote ends the note impl/confirm puts before a result given back
// from the record.
const replayNote = "Nothing was run again."

// An answer is a retry's answer in the ledger's vocabulary: the record and
// error a store would have returned and, for a redeem that acted or may
// have (its outcome is unknown), the Complete the server made inside it,
// with actedErr nil if it is known to have happened.
type answer struct {
	rec      ledger.Record
	err      error
	acted    *Call
	actedErr error
}

// answered maps the answer to a retry onto the ledger's results, by the
// texts of impl/confirm.
func (r *e2eRun) answered(op Op, a *approval, res *mcp.CallToolResult, err error) answer {
	completed := func(kind ledger.OutcomeKind, tag uint64) *Call {
		return &Call{Op: OpComplete, ID: a.id, Kind: kind, Tag: tag}
	}
	unknown := func(err error, lost bool) answer {
		r.unknown.Add(1)
		if op != OpRedeem {
			return answer{err: err}
		}
		a.unknownRedeems.Add(1)
		if !lost {
			return answer{err: err} // the server knew the ledger failed: it did not act
		}
		// The server may have redeemed, deleted and recorded it.
		return answer{err: err, acted: completed(ledger.OutcomeDone, tagDeleted), actedErr: err}
	}
	if err != nil {
		// A JSON-RPC error from the server is the boundary refusing the
		// state (same keys, same name, long TTL: it should not) or a
		// protocol failure; the rest is the transport (which go-sdk also
		// reports as a JSON-RPC error, with its own code). Either way the
		// test cannot tell what the server did.
		var werr *jsonrpc.Error
		if errors.As(err, &werr) && werr.Code != codeRejectedByTransport {
			r.problem("%s of %s: JSON-RPC error %d %q", op, filepath.Base(a.path), werr.Code, werr.Message)
		}
		return unknown(fmt.Errorf("%s, outcome unknown: %w", op, err), true)
	}
	msg := resultText(res)
	name := filepath.Base(a.path)
	done := func(kind ledger.OutcomeKind, tag uint64) answer {
		return answer{rec: ledger.Record{Outcome: ledger.Outcome{Kind: kind, Result: TagResult(tag)}}, err: ledger.ErrDone}
	}
	acted := func(kind ledger.OutcomeKind, tag uint64) answer {
		return answer{rec: ledger.Record{Confirmation: ledger.Confirmation{ID: a.id}}, acted: completed(kind, tag)}
	}
	switch {
	case res.NeedsInput():
	case op == OpRedeem && strings.Contains(msg, "earlier execution"):
		_, original, _ := strings.Cut(msg, replayNote)
		if !res.IsError && strings.HasPrefix(original, "Deleted ") {
			a.replayed.Add(1)
			if !strings.Contains(original, name) {
				// Another confirmation's result, which the model refuses.
				r.problem("redeem of %s answered with another's result: %q", name, msg)
				return done(ledger.OutcomeDone, tagDeleted+1)
			}
			return done(ledger.OutcomeDone, tagDeleted)
		}
		if res.IsError {
			return done(ledger.OutcomeFailed, ResultTag([]byte(original)))
		}
	case !res.IsError && op == OpRedeem && strings.HasPrefix(msg, "Deleted "):
		a.deleted.Add(1)
		if !strings.Contains(msg, name) {
			// Report another confirmation than the one asked about, which
			// the model refuses as a successful spend.
			r.problem("redeem of %s deleted something else: %q", name, msg)
			return answer{}
		}
		return acted(ledger.OutcomeDone, tagDeleted)
	case !res.IsError && op == OpCancel && msg == "Not confirmed: nothing was done.":
		return answer{rec: ledger.Record{Confirmation: ledger.Confirmation{ID: a.id}}}
	case res.IsError:
		switch {
		case strings.Contains(msg, "being acted on right now"),
			op == OpCancel && strings.Contains(msg, "already approved, and the action is in progress"):
			return answer{err: ledger.ErrInProgress}
		case op == OpCancel && strings.Contains(msg, "already approved and acted on"):
			return answer{err: ledger.ErrDone} // the answer does not say which outcome
		case strings.Contains(msg, "may or may not have happened"):
			return answer{err: ledger.ErrInDoubt}
		case strings.Contains(msg, "declined earlier"):
			return answer{err: ledger.ErrCancelled}
		case strings.Contains(msg, "has expired"):
			return answer{err: ledger.ErrExpired}
		case strings.Contains(msg, "no record of this confirmation"):
			r.noRecord.Add(1)
			return answer{err: ledger.ErrUnknown}
		case strings.Contains(msg, "ledger is unavailable"):
			return unknown(errLedgerUnavailable, false)
		case op == OpRedeem && (strings.HasSuffix(msg, "Nothing was deleted.") || // delete_file's refusals at execution
			strings.Contains(msg, "approved action failed")):
			// The tool acts only after the ledger redeemed: this is a
			// successful redeem whose file was gone (or went while it
			// acted) — nothing else touches the files, so another redeem
			// got there first, which the model refuses. The failure is
			// recorded, and retries get it back.
			a.notDeleted.Add(1)
			return acted(ledger.OutcomeFailed, ResultTag([]byte(msg)))
		}
	}
	r.problem("unexpected answer to a %s of %s: %s", op, name, describeResult(res))
	return unknown(fmt.Errorf("unexpected answer %q", msg), false)
}

// fileReport is what the filesystem and the answers say about the approvals.
type fileReport struct {
	deleted, kept int
	// deletedUnseen counts deleted files with no "Deleted" answer: a
	// redeem's reply was lost.
	deletedUnseen int
	// replayed counts retries answered "Deleted" from the record.
	replayed int
	// notDeleted counts redeems the ledger let through but the tool
	// refused or failed, and redeemedTwice the files with more than one
	// successful redeem ("Deleted" answers and those).
	notDeleted, redeemedTwice int
}

// checkFiles checks the filesystem against the answers: a file is gone iff
// exactly one redeem answered "Deleted" — or none did and a redeem's
// outcome is unknown (it may have deleted the file with its reply lost) —
// and a retry was answered "Deleted" from the record only if it is gone.
// Files are never recreated, so a second successful redeem cannot delete
// a second time: it shows as a redeem the tool refused or failed, counted
// in notDeleted and redeemedTwice for the caller to judge.
func (r *e2eRun) checkFiles(t *testing.T) fileReport {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var fs fileReport
	for _, a := range r.files {
		_, err := os.Lstat(a.path)
		gone := errors.Is(err, iofs.ErrNotExist)
		if err != nil && !gone {
			t.Errorf("%s: %v", a.path, err)
			continue
		}
		name, d := filepath.Base(a.path), a.deleted.Load()
		switch {
		case d > 1:
			t.Errorf("%s: %d redeems answered Deleted", name, d)
		case d == 1 && !gone:
			t.Errorf("%s: a redeem answered Deleted but the file exists", name)
		case d == 0 && gone && a.unknownRedeems.Load() == 0:
			t.Errorf("%s: gone, but no redeem answered Deleted and none had an unknown outcome", name)
		case a.replayed.Load() > 0 && !gone:
			t.Errorf("%s: %d retries were answered Deleted from the record, but the file exists", name, a.replayed.Load())
		}
		fs.replayed += int(a.replayed.Load())
		nd := int(a.notDeleted.Load())
		fs.notDeleted += nd
		if int(d)+nd > 1 {
			fs.redeemedTwice++
		}
		if gone {
			fs.deleted++
			if d == 0 {
				fs.deletedUnseen++
			}
		} else {
			fs.kept++
		}
	}
	return fs
}

// redeemedOnce requires every successful redeem to have deleted its file,
// and no file to have been redeemed twice: a file is gone iff exactly one
// redeem returned ok.
func (f fileReport) redeemedOnce(t *testing.T) {
	t.Helper()
	if f.notDeleted > 0 || f.redeemedTwice > 0 {
		t.Errorf("%d redeems were let through by the ledger but deleted nothing; %d files redeemed more than once",
			f.notDeleted, f.redeemedTwice)
	}
}

// coveredEndToEnd checks that the run exercised the races it is meant to,
// so that a pass is not a pass by omission.
func coveredEndToEnd(t *testing.T, h History, f fileReport) {
	t.Helper()
	st := h.Stats()
	spends := func(res ledger.Result) int { return st.Results[OpRedeem][res] + st.Results[OpCancel][res] }
	for _, want := range []struct {
		what string
		n    int
	}{
		{"questions asked", st.Results[OpIssue][ledger.ResultOK]},
		{"redeems", st.Results[OpRedeem][ledger.ResultOK]},
		{"cancels", st.Results[OpCancel][ledger.ResultOK]},
		{"outcomes recorded", st.Results[OpComplete][ledger.ResultOK]},
		{"retries answered with the earlier execution's result", st.Results[OpRedeem][ledger.ResultDone]},
		{"retries answered Deleted from the record", f.replayed},
		{"retries refused as declined earlier", spends(ledger.ResultCancelled)},
		{"files deleted", f.deleted},
		{"files kept", f.kept},
	} {
		if want.n == 0 {
			t.Errorf("end-to-end run exercised no %s: %v", want.what, st)
		}
	}
	if st.Overlap < 2 {
		t.Errorf("no two retries of one approval were ever in flight together: %v", st)
	}
}

// TestEndToEnd checks the history of one server (in-memory ledger) raced
// over streamable HTTP by many MRTR clients, and the filesystem after it.
func TestEndToEnd(t *testing.T) {
	goroutines, operations := e2eSize()
	root := t.TempDir()
	url := startReplica(t, "mcp-confirm-e2e-"+randomName(t), newKeys(t), root, newMemory())
	h, r := recordEndToEnd(t, e2eSetup{urls: []string{url}, root: root, goroutines: goroutines, operations: operations})
	f := r.checkFiles(t)
	t.Logf("%d files deleted, %d kept", f.deleted, f.kept)
	f.redeemedOnce(t)
	coveredEndToEnd(t, h, f)
	Check(t, h, checkTimeout)
}

// TestEndToEndLostReplies checks one server whose clients' connections
// lose some requests and some replies: those calls are recorded with
// their outcome unknown (pending to the end of the history), and the
// filesystem may show a deletion whose "Deleted" answer was lost. As a
// control, the same history with those calls dropped — what a recorder
// that discarded failures would check — must not be linearizable, which
// shows that some of the lost calls did take effect on the server.
func TestEndToEndLostReplies(t *testing.T) {
	goroutines, operations := 64, 4_000
	if testing.Short() {
		goroutines, operations = 16, 1_000
	}
	root, loss := t.TempDir(), &lossyHTTP{}
	url := startReplica(t, "mcp-confirm-e2e-"+randomName(t), newKeys(t), root, newMemory())
	h, r := recordEndToEnd(t, e2eSetup{urls: []string{url}, root: root, goroutines: goroutines, operations: operations, loss: loss})
	f := r.checkFiles(t)
	st := h.Stats()
	t.Logf("injected %d lost requests and %d lost replies; %d files deleted (%d of them with the Deleted answer lost), %d kept",
		loss.lostRequests.Load(), loss.lostReplies.Load(), f.deleted, f.deletedUnseen, f.kept)
	if loss.lostRequests.Load() == 0 || loss.lostReplies.Load() == 0 || st.Unknown == 0 {
		t.Fatalf("no faults injected: %v", st)
	}
	// Each call that failed is one operation with an unknown outcome; a
	// redeem lost in transit adds the Complete it may have made.
	if unknownCalls := st.Unknown - st.Results[OpComplete][ledger.ResultError]; int(r.unknown.Load()) != unknownCalls {
		t.Errorf("%d calls failed, %d recorded with an unknown outcome", r.unknown.Load(), unknownCalls)
	}
	f.redeemedOnce(t)
	coveredEndToEnd(t, h, f)
	sequentialClients(t, h)
	Check(t, h, checkTimeout)

	t.Run("dropped", func(t *testing.T) {
		if f.deletedUnseen == 0 {
			t.Fatal("no deletion went unseen: nothing to show")
		}
		kept := History{Goroutines: h.Goroutines, Clients: h.Clients}
		for _, op := range h.Operations {
			if op.Output.(Output).Result != ledger.ResultError {
				kept.Operations = append(kept.Operations, op)
			}
		}
		rep := Verify(kept, checkTimeout)
		t.Logf("without its %d unknown outcomes: %s in %v", st.Unknown, rep.Result, rep.Elapsed.Round(time.Millisecond))
		if rep.Result != porcupine.Illegal {
			t.Fatalf("dropping the lost calls left a history porcupine calls %s, want Illegal", rep.Result)
		}
	})
}

// TestEndToEndRedis: two replicas on one Redis. It needs
// MCP_CONFIRM_REDIS_URL; without it the test is skipped, which is not a
// pass.
func TestEndToEndRedis(t *testing.T) {
	url := os.Getenv("MCP_CONFIRM_REDIS_URL")
	if url == "" {
		t.Skip("set MCP_CONFIRM_REDIS_URL (e.g. redis://127.0.0.1:6379/0) to check two server replicas on one Redis end to end")
	}
	name := "mcp-confirm-e2e-" + randomName(t)
	// storeurl.Open's namespace for this audience.
	t.Cleanup(func() { deleteRedisNamespace(t, url, "mcp-confirm:{"+name+"}:") })
	checkEndToEndShared(t, url, name)
}

// TestEndToEndPostgres: two replicas on one PostgreSQL database. It needs
// MCP_CONFIRM_POSTGRES_URL; without it the test is skipped, which is not
// a pass.
func TestEndToEndPostgres(t *testing.T) {
	url := os.Getenv("MCP_CONFIRM_POSTGRES_URL")
	if url == "" {
		t.Skip("set MCP_CONFIRM_POSTGRES_URL (e.g. postgres://user:pw@127.0.0.1:5432/db) to check two server replicas on one PostgreSQL end to end")
	}
	name := "mcp-confirm-e2e-" + randomName(t)
	// storeurl.Open's table and namespace for this audience.
	t.Cleanup(func() { deletePostgresNamespace(t, url, pgledger.DefaultTable, name) })
	checkEndToEndShared(t, url, name)
}

// checkEndToEndShared starts two replicas (same keys, same name, a store
// handle each on the store at url, one root) and races clients spread over
// both through the same approvals.
func checkEndToEndShared(t *testing.T, url, name string) {
	goroutines, operations := e2eSize()
	root, keys := t.TempDir(), newKeys(t)
	var urls []string
	for range 2 {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		store, closeStore, err := storeurl.Open(ctx, url, name, storeurl.Options{})
		cancel()
		if err != nil {
			t.Fatalf("storeurl.Open: %v", err)
		}
		t.Cleanup(closeStore)
		urls = append(urls, startReplica(t, name, keys, root, store))
	}
	h, r := recordEndToEnd(t, e2eSetup{urls: urls, root: root, goroutines: goroutines, operations: operations, skew: sharedSkew})
	f := r.checkFiles(t)
	t.Logf("%d files deleted, %d kept; %d retries went to the other replica, %d of them spent the confirmation",
		f.deleted, f.kept, r.crossSpends.Load(), r.crossOK.Load())
	f.redeemedOnce(t)
	coveredEndToEnd(t, h, f)
	if r.crossOK.Load() == 0 {
		t.Errorf("no confirmation was spent through the replica that did not ask for it")
	}
	Check(t, h, checkTimeout)
}

// TestEndToEndControls are the negative controls at this level: the same
// clients, mapping and checker must reject a server that is not one
// ledger answering each approval once, for the right reason.
func TestEndToEndControls(t *testing.T) {
	// A server whose ledger spends by check-then-act (see broken): some
	// approvals are redeemed twice, or redeemed and cancelled. The tool's
	// re-check of the file still stops a second deletion, so the
	// filesystem alone would not show the defect; the history does.
	t.Run("check-then-act ledger", func(t *testing.T) {
		controlLedger(t, &broken{checkThenAct: true}, doubleSpend, func(f fileReport) string {
			return fmt.Sprintf("%d files redeemed twice", f.redeemedTwice)
		})
	})

	// A server whose ledger answers a retry of a done approval by letting
	// it run again (see broken): the tool's re-check of the file refuses
	// the second deletion, so the filesystem alone would not show the
	// defect; the history does — a second successful redeem after the
	// first one's outcome was recorded (or while it was being recorded).
	t.Run("replay runs again", func(t *testing.T) {
		controlLedger(t, &broken{rerun: true}, redeemedAfterOutcome, func(fileReport) string { return "" })
	})

	// Two replicas with the same keys and name but an in-memory ledger
	// each, as a deployment that forgot --ledger would run. Every retry
	// sent to the other replica is refused ("no record of this
	// confirmation"), so nothing is deleted twice — but the two ledgers
	// are not one: checked as one, an approval answered "unknown" while
	// pending has no linearization.
	t.Run("separate ledgers", func(t *testing.T) {
		const goroutines, operations = 64, 2_000 // also under -short: the race needs contention
		root, keys, name := t.TempDir(), newKeys(t), "mcp-confirm-e2e-"+randomName(t)
		urls := []string{
			startReplica(t, name, keys, root, newMemory()),
			startReplica(t, name, keys, root, newMemory()),
		}
		h, r := recordEndToEnd(t, e2eSetup{urls: urls, root: root, goroutines: goroutines, operations: operations})
		f := r.checkFiles(t)
		t.Logf("%d files deleted, %d kept; %d retries went to the other replica, %d answered no record",
			f.deleted, f.kept, r.crossSpends.Load(), r.noRecord.Load())
		f.redeemedOnce(t)
		if r.crossSpends.Load() == 0 || r.noRecord.Load() != r.crossSpends.Load() || r.crossOK.Load() != 0 {
			t.Errorf("%d retries went to the other replica, %d answered no record, %d spent: want every one refused",
				r.crossSpends.Load(), r.noRecord.Load(), r.crossOK.Load())
		}
		wantIllegal(t, h, func(part []porcupine.Operation) bool {
			for _, op := range part {
				if op.Output.(Output).Result == ledger.ResultUnknown {
					return true
				}
			}
			return false
		})
	})
}

// controlLedger runs one server on the deliberately broken store s (the
// runs check-then-act and replay-runs-again of TestEndToEndControls):
// the defect must show in the history (defect), and every approval without
// a linearization must have been redeemed twice. more adds to the log.
func controlLedger(t *testing.T, s ledger.Store, defect func(History) (string, bool), more func(fileReport) string) {
	const goroutines, operations = 64, 2_000 // also under -short: the race needs contention
	root := t.TempDir()
	url := startReplica(t, "mcp-confirm-e2e-"+randomName(t), newKeys(t), root, s)
	h, r := recordEndToEnd(t, e2eSetup{urls: []string{url}, root: root, goroutines: goroutines, operations: operations})
	f := r.checkFiles(t)
	what, ok := defect(h)
	t.Logf("%d files deleted, %d kept; %d redeems let through by the ledger deleted nothing; %s; %s",
		f.deleted, f.kept, f.notDeleted, more(f), what)
	if !ok {
		t.Fatalf("the defect never showed in the history: %v", h.Stats())
	}
	wantIllegal(t, h, func(part []porcupine.Operation) bool { _, ok := doubleSpend(History{Operations: part}); return ok })
}

// wantIllegal requires porcupine to reject h, and every partition without
// a linearization to show the defect (witness), so that the rejection is
// for the right reason.
func wantIllegal(t *testing.T, h History, witness func([]porcupine.Operation) bool) {
	t.Helper()
	rep := Verify(h, checkTimeout)
	t.Logf("porcupine: %s in %v", rep.Result, rep.Elapsed.Round(time.Millisecond))
	if rep.Result != porcupine.Illegal {
		t.Fatalf("porcupine says %s, want Illegal: %v", rep.Result, rep.Stats)
	}
	bad := rep.Violations()
	if len(bad) == 0 {
		t.Fatal("Illegal, but no approval without a linearization")
	}
	for _, part := range bad {
		if !witness(part) {
			t.Fatalf("an approval without a linearization that does not show the defect:\n%s", Describe(part))
		}
	}
	t.Logf("%d approvals without a linearization, the first:\n%s", len(bad), Describe(bad[0]))
}

// resultText is the text content of a tool result.
func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func describeResult(res *mcp.CallToolResult) string {
	switch {
	case res.NeedsInput():
		return "input_required"
	case res.IsError:
		return fmt.Sprintf("tool error %q", resultText(res))
	}
	return fmt.Sprintf("result %q", resultText(res))
}
