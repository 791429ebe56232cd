package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The binary form of an [Outcome], for stores that keep bytes (Redis,
// PostgreSQL): one byte of kind ('d', 'f' or 'u'), then either 'r' and
// the result as it is, or 'h' and the size (8 bytes, big-endian) and
// SHA-256 of a result too long to keep.
const (
	outcomeKept = 'r'
	outcomeHash = 'h'
)

var kindBytes = [...]byte{OutcomeDone: 'd', OutcomeFailed: 'f', OutcomeUnknown: 'u'}

// Check reports whether o can be recorded: a known kind, and either the
// whole result or none of it.
func (o Outcome) Check() error {
	switch {
	case o.Kind < OutcomeDone || o.Kind > OutcomeUnknown:
		return fmt.Errorf("ledger: invalid outcome %v", o.Kind)
	case o.Size < 0 || !o.Kept() && o.Result != nil:
		return fmt.Errorf("ledger: outcome of %d bytes keeps %d", o.Size, len(o.Result))
	}
	return nil
}

// AppendBinary appends the binary form of o to b.
func (o Outcome) AppendBinary(b []byte) ([]byte, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	if o.Kept() {
		b = append(b, kindBytes[o.Kind], outcomeKept)
		return append(b, o.Result...), nil
	}
	b = append(b, kindBytes[o.Kind], outcomeHash)
	b = binary.BigEndian.AppendUint64(b, uint64(o.Size))
	return append(b, o.SHA256[:]...), nil
}

// MarshalBinary returns the binary form of o.
func (o Outcome) MarshalBinary() ([]byte, error) {
	return o.AppendBinary(make([]byte, 0, 2+max(len(o.Result), 8+len(o.SHA256))))
}

var errOutcome = errors.New("ledger: corrupt outcome")

// UnmarshalBinary parses the form MarshalBinary writes. A kept result is
// copied.
func (o *Outcome) UnmarshalBinary(b []byte) error {
	if len(b) < 2 {
		return errOutcome
	}
	var v Outcome
	for k, c := range kindBytes {
		if c != 0 && c == b[0] {
			v.Kind = OutcomeKind(k)
		}
	}
	if v.Kind == 0 {
		return errOutcome
	}
	switch rest := b[2:]; {
	case b[1] == outcomeKept:
		v.Result = append([]byte{}, rest...)
		v.Size = int64(len(rest))
	case b[1] == outcomeHash && len(rest) == 8+len(v.SHA256):
		size := binary.BigEndian.Uint64(rest)
		if size > 1<<62 {
			return errOutcome
		}
		v.Size = int64(size)
		copy(v.SHA256[:], rest[8:])
	default:
		return errOutcome
	}
	*o = v
	return nil
}
