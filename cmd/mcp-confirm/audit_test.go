package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
	"github.com/mcp-confirm/mcp-confirm/internal/keyfile"
)

// TestAuditNoSecrets runs confirmed deletes through the binary (HTTP,
// the generated bearer token, a key file, an audit file and signing key)
// with a real go-sdk client in both eras — the 2026-07-28 one answering by
// hand, so that the test holds the sealed requestState — and searches the
// trail and its checkpoints for the sealed state, the token and the key
// bytes (raw, hex, base64): none is there. The trail holds the questions
// and answers, a periodic checkpoint signs its head while the server
// runs (and is logged), and mcp-confirm audit verify verifies it; a copy
// with one record edited does not.
func TestAuditNoSecrets(t *testing.T) {
	dir := t.TempDir()
	runtimeDir := filepath.Join(dir, "run")
	if err := os.Mkdir(runtimeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(dir, "keys")
	if err := keyfile.Create(keys); err != nil {
		t.Fatal(err)
	}
	keyBytes, err := keyfile.Read(keys)
	if err != nil {
		t.Fatal(err)
	}
	signing, signingFile, pubFile := auditKeys(t, dir)
	trail := filepath.Join(dir, "audit.jsonl")
	root := t.TempDir()
	p := startBinary(t, []string{"XDG_RUNTIME_DIR=" + runtimeDir}, "--root", root, "--http", "127.0.0.1:0",
		"--key-file", keys, "--audit-file", trail, "--audit-key", signingFile, "--audit-checkpoint-every", "200ms")
	_, token := generatedToken(t, p)

	// 2026-07-28, by hand: ask, then answer with the sealed state.
	c := mcp.NewClient(&mcp.Implementation{Name: "audit-test", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return nil, errors.New("answered by hand")
		},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: p.url,
		HTTPClient: &http.Client{Transport: bearerTransport{token}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	f := filepath.Join(root, "a.txt")
	if err := os.WriteFile(f, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"path": f}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_file", Arguments: args})
	if err != nil || !res.NeedsInput() || res.RequestState == "" {
		t.Fatalf("ask: %v %+v", err, res)
	}
	state := res.RequestState
	answer := &mcp.CallToolParams{Name: "delete_file", Arguments: args, RequestState: state,
		InputResponses: mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}}}
	if res, err = cs.CallTool(context.Background(), answer); err != nil || res.IsError {
		t.Fatalf("answer: %v %+v", err, res)
	}
	// The replay is answered from the record: nothing runs again.
	if res, err = cs.CallTool(context.Background(), answer); err != nil || len(res.Content) == 0 ||
		!strings.Contains(res.Content[0].(*mcp.TextContent).Text, "already used") {
		t.Fatalf("replay: %v %+v, want the earlier result", err, res)
	}
	// The older era: the go-sdk elicits in-process.
	old, err := connect(t, p.url, token, "2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	deleteConfirmed(t, old, root)

	// A periodic checkpoint signs the head while the server runs, and is
	// logged.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		cps, err := audit.ReadCheckpoints(audit.CheckpointPath(trail))
		if err == nil && len(cps) > 0 && cps[len(cps)-1].Seq == 7 && strings.Contains(p.stderr.String(), "audit: checkpoint") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no periodic checkpoint of record 7: %v %v\n%s", cps, err, p.stderr.String())
		}
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Wait()
	records, err := os.ReadFile(trail)
	if err != nil {
		t.Fatal(err)
	}
	cps, err := os.ReadFile(audit.CheckpointPath(trail))
	if err != nil {
		t.Fatalf("no checkpoint: %v\n%s", err, p.stderr.String())
	}
	all := append(records, cps...)
	secrets := map[string]string{"sealed requestState": state, "bearer token": token, "audit signing key line": signing}
	for i, k := range append(keyBytes, mustKeySeed(t, signing)) {
		for enc, s := range map[string]string{"raw": string(k), "hex": hex.EncodeToString(k),
			"base64": base64.StdEncoding.EncodeToString(k), "base64url": base64.RawURLEncoding.EncodeToString(k)} {
			secrets["key "+string(rune('0'+i))+" "+enc] = s
		}
	}
	for name, s := range secrets {
		if len(s) < 16 {
			t.Fatalf("%s is %d bytes: too short to search for", name, len(s))
		}
		if bytes.Contains(all, []byte(s)) {
			t.Errorf("the audit trail holds the %s", name)
		}
	}
	// The trail is not empty: its search means something.
	var kinds []string
	for line, err := range audit.Lines(records) {
		if err != nil {
			t.Fatal(err)
		}
		r, err := audit.Parse(line)
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, string(r.Kind())+"/"+r.Answer)
		if r.Kind() == audit.Asked && !strings.Contains(r.Question, "a.txt") {
			t.Errorf("a question's record lacks its text: %s", line)
		}
	}
	want := "asked/ redeemed/accept outcome/ refused/accept asked/ redeemed/accept outcome/"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("the trail's records: %s\nwant %s\n%s", got, want, records)
	}

	code, stdout, stderr := runBinary(t, nil, "", "audit", "verify", "--audit-file", trail, "--audit-pub", pubFile)
	if code != 0 || !strings.Contains(stdout, "signed checkpoint at record 7: the whole trail") {
		t.Fatalf("audit verify: %d\n%s%s", code, stdout, stderr)
	}
	// The same public key where another local user could write it or
	// rename theirs into place (and so sign a rewritten trail), or a FIFO
	// there: refused before anything is verified.
	pub, err := os.ReadFile(pubFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, want string
		plant      func(t *testing.T, path string)
	}{
		{"others may write it", "may write it", func(t *testing.T, p string) {
			writeMode(t, p, pub, 0o666)
		}},
		{"in a directory others may write", "may replace", func(t *testing.T, p string) {
			writeMode(t, p, pub, 0o644)
			if err := os.Chmod(filepath.Dir(p), 0o777); err != nil {
				t.Fatal(err)
			}
		}},
		{"a FIFO", "not a regular file", func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run("public key "+c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "keys", "audit.pub")
			if err := os.Mkdir(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			c.plant(t, p)
			code, stdout, stderr := runBinary(t, nil, "", "audit", "verify", "--audit-file", trail, "--audit-pub", p)
			if code != 2 || !strings.Contains(stderr, "--audit-pub") || !strings.Contains(stderr, c.want) || strings.Contains(stdout, "checkpoint") {
				t.Fatalf("audit verify: %d, want 2 saying %q\n%s%s", code, c.want, stdout, stderr)
			}
		})
	}
	// A FIFO where verify reads the trail or more checkpoints is refused
	// at once; it would hold the command until someone wrote to it.
	pipe := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
	}{
		{"trail", []string{"--audit-file", pipe, "--audit-pub", pubFile}, 1},
		{"checkpoints", []string{"--audit-file", trail, "--audit-pub", pubFile, "--checkpoints", pipe}, 2},
	} {
		code, stdout, stderr := runBinary(t, nil, "", append([]string{"audit", "verify"}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, "not a regular file") || strings.Contains(stdout, "verified") {
			t.Errorf("audit verify, a FIFO as the %s: %d, want %d saying it is not a regular file\n%s%s", c.name, code, c.code, stdout, stderr)
		}
	}
	if code, stdout, stderr := runBinary(t, nil, "", "audit", "export", "--audit-file", pipe); code == 0 || !strings.Contains(stderr, "not a regular file") {
		t.Errorf("audit export of a FIFO: %d\n%s%s", code, stdout, stderr)
	}
	// An edit of the second record, kept canonical, is named.
	lines := bytes.SplitAfter(records, []byte("\n"))
	r, _ := audit.Parse(bytes.TrimSuffix(lines[1], []byte("\n")))
	r.Answer = "decline"
	lines[1] = append(r.Canonical(), '\n')
	if err := os.WriteFile(trail, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runBinary(t, nil, "", "audit", "verify", "--audit-file", trail, "--audit-pub", pubFile)
	if code != 1 || !strings.Contains(stderr, "record 2 edited") {
		t.Fatalf("audit verify of an edited trail: %d\n%s%s", code, stdout, stderr)
	}
	// Export from a time after every record writes nothing; from before, all.
	if code, stdout, _ := runBinary(t, nil, "", "audit", "export", "--audit-file", trail, "--since", time.Now().Add(time.Hour).Format(time.RFC3339)); code != 0 || stdout != "" {
		t.Errorf("export --since an hour from now: %d %q", code, stdout)
	}
	if code, stdout, _ := runBinary(t, nil, "", "audit", "export", "--audit-file", trail, "--since", "2000-01-01T00:00:00Z"); code != 0 || stdout != string(bytes.Join(lines, nil)) {
		t.Errorf("export --since 2000: %d\n%s", code, stdout)
	}
}

// mustKeySeed returns the Ed25519 seed of a signing key line.
func mustKeySeed(t *testing.T, line string) []byte {
	t.Helper()
	k, err := audit.ParseKey(strings.NewReader(line))
	if err != nil {
		t.Fatal(err)
	}
	return k.Seed()
}

// TestAuditVerifyRedis runs the binary on a redis:// ledger, which keeps
// the audit trail by default, with a signing key: a real go-sdk client of
// the older era deletes a file, confirmed. At exit the server signs a
// checkpoint into Redis. mcp-confirm audit verify then verifies the trail
// the server's Redis scripts wrote, export writes it (asked, redeemed,
// outcome; no bearer token or key in it), and an edit made in Redis
// (LSET, kept canonical) is named.
func TestAuditVerifyRedis(t *testing.T) {
	url := os.Getenv("MCP_CONFIRM_REDIS_URL")
	if url == "" {
		t.Skip("set MCP_CONFIRM_REDIS_URL (e.g. redis://127.0.0.1:6379/0) to run against a real Redis")
	}
	ctx := context.Background()
	var b [6]byte
	rand.Read(b[:])
	name := "audit-test-" + hex.EncodeToString(b[:])
	ns := "mcp-confirm:{" + name + "}:"
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opts)
	defer rc.Close()
	t.Cleanup(func() {
		if keys, err := rc.Keys(context.Background(), ns+"*").Result(); err == nil && len(keys) > 0 {
			rc.Del(context.Background(), keys...)
		}
	})
	dir := t.TempDir()
	runtimeDir := filepath.Join(dir, "run")
	if err := os.Mkdir(runtimeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(dir, "keys")
	if err := keyfile.Create(keys); err != nil {
		t.Fatal(err)
	}
	signing, signingFile, pubFile := auditKeys(t, dir)
	env := []string{"MCP_CONFIRM_LEDGER=" + url}
	root := t.TempDir()
	p := startBinary(t, append(env, "XDG_RUNTIME_DIR="+runtimeDir), "--root", root, "--http", "127.0.0.1:0",
		"--name", name, "--key-file", keys, "--audit-key", signingFile)
	_, token := generatedToken(t, p)
	cs, err := connect(t, p.url, token, "2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	deleteConfirmed(t, cs, root)
	cs.Close()
	p.cmd.Process.Signal(syscall.SIGTERM) // a last checkpoint at exit
	p.cmd.Wait()

	code, stdout, stderr := runBinary(t, env, "", "audit", "verify", "--name", name, "--audit-pub", pubFile)
	if code != 0 || !strings.Contains(stdout, "signed checkpoint at record 3: the whole trail") {
		t.Fatalf("audit verify: %d\n%s%s\nserver:\n%s", code, stdout, stderr, p.stderr.String())
	}
	code, exported, stderr := runBinary(t, env, "", "audit", "export", "--name", name, "--since", "2000-01-01T00:00:00Z")
	if code != 0 {
		t.Fatalf("audit export: %d\n%s", code, stderr)
	}
	var kinds []string
	for line, err := range audit.Lines([]byte(exported)) {
		if err != nil {
			t.Fatal(err)
		}
		r, err := audit.Parse(line)
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, string(r.Kind()))
	}
	if got := strings.Join(kinds, " "); got != "asked redeemed outcome" {
		t.Fatalf("the exported trail: %s\n%s", got, exported)
	}
	for what, secret := range map[string]string{"bearer token": token, "signing key": signing} {
		if strings.Contains(exported, secret) {
			t.Errorf("the trail holds the %s", what)
		}
	}
	// An edit of the second record, made in Redis and kept canonical, is named.
	line, err := rc.LIndex(ctx, ns+"a1:log", 1).Result()
	if err != nil {
		t.Fatal(err)
	}
	r, err := audit.Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	r.Answer = "decline"
	if err := rc.LSet(ctx, ns+"a1:log", 1, r.Canonical()).Err(); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runBinary(t, env, "", "audit", "verify", "--name", name, "--audit-pub", pubFile)
	if code != 1 || !strings.Contains(stderr, "record 2 edited") {
		t.Fatalf("audit verify of an edited trail: %d\n%s%s", code, stdout, stderr)
	}
}

// TestProxyAuditTrail runs a confirmed call through the proxy binary (a
// memory ledger with --audit-file) in front of the reference server, in
// both eras: the proxy's trail records its question exactly as the
// client was shown it, the person's yes and the outcome, and the
// upstream's own question as relayed (the proxy's continuation); and it
// verifies.
func TestProxyAuditTrail(t *testing.T) {
	bin := binary(t)
	root := t.TempDir()
	policy := filepath.Join(t.TempDir(), "policy.toml")
	if err := os.WriteFile(policy, []byte("name = \"reference\"\nask = [\"delete_file\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, era := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(era, func(t *testing.T) {
			trail := filepath.Join(t.TempDir(), "proxy-audit.jsonl")
			f := filepath.Join(root, "a.txt")
			if err := os.WriteFile(f, []byte("a"), 0o644); err != nil {
				t.Fatal(err)
			}
			var (
				mu    sync.Mutex
				asked []string
			)
			client := mcp.NewClient(&mcp.Implementation{Name: "proxy-audit-test", Version: "1"}, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					asked = append(asked, req.Params.Message)
					mu.Unlock()
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
				},
			})
			cmd := exec.Command(bin, "proxy", "--policy", policy, "--audit-file", trail, "--", bin, "--root", root)
			cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: era})
			if err != nil {
				t.Fatal(err)
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": f}})
			if err != nil || res.IsError {
				t.Fatalf("delete_file through the proxy: err=%v res=%+v", err, res)
			}
			cs.Close()
			b, err := os.ReadFile(trail)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := audit.Verify(audit.Lines(b), nil, audit.VerifyOptions{}); err != nil {
				t.Fatalf("the proxy's trail does not verify: %v\n%s", err, b)
			}
			var questions, accepted, outcomes int
			for line := range audit.Lines(b) {
				r, _ := audit.Parse(line)
				switch r.Kind() {
				case audit.Asked:
					mu.Lock()
					if questions < len(asked) && r.Question != asked[questions] {
						t.Errorf("question %d recorded as %q, shown as %q", questions+1, r.Question, asked[questions])
					}
					mu.Unlock()
					questions++
				case audit.Redeemed:
					if r.Answer == "accept" && r.Tool == "delete_file" {
						accepted++
					}
				case audit.Outcome:
					outcomes++
				}
			}
			const wantQuestions = 2 // the proxy's, then the upstream's own, relayed
			if questions != wantQuestions || accepted != 1 || outcomes < 1 {
				t.Errorf("the proxy's trail holds %d questions (want %d), %d yes (want 1), %d outcomes:\n%s", questions, wantQuestions, accepted, outcomes, b)
			}
		})
	}
}

// writeMode writes b to a new file at path with permissions perm.
func writeMode(t *testing.T, path string, b []byte, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
}

// auditKeys writes a new audit signing key and its public half into dir,
// as `mcp-confirm keygen --audit` would, and returns the key's line and
// the two files' paths.
func auditKeys(t *testing.T, dir string) (signing, signingFile, pubFile string) {
	t.Helper()
	signing, pub := audit.GenerateKey()
	signingFile, pubFile = filepath.Join(dir, "audit.key"), filepath.Join(dir, "audit.pub")
	if err := keyfile.WriteNew(signingFile, signing+"\n"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubFile, []byte(pub+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return signing, signingFile, pubFile
}
