package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"os"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/storeurl"
	"github.com/mcp-confirm/mcp-confirm/impl/proxy"
	"github.com/mcp-confirm/mcp-confirm/internal/keyfile"
	"github.com/mcp-confirm/mcp-confirm/internal/ownfile"
	"github.com/mcp-confirm/mcp-confirm/internal/server"
)

// auditFlags are the audit trail's flags, shared by the server and the
// proxy.
type auditFlags struct {
	file            string
	keyFile         string
	every           time.Duration
	insecureNoAudit bool

	on bool // a trail is to be kept, once resolved
}

// defaultCheckpointEvery is how often the server signs the trail's head.
const defaultCheckpointEvery = time.Minute

func (a *auditFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.file, "audit-file", "", "with a memory: ledger, keep the audit trail (every question, decision, redemption, outcome, in-doubt\nand refused replay; `mcp-confirm audit verify`) in this JSONL file, fsync'd before each step takes effect\n(created 0600; its checkpoints in FILE.checkpoints). A redis:// or postgres:// ledger keeps its trail in its store")
	fs.StringVar(&a.keyFile, "audit-key", "", "sign a checkpoint of the audit trail every --audit-checkpoint-every with this key (`mcp-confirm keygen --audit FILE`;\nreadable by its owner only); each is also logged. Without it, no checkpoints: truncation cannot be detected")
	fs.DurationVar(&a.every, "audit-checkpoint-every", defaultCheckpointEvery, "how often to sign a checkpoint of the audit trail, with --audit-key (and once at exit)")
	fs.BoolVar(&a.insecureNoAudit, "insecure-no-audit", false, "keep no audit trail in a redis:// or postgres:// ledger, which keeps one by default")
}

// resolve decides whether a trail is kept with the ledger at url: by
// default in a shared store that can keep one; with memory:, only in
// --audit-file.
func (a *auditFlags) resolve(url string) error {
	kind, err := storeurl.Kind(url)
	if err != nil {
		return err
	}
	switch {
	case a.every <= 0:
		return fmt.Errorf("--audit-checkpoint-every %v: must be positive", a.every)
	case a.insecureNoAudit && (a.file != "" || a.keyFile != ""):
		return errors.New("--insecure-no-audit with --audit-file or --audit-key: choose one")
	case a.file != "" && kind != "memory":
		return fmt.Errorf("--audit-file is for a memory: ledger; a %s ledger keeps its trail in its store", kind)
	}
	a.on = !a.insecureNoAudit && (kind != "memory" || a.file != "")
	return nil
}

// readKey reads --audit-key, if given.
func (a *auditFlags) readKey() (ed25519.PrivateKey, error) {
	if a.keyFile == "" {
		return nil, nil
	}
	f, err := keyfile.OpenSecret(a.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--audit-key: %w", err)
	}
	defer f.Close()
	k, err := audit.ParseKey(f)
	if err != nil {
		return nil, fmt.Errorf("--audit-key %s: %w", a.keyFile, err)
	}
	return k, nil
}

// start signs a checkpoint of trail every a.every until ctx ends, and
// returns the function that stops that, signs a last one, then closes
// (what closeStore does). Without a trail it warns that none is kept.
func (a *auditFlags) start(ctx context.Context, trail audit.Trail, key ed25519.PrivateKey, ns string, log *slog.Logger, closeStore func()) func() {
	switch {
	case trail == nil:
		log.Warn("no audit trail is kept: give a memory: ledger --audit-file, or use a redis:// or postgres:// ledger")
		return closeStore
	case key == nil:
		log.Warn("the audit trail is kept without checkpoints (--audit-key): a truncation cannot be detected")
		return closeStore
	}
	var last uint64
	sign := func(ctx context.Context) {
		c, ok, err := audit.SignHead(ctx, trail, key, ns, last, time.Now())
		switch {
		case err != nil:
			log.Error("audit: checkpoint failed", "err", err)
		case ok:
			last = c.Seq
			b, _ := json.Marshal(c)
			// Logged too: a copy the store's administrator cannot reach.
			log.Info("audit: checkpoint", "checkpoint", string(b))
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(a.every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				sign(ctx)
			}
		}
	}()
	return func() {
		cancel()
		<-done
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		sign(ctx)
		closeStore()
	}
}

const auditUsage = `Usage:
  mcp-confirm audit verify [--ledger URL | --ledger-file FILE | --audit-file FILE] [--name NAME] --audit-pub FILE [--checkpoints FILE]
  mcp-confirm audit export [--ledger URL | --ledger-file FILE | --audit-file FILE] [--name NAME] [--since TIME]

verify checks the audit trail's hash chain and its signed checkpoints, and
names the first record edited, deleted, reordered, or the trail truncated
below a checkpoint; it exits 0 if it verifies, 1 if not. export writes the
records (from TIME on, RFC 3339) as JSONL to stdout, as stored.
The ledger URL defaults to $` + ledgerEnv + `. See docs/operating.md, "The audit trail".

Flags:
`

// runAudit runs mcp-confirm audit verify|export.
func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "verify" && args[0] != "export" {
		fmt.Fprint(stderr, "mcp-confirm audit: want verify or export\n"+auditUsage)
		return 2
	}
	cmd := args[0]
	fs := flag.NewFlagSet("mcp-confirm audit "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	s := sharedFlags{audit: auditFlags{every: defaultCheckpointEvery}}
	fs.StringVar(&s.name, "name", server.DefaultName, "the service's name, the trail's namespace: the --name it runs with (the proxy's default: "+proxy.DefaultName+")")
	fs.StringVar(&s.ledger, "ledger", "", "the ledger URL (a postgres:// ledger keeps the trail)")
	fs.StringVar(&s.ledgerFile, "ledger-file", "", "read the ledger URL from this file")
	fs.StringVar(&s.audit.file, "audit-file", "", "the trail file of a memory: ledger (--audit-file of the server)")
	pubFile := fs.String("audit-pub", "", "verify: the public key line (`mcp-confirm keygen --audit` prints it), or the signing key file")
	extra := fs.String("checkpoints", "", "verify: a file of more checkpoints, one JSON line each (e.g. from the server's log)")
	since := fs.String("since", "", "export: only records from this time on (RFC 3339)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), auditUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "mcp-confirm audit %s: %v\n", cmd, err)
		return code
	}
	if fs.NArg() > 0 {
		return fail(2, fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	var from time.Time
	if *since != "" {
		t, err := time.Parse(time.RFC3339Nano, *since)
		if err != nil {
			return fail(2, fmt.Errorf("--since: %w", err))
		}
		from = t
	}
	trail, closeTrail, code, err := openTrail(ctx, &s)
	if err != nil {
		return fail(code, err)
	}
	defer closeTrail()
	if cmd == "export" {
		return exportTrail(ctx, trail, from, stdout, fail)
	}
	var pub ed25519.PublicKey
	if *pubFile != "" {
		// The public key is what the checkpoints are trusted by: one
		// another local user could write, or rename into place, would
		// let them sign a rewritten trail of theirs. A FIFO must not
		// hold the verification.
		f, err := ownfile.Open(*pubFile, ownfile.Options{})
		if err != nil {
			return fail(2, fmt.Errorf("--audit-pub: %w", err))
		}
		pub, err = audit.ParsePublicKey(f)
		f.Close()
		if err != nil {
			return fail(2, fmt.Errorf("--audit-pub: %w", err))
		}
	}
	cps, err := trail.Checkpoints(ctx)
	if err != nil {
		return fail(1, err)
	}
	if *extra != "" {
		more, err := audit.ReadCheckpoints(*extra)
		if err != nil {
			return fail(2, fmt.Errorf("--checkpoints: %w", err))
		}
		cps = append(cps, more...)
	}
	if len(cps) > 0 && pub == nil {
		return fail(2, errors.New("the trail has signed checkpoints: give their public key (--audit-pub)"))
	}
	sum, err := audit.Verify(trail.Records(ctx, 1), cps, audit.VerifyOptions{Key: pub, Namespace: s.name})
	if err != nil {
		return fail(1, err)
	}
	fmt.Fprintf(stdout, "verified: records 1 to %d, in order and unedited; head %x\n", sum.Records, sum.Head)
	switch {
	case sum.Checkpoint == 0:
		fmt.Fprintln(stdout, "no signed checkpoint: a truncation, or a rewrite of the whole trail, cannot be detected")
	case sum.Checkpoint < sum.Records:
		fmt.Fprintf(stdout, "signed checkpoint at record %d: records %d to %d are not yet covered by a signature\n", sum.Checkpoint, sum.Checkpoint+1, sum.Records)
	default:
		fmt.Fprintf(stdout, "signed checkpoint at record %d: the whole trail\n", sum.Checkpoint)
	}
	return 0
}

// openTrail opens the trail the flags name, read-only in effect: a
// postgres:// ledger's (the store is opened, not migrated by anything
// but Open), or a memory: ledger's file.
func openTrail(ctx context.Context, s *sharedFlags) (audit.Trail, func(), int, error) {
	if err := storeurl.CheckName(s.name); err != nil {
		return nil, nil, 2, fmt.Errorf("--name: %w", err)
	}
	if s.audit.file != "" {
		if s.ledger != "" || s.ledgerFile != "" {
			return nil, nil, 2, errors.New("--audit-file with --ledger or --ledger-file: choose one")
		}
		return fileTrail(s.audit.file), func() {}, 0, nil
	}
	if err := s.resolve(os.Getenv); err != nil {
		return nil, nil, 2, err
	}
	if !s.audit.on {
		return nil, nil, 2, errors.New("a memory: ledger's trail is in a file: give --audit-file")
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	store, closeStore, err := storeurl.Open(ctx, s.url, s.name, storeurl.Options{Audit: true, AllowRollback: true,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, nil, 1, fmt.Errorf("%s: %w", s.source, err)
	}
	t := storeurl.Trail(store)
	if t == nil {
		closeStore()
		return nil, nil, 1, fmt.Errorf("%s keeps no audit trail", s.source)
	}
	return t, closeStore, 0, nil
}

// fileTrail reads the trail file at path, while a server may append to
// it (OpenFile would take its lock).
type fileTrail string

func (f fileTrail) Head(context.Context) (uint64, audit.Hash, error) {
	return 0, audit.Hash{}, errors.New("not served")
}
func (f fileTrail) Records(_ context.Context, from uint64) iter.Seq2[[]byte, error] {
	return audit.FileRecords(string(f), from)
}
func (f fileTrail) AddCheckpoint(context.Context, audit.Checkpoint) error {
	return errors.New("not served")
}
func (f fileTrail) Checkpoints(context.Context) ([]audit.Checkpoint, error) {
	return audit.ReadCheckpoints(audit.CheckpointPath(string(f)))
}

// exportTrail writes the records from from on as JSONL.
func exportTrail(ctx context.Context, t audit.Trail, from time.Time, stdout io.Writer, fail func(int, error) int) int {
	w := bufio.NewWriter(stdout)
	for line, err := range t.Records(ctx, 1) {
		if err != nil {
			return fail(1, err)
		}
		if !from.IsZero() {
			r, err := audit.Parse(line)
			if err != nil {
				return fail(1, fmt.Errorf("a record is not in canonical form (run mcp-confirm audit verify): %w", err))
			}
			if r.Time < from.UnixMicro() {
				continue
			}
		}
		w.Write(line)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return fail(1, err)
	}
	return 0
}
