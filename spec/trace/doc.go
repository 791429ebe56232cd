// Package trace checks that the Go ledger (impl/ledger) behaves as the TLA+
// specification says: its tests drive real ledgers over real stores, log
// every operation as NDJSON, and ask TLC whether the log is a behaviour of
// spec/Ledger.tla (through spec/TraceLedger.tla).
//
// It has no Go API. The tests need TLC ($TLA2TOOLS_JAR) and are skipped
// without it. What they guarantee is limited to the logs they generate: a
// log that TLC accepts was produced by some behaviour of the specification;
// a log it rejects pins down a disagreement between code and spec. They say
// nothing about logs not generated, and nothing about the boundary
// (impl/requeststate) or the effect, which the ledger never sees.
package trace
