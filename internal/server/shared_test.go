package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger/storeurl"
)

// sharedStores lists the shared-store URLs under test; a store whose
// variable is unset is skipped with a message naming the variable (CI sets
// both and fails on any skip).
func sharedStores(t *testing.T) map[string]string {
	return map[string]string{
		"redis":    os.Getenv("MCP_CONFIRM_REDIS_URL"),
		"postgres": os.Getenv("MCP_CONFIRM_POSTGRES_URL"),
	}
}

func storeURL(t *testing.T, kind, url string) string {
	t.Helper()
	if url == "" {
		t.Skipf("set MCP_CONFIRM_%s_URL to run against a real %s", strings.ToUpper(kind), kind)
	}
	return url
}

// uniqueName is a fresh audience, so concurrent tests never share a
// namespace in the shared store.
func uniqueName(t *testing.T) string {
	b := make([]byte, 8)
	rand.Read(b)
	return "mcp-confirm-test-" + hex.EncodeToString(b)
}

// replica starts a server that keeps its confirmations in the store at url,
// as one replica of a deployment named name.
func replica(t *testing.T, url, name, root string) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store, closeStore, err := storeurl.Open(ctx, url, name, storeurl.Options{})
	if err != nil {
		t.Fatalf("storeurl.Open: %v", err)
	}
	t.Cleanup(closeStore)
	return newEnv(t, envOptions{roots: []string{root}, name: name, store: store})
}

// A replica restarted between question and answer (same keys, same shared
// store) still honours the approval, exactly once; a replay afterwards gets
// the recorded result and deletes nothing.
func TestRestartKeepsApproval(t *testing.T) {
	for kind, url := range sharedStores(t) {
		t.Run(kind, func(t *testing.T) {
			url := storeURL(t, kind, url)
			root, name := t.TempDir(), uniqueName(t)
			before := replica(t, url, name, root)
			before.root = root
			f := before.file("a.txt", "a")
			state := ask(t, before.connect(clientOptions{manual: true, answer: accept()}), f)
			before.srv.Close()

			after := replica(t, url, name, root)
			cs := after.connect(clientOptions{manual: true, answer: accept()})
			res, err := retry(cs, f, state, yes())
			wantDeleted(t, res, err, f)
			first := text(res)
			before.file("a.txt", "a")
			res, err = retry(cs, f, state, yes())
			wantReplayed(t, res, err, first)
			wantExists(t, f)
		})
	}
}

// proxy forwards TCP connections to target until cut, after which every
// connection, open or new, fails: a store that went away mid-flight.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	cut    bool
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	t.Cleanup(p.Cut)
	go p.serve()
	return p
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			u.Close()
			return
		}
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		go func() { io.Copy(u, c); u.Close() }()
		go func() { io.Copy(c, u); c.Close() }()
	}
}

// Cut closes the listener and every connection.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
}

// The store becomes unreachable between question and answer: the tool
// fails closed — it refuses, deletes nothing and says why — and asking
// again is refused the same way.
func TestStoreGoneFailsClosed(t *testing.T) {
	for kind, url := range sharedStores(t) {
		t.Run(kind, func(t *testing.T) {
			url := storeURL(t, kind, url)
			host := hostOf(t, url)
			p := newProxy(t, host)
			root, name := t.TempDir(), uniqueName(t)
			e := replica(t, strings.Replace(url, host, p.ln.Addr().String(), 1), name, root)
			e.root = root
			f := e.file("a.txt", "a")
			cs := e.connect(clientOptions{manual: true, answer: accept()})
			state := ask(t, cs, f)

			p.Cut()
			done := make(chan struct{})
			go func() {
				defer close(done)
				res, err := retry(cs, f, state, yes())
				wantToolRefusal(t, res, err, "ledger is unavailable")
				wantExists(t, f)
				res, err = call(cs, f)
				wantToolRefusal(t, res, err, "ledger is unavailable")
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the tool hung on an unreachable store")
			}
		})
	}
}

func hostOf(t *testing.T, rawURL string) string {
	t.Helper()
	i := strings.Index(rawURL, "://")
	if i < 0 {
		t.Fatalf("cannot find the host in %q", rawURL)
	}
	rest := rawURL[i+3:]
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = rest[at+1:]
	}
	if j := strings.IndexAny(rest, "/?"); j >= 0 {
		rest = rest[:j]
	}
	if _, _, err := net.SplitHostPort(rest); err != nil {
		t.Fatalf("host %q of %q: %v", rest, rawURL, err)
	}
	return rest
}
