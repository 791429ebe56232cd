package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// An Op is the ledger operation a record is of: what the caller asked
// the store to do, known before the store decides (so it is in the
// record's prefix). What came of it is the record's Result.
type Op string

// The operations, as ledger.Action names them, in lower case.
const (
	OpIssue    Op = "issue"
	OpRedeem   Op = "redeem"
	OpCancel   Op = "cancel"
	OpDecide   Op = "decide"
	OpComplete Op = "complete"
)

// known reports whether op is one of the operations.
func (op Op) known() bool {
	switch op {
	case OpIssue, OpRedeem, OpCancel, OpDecide, OpComplete:
		return true
	}
	return false
}

// A Kind says what a record records: its Op and Result together.
type Kind string

// The kinds of record.
const (
	// Asked: a question was put and its confirmation issued.
	Asked Kind = "asked"
	// Decided: an approver decided out of band: Approver and Decision say
	// who and how.
	Decided Kind = "decided"
	// Redeemed: the confirmation was redeemed: the person's in-band
	// answer (Answer) or the approvals out of band let the action run,
	// once.
	Redeemed Kind = "redeemed"
	// Cancelled: the confirmation was spent without acting: declined in
	// band, withdrawn, or abandoned (Answer says which, as the front end
	// saw it).
	Cancelled Kind = "cancelled"
	// Outcome: the action's outcome, done or failed, was recorded.
	Outcome Kind = "outcome"
	// InDoubt: no one can tell whether the action happened: its outcome
	// was recorded as unknown, or its lease ended before one was (a
	// Complete refused "in_doubt").
	InDoubt Kind = "in_doubt"
	// Refused: a call the ledger refused without changing anything, the
	// reason in Result: a replayed approval (in_progress, done, in_doubt,
	// cancelled, declined), an expired or unknown confirmation, a second
	// decision.
	Refused Kind = "refused"
)

// Kind reports what r records.
func (r Record) Kind() Kind {
	switch {
	case r.Op == OpComplete && (r.Result == "in_doubt" || r.Result == "ok" && r.Outcome == "unknown"):
		return InDoubt
	case r.Result != "ok":
		return Refused
	}
	switch r.Op {
	case OpIssue:
		return Asked
	case OpDecide:
		return Decided
	case OpRedeem:
		return Redeemed
	case OpCancel:
		return Cancelled
	}
	return Outcome
}

// Recorded reports whether a store writes a record of op answered with
// result (a ledger.Result word): every answer but a store's failure
// ("error": nothing was decided), an Issue refused "full" or "exists"
// (nothing was asked: counted by the metrics), and a Redeem answered
// "awaiting_approval" (a poll while approvers decide: nothing changed).
func Recorded(op Op, result string) bool {
	switch {
	case result == "error":
		return false
	case op == OpIssue && result != "ok":
		return false
	case op == OpRedeem && result == "awaiting_approval":
		return false
	}
	return true
}

// Version is the record format's version, the "v" of every record.
const Version = 1

// A Record is one entry of the trail. Its fields are the only things a
// trail can hold: names, digests, the question's text, words and
// numbers. There is no field for a requestState, a token or a key, and
// no store puts one in any field.
//
// The fields up to Outcome are known to the caller before the store is
// called (the record's prefix); Seq, Time, Result and Prev are decided by
// the store inside its atomic step (its suffix), and come last in the
// canonical bytes, so that a store can hash the prefix outside its
// atomic step and finish the hash inside it ([Prefix], [Seal]).
type Record struct {
	Op Op
	// ID is the confirmation's id, 32 hex digits: not a secret (the
	// server logs it, the approval page's link names it); redeeming it
	// takes the sealed requestState, which no record holds.
	ID string
	// Principal, Tool and ArgsDigest are what the call binds: on Asked,
	// the confirmation's; on the others, the call's that made the
	// transition (the request's sealed binding), as the front end passed
	// them ([WithCall]); empty when unknown.
	Principal  string
	Tool       string
	ArgsDigest string
	// Question is, on Asked, the question exactly as shown.
	Question string
	// Deadline is, on Asked, the confirmation's expiry, in microseconds
	// since the Unix epoch; 0 otherwise.
	Deadline int64
	// Approver is, on Decided (and a refused decision), the approver's
	// identity as the approval page authenticated it.
	Approver string
	// Decision is, on Decided, "approve" or "decline".
	Decision string
	// Answer is the in-band answer or the reason, as the front end saw it
	// ([Call.Answer]): "accept" on a Redeemed approved in band,
	// "decline", "withdrawn", "call_failed", "policy_changed" on a
	// Cancelled.
	Answer string
	// Outcome is, on Outcome and InDoubt by Complete, the outcome the
	// caller recorded: "done", "failed" or "unknown".
	Outcome string

	// Seq is the record's position in its trail: 1, 2, 3... with no gap.
	Seq uint64
	// Time is the store's clock when it wrote the record, in microseconds
	// since the Unix epoch. Replicas' clocks may differ: the order of the
	// trail is Seq's, not Time's.
	Time int64
	// Result is what the store answered, as ledger.Result words: "ok", or
	// the refusal ("done", "in_doubt", "expired"...).
	Result string
	// Prev is the SHA-256 of the previous record's canonical bytes; all
	// zero for the first.
	Prev [sha256.Size]byte
}

// Hash is the SHA-256 of a record's canonical bytes.
type Hash = [sha256.Size]byte

// Check reports whether r can be written: a known op and a result that
// is a word (a-z and _). (Invalid UTF-8 is written as U+FFFD.)
func (r Record) Check() error {
	switch {
	case !r.Op.known():
		return fmt.Errorf("audit: unknown op %q", r.Op)
	case !word(r.Result):
		return fmt.Errorf("audit: result %q is not a word", r.Result)
	}
	return nil
}

// word reports whether s is a non-empty run of a-z and _.
func word(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}

// Prefix returns the canonical bytes of r's caller-known fields: the
// opening brace and every field up to Outcome, each followed by a comma.
// [Seal] completes them.
func (r Record) Prefix() []byte {
	return r.AppendPrefix(make([]byte, 0, 128+len(r.Question)))
}

// AppendPrefix appends [Record.Prefix] to b.
func (r Record) AppendPrefix(b []byte) []byte {
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, Version, 10)
	b = append(b, ',')
	b = appendField(b, "op", string(r.Op))
	b = appendField(b, "id", r.ID)
	b = appendField(b, "principal", r.Principal)
	b = appendField(b, "tool", r.Tool)
	b = appendField(b, "args", r.ArgsDigest)
	b = appendField(b, "question", r.Question)
	if r.Deadline != 0 {
		b = append(b, `"deadline":`...)
		b = strconv.AppendInt(b, r.Deadline, 10)
		b = append(b, ',')
	}
	b = appendField(b, "approver", r.Approver)
	b = appendField(b, "decision", r.Decision)
	b = appendField(b, "answer", r.Answer)
	b = appendField(b, "outcome", r.Outcome)
	return b
}

// Seal appends to prefix (r.Prefix()) the store-decided suffix:
//
//	"seq":SEQ,"time":TIME,"result":"RESULT","prev":"PREV"}
//
// with SEQ and TIME decimal integers, RESULT a word, PREV 64 lower-case hex
// digits; the result is the record's canonical bytes. A store that hashes
// outside Go (Redis's Lua, PostgreSQL's SQL) writes exactly these bytes.
func Seal(prefix []byte, seq uint64, time int64, result string, prev Hash) []byte {
	b := append(prefix, `"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"time":`...)
	b = strconv.AppendInt(b, time, 10)
	b = append(b, `,"result":"`...)
	b = append(b, result...)
	b = append(b, `","prev":"`...)
	b = hex.AppendEncode(b, prev[:])
	return append(b, `"}`...)
}

// Canonical returns r's canonical bytes: one line of JSON (without the
// newline), its fields in a fixed order, empty ones left out.
func (r Record) Canonical() []byte {
	return Seal(r.Prefix(), r.Seq, r.Time, r.Result, r.Prev)
}

// Sum returns the SHA-256 of r's canonical bytes: the next record's Prev.
func (r Record) Sum() Hash { return sha256.Sum256(r.Canonical()) }

// appendField appends "name":"value", if value is not empty.
func appendField(b []byte, name, value string) []byte {
	if value == "" {
		return b
	}
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `":`...)
	b = appendString(b, value)
	return append(b, ',')
}

// appendString appends s as a JSON string: '"' and '\' escaped, control
// characters (and DEL) as \u00XX, invalid UTF-8 as U+FFFD, everything
// else as it is. One spelling per string, so that a parsed record re-encodes
// to the same bytes.
func appendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, "\uFFFD"...) // as the JSON decoder reads it
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

// wire is a record as JSON, for parsing.
type wire struct {
	V          int    `json:"v"`
	Op         Op     `json:"op"`
	ID         string `json:"id"`
	Principal  string `json:"principal"`
	Tool       string `json:"tool"`
	ArgsDigest string `json:"args"`
	Question   string `json:"question"`
	Deadline   int64  `json:"deadline"`
	Approver   string `json:"approver"`
	Decision   string `json:"decision"`
	Answer     string `json:"answer"`
	Outcome    string `json:"outcome"`
	Seq        uint64 `json:"seq"`
	Time       int64  `json:"time"`
	Result     string `json:"result"`
	Prev       string `json:"prev"`
}

// ErrNotCanonical: a line is not a record in its canonical form: edited,
// or not written by a store.
var ErrNotCanonical = errors.New("audit: not a record in canonical form")

// Parse parses one record's canonical bytes (without the newline). Any
// other spelling of the same record — reordered keys, spaces, another
// escape — is refused with ErrNotCanonical, so that a record has one
// hash.
func Parse(line []byte) (Record, error) {
	var w wire
	d := json.NewDecoder(bytes.NewReader(line))
	d.DisallowUnknownFields()
	if err := d.Decode(&w); err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrNotCanonical, err)
	}
	if w.V != Version {
		return Record{}, fmt.Errorf("%w: version %d", ErrNotCanonical, w.V)
	}
	r := Record{Op: w.Op, ID: w.ID, Principal: w.Principal, Tool: w.Tool, ArgsDigest: w.ArgsDigest,
		Question: w.Question, Deadline: w.Deadline, Approver: w.Approver, Decision: w.Decision, Answer: w.Answer,
		Outcome: w.Outcome, Seq: w.Seq, Time: w.Time, Result: w.Result}
	if len(w.Prev) != 2*sha256.Size {
		return Record{}, fmt.Errorf("%w: prev %q", ErrNotCanonical, w.Prev)
	}
	if _, err := hex.Decode(r.Prev[:], []byte(w.Prev)); err != nil {
		return Record{}, fmt.Errorf("%w: prev: %v", ErrNotCanonical, err)
	}
	if err := r.Check(); err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrNotCanonical, err)
	}
	if !bytes.Equal(r.Canonical(), line) {
		return Record{}, ErrNotCanonical
	}
	return r, nil
}

// A Call is what the front end knows of the call that makes a ledger
// transition, which the store cannot know: the request's binding, the
// question's text, the in-band answer. [WithCall] hands it to the store
// through the context of the ledger call; a store that keeps a trail
// puts it in the record it writes ([FromContext]).
type Call struct {
	Principal  string
	Tool       string
	ArgsDigest string
	// Question is the question exactly as shown (on an Issue).
	Question string
	// Answer is the in-band answer or reason (on a Redeem or Cancel): see
	// [Record.Answer].
	Answer string
}

type callKey struct{}

// WithCall returns ctx carrying c, for the store's record.
func WithCall(ctx context.Context, c Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// FromContext returns the Call of ctx, if any.
func FromContext(ctx context.Context) (Call, bool) {
	c, ok := ctx.Value(callKey{}).(Call)
	return c, ok
}
