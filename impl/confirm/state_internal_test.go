package confirm

import (
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// The requestState plaintext round-trips, and nothing else parses: an
// in-band state of before out-of-band approval reads as in band.
func TestStateRoundTrip(t *testing.T) {
	id := ledger.ID{1, 2, 3}
	for _, st := range []state{{id: id}, {id: id, mode: OutOfBand}, {id: id, mode: Both}, {id: id, mode: Both, yes: true}} {
		got, ok := parseState(encodeState(st))
		if !ok || got != st {
			t.Errorf("parseState(encodeState(%+v)) = %+v, %v", st, got, ok)
		}
	}
	if got, ok := parseState(statePrefix + id.String()); !ok || got.mode != InBand {
		t.Errorf("an in-band state reads as %+v, %v", got, ok)
	}
	for _, s := range []string{"", statePrefix, statePrefix + id.String()[:31], statePrefix + id.String() + ".yes",
		statePrefix + id.String() + ".oob.yes", statePrefix + id.String() + ".", "confirm.v2." + id.String(), statePrefix + "0102030000000000000000000000000G"} {
		if st, ok := parseState(s); ok {
			t.Errorf("parseState(%q) = %+v: want refused", s, st)
		}
	}
}
