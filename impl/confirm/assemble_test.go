package confirm_test

import (
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
)

func TestAssemble(t *testing.T) {
	if _, err := confirm.Assemble(confirm.Setup{}); err == nil {
		t.Fatal("Assemble without a name: want an error")
	}
	if _, err := confirm.Assemble(confirm.Setup{Name: "a", Keys: [][]byte{[]byte("short")}}); err == nil {
		t.Fatal("Assemble with a key the boundary refuses: want an error")
	}
	for _, tc := range []struct {
		ttl, want time.Duration
	}{
		{0, requeststate.DefaultTTL},
		{time.Minute, time.Minute},
	} {
		p, err := confirm.Assemble(confirm.Setup{Name: "a", TTL: tc.ttl})
		if err != nil {
			t.Fatalf("Assemble(TTL %v): %v", tc.ttl, err)
		}
		if p.Boundary == nil || p.Ledger == nil || p.Flow == nil {
			t.Fatalf("Assemble(TTL %v): missing parts %+v", tc.ttl, p)
		}
		// One TTL for the sealed state and the ledger: every retry the
		// boundary admits is answered from the ledger's record.
		if got := p.Ledger.TTL(); got != tc.want {
			t.Errorf("Assemble(TTL %v): ledger TTL %v, want %v", tc.ttl, got, tc.want)
		}
	}
}

// The serverInfo a front end announces: its name, and the build's version
// unless it names one.
func TestAssembleImplementation(t *testing.T) {
	for _, tt := range []struct{ version, want string }{
		{"", confirm.Version()},
		{"1.2.3", "1.2.3"},
	} {
		p, err := confirm.Assemble(confirm.Setup{Name: "a", Version: tt.version})
		if err != nil {
			t.Fatal(err)
		}
		if got := *p.Implementation; got.Name != "a" || got.Version != tt.want {
			t.Errorf("Assemble(Version %q): serverInfo %+v, want a %s", tt.version, got, tt.want)
		}
	}
}
