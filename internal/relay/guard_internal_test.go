package relay

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestGuardEventsBound: the guard holds one server-sent event of at most
// maxEventBytes, as go-sdk's reader bounds it: a longer one ends the
// stream with errEventTooLarge, so an upstream cannot make the proxy hold
// more. The bound is per event: keep-alive events without data, and
// events with data, together far past it, pass unchanged (the controls).
func TestGuardEventsBound(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat("a", maxEventBytes) + `"}]}}`
	keepalive := ": " + strings.Repeat("k", 1000) + "\n\n"
	small := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"
	for _, c := range []struct {
		name, in string
		err      error
	}{
		{"one event past the bound", "data: " + big + "\n\n", errEventTooLarge},
		{"keep-alives past the bound together", strings.Repeat(keepalive, maxEventBytes/len(keepalive)+2) + small, nil},
		{"events with data past the bound together", strings.Repeat(small, maxEventBytes/len(small)+2), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			err := guardEvents(strings.NewReader(c.in), &out)
			if !errors.Is(err, c.err) {
				t.Fatalf("guardEvents: %v, want %v", err, c.err)
			}
			if c.err == nil && out.String() != c.in {
				t.Errorf("the stream changed: %d bytes in, %d out", len(c.in), out.Len())
			}
		})
	}
}
