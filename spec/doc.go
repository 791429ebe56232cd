// Package spec holds the TLA+ specification of the confirmation ledger
// (Ledger.tla: at most one effect per approval, and every retry answered
// with the one recorded outcome; checked through MCLedger.tla and the
// Ledger*.cfg configurations) and the record of TLC's last run on it (tlc/).
//
// It has no Go API. Its tests guarantee that the committed TLC results
// describe the committed specification: every configuration's recorded
// SHA-256 must match the files TLC read, and the recorded output must show
// the outcome the configuration declares (success, or the violation a
// negative control must produce). They always run, so a machine without
// TLC still catches a specification edited without being re-checked. With
// $TLA2TOOLS_JAR set they also run TLC itself.
//
// What the tests do not guarantee: that the Go ledger (impl/ledger)
// implements this specification. That is the job of the ledger's own tests
// and of trace validation against this module (spec/trace).
package spec
