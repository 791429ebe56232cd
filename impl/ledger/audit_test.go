package ledger_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/ledgertest"
)

// memoryAudit makes memory stores keeping their trail in a file.
var memoryAudit = ledgertest.AuditFactory{
	New: func(t testing.TB) (ledger.Store, audit.Trail) {
		m, f := newAuditedMemory(t)
		return m, f
	},
	Rewrite: func(t testing.TB, tr audit.Trail, lines [][]byte) {
		f := tr.(*audit.File)
		var b []byte
		for _, l := range lines {
			b = append(append(b, l...), '\n')
		}
		if err := os.WriteFile(f.Path(), b, 0o600); err != nil {
			t.Fatal(err)
		}
	},
	NewFaulty: func(t testing.TB) (ledger.Store, audit.Trail, func(bool)) {
		m, f := newAuditedMemory(t)
		var crash atomic.Bool
		ledger.SetAuditFault(m, func() error {
			if crash.Load() {
				return errors.New("injected crash between the record and the commit")
			}
			return nil
		})
		return m, f, crash.Store
	},
}

func newAuditedMemory(t testing.TB) (*ledger.Memory, *audit.File) {
	f, err := audit.OpenFile(filepath.Join(t.TempDir(), "audit.jsonl"), audit.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return ledger.NewMemory(ledger.MemoryOptions{Audit: f}), f
}

func TestAuditTrail(t *testing.T) { ledgertest.AuditTrail(t, memoryAudit) }

func TestAuditChainTamper(t *testing.T) { ledgertest.AuditChainTamper(t, memoryAudit) }

func TestAuditAtomicWithLedger(t *testing.T) { ledgertest.AuditAtomic(t, memoryAudit) }

// TestAuditedMemoryConformance runs the store suite on an audited memory
// store: the trail changes none of its answers.
func TestAuditedMemoryConformance(t *testing.T) {
	ledgertest.Conformance(t, ledgertest.Factory{New: func(t testing.TB) ledger.Store {
		m, _ := newAuditedMemory(t)
		return m
	}})
}
