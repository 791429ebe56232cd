package mcptest

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
)

// recorder is a testing.TB whose Fatalf records the failure and ends the
// goroutine, as testing's does, without failing the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run runs check against a recorder and returns what it failed with.
func run(t *testing.T, check func(testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(r)
	}()
	<-done
	return r.failed
}

// Each checker passes what it must and fails what it must not (negative
// controls: a checker that passed everything would pass these too).
func TestCheckers(t *testing.T) {
	toolErr := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "This approval was already used."}}}
	ok := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}
	other := &jsonrpc.Error{Code: requeststate.RejectCode, Message: "Invalid params"}
	for _, tc := range []struct {
		name  string
		check func(testing.TB)
		fail  bool
	}{
		{"boundary: the frozen error", func(tb testing.TB) { WantBoundaryRefusal(tb, nil, requeststate.Rejection()) }, false},
		{"boundary: a tool error", func(tb testing.TB) { WantBoundaryRefusal(tb, toolErr, nil) }, true},
		{"boundary: another -32602", func(tb testing.TB) { WantBoundaryRefusal(tb, nil, other) }, true},
		{"boundary: a plain error", func(tb testing.TB) { WantBoundaryRefusal(tb, nil, errors.New("x")) }, true},
		{"tool: the refusal", func(tb testing.TB) { WantToolRefusal(tb, toolErr, nil, "already used") }, false},
		{"tool: other words", func(tb testing.TB) { WantToolRefusal(tb, toolErr, nil, "expired") }, true},
		{"tool: a success", func(tb testing.TB) { WantToolRefusal(tb, ok, nil, "done") }, true},
		{"tool: the boundary's error", func(tb testing.TB) { WantToolRefusal(tb, nil, requeststate.Rejection(), "") }, true},
	} {
		if failed := run(t, tc.check); (failed != "") != tc.fail {
			t.Errorf("%s: failed=%q, want failure %v", tc.name, failed, tc.fail)
		}
	}
}
