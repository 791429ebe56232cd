package proxy_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/confirm/confirmtest"
	"github.com/mcp-confirm/mcp-confirm/impl/proxy"
)

// suitePath is the path of the file the suite's call about subject writes.
func suitePath(subject string) string { return "/tmp/" + subject + ".txt" }

// writes counts the write calls the upstream received for path.
func (u *upstream) writes(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, args := range u.calls["write"] {
		if args["path"] == path {
			n++
		}
	}
	return n
}

// frontEnd is the front-end suite's factory for the proxy: the test
// policy's asked write tool of a go-sdk upstream of its own, which replicas
// share.
func frontEnd() confirmtest.Factory {
	var mu sync.Mutex
	targets := map[*confirmtest.FrontEnd]*upstream{}
	start := func(t testing.TB, setup confirm.Setup, up *upstream) *confirmtest.FrontEnd {
		pol, err := proxy.ParsePolicy(strings.NewReader(testPolicy))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p, err := proxy.New(ctx, proxy.Options{Setup: setup, Connect: up.connect, Policy: pol})
		if err != nil {
			t.Fatalf("proxy.New: %v", err)
		}
		t.Cleanup(func() { p.Close() })
		fe := &confirmtest.FrontEnd{
			Server: p.MCP(),
			Call: func(subject string) *mcp.CallToolParams {
				return &mcp.CallToolParams{Name: "write", Arguments: map[string]any{"path": suitePath(subject), "content": "x"}}
			},
			Effects: func(subject string) int { return up.writes(suitePath(subject)) },
		}
		mu.Lock()
		targets[fe] = up
		mu.Unlock()
		return fe
	}
	return confirmtest.Factory{
		New: func(t testing.TB, setup confirm.Setup) *confirmtest.FrontEnd {
			return start(t, setup, newUpstream(t, eraMRTR))
		},
		Replica: func(t testing.TB, fe *confirmtest.FrontEnd, setup confirm.Setup) *confirmtest.FrontEnd {
			mu.Lock()
			up, ok := targets[fe]
			mu.Unlock()
			if !ok {
				t.Fatal("Replica of a front end the factory did not make")
			}
			return start(t, setup, up)
		},
	}
}

// The shared contract of a confirming front end, on the proxy.
func TestFrontEndSuite(t *testing.T) { confirmtest.Run(t, frontEnd()) }
