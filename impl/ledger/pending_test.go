package ledger_test

import (
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/ledgertest"
)

func TestMemoryPending(t *testing.T) {
	ledgertest.Pending(t, ledgertest.Factory{
		New: func(testing.TB) ledger.Store { return ledger.NewMemory(ledger.MemoryOptions{}) },
	})
}
