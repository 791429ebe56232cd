package redisledger_test

import (
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger/ledgertest"
)

func TestPending(t *testing.T) { ledgertest.Pending(t, factory(t)) }
