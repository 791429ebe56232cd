package requeststate

import (
	"errors"

	"github.com/mcp-confirm/mcp-confirm/internal/statetoken"
)

// A Refusal names the class of reason the boundary refused a call for,
// for counting ([Options.Refused]). Classes are a fixed set of words, so a
// metric labelled by them stays small whatever callers send; none ever
// reaches the wire, which carries only [Rejection] (or, for a first
// round's arguments, their own error).
type Refusal string

// The classes of [Refusal].
const (
	// RefusedMalformed: not a token this boundary could have sealed (bad
	// encoding, version or length), or a request of the wrong shape.
	RefusedMalformed Refusal = "malformed"
	// RefusedUnknownKey: sealed under a key id not in the key ring (a key
	// retired, or another service's).
	RefusedUnknownKey Refusal = "unknown_key"
	// RefusedForged: the token failed authentication: tampered with, or
	// made without the key.
	RefusedForged Refusal = "forged"
	// RefusedExpired: the token's expiry has passed (an answer or a replay
	// after the TTL), or its lifetime exceeds the TTL.
	RefusedExpired Refusal = "expired"
	// RefusedFuture: the token was issued further in the future than the
	// allowed clock skew.
	RefusedFuture Refusal = "future"
	// RefusedMismatch: the token is bound to another method, target,
	// arguments, audience or principal (a replay onto another call).
	RefusedMismatch Refusal = "mismatch"
	// RefusedPrincipal: the caller's principal could not be determined.
	RefusedPrincipal Refusal = "principal"
	// RefusedArguments: the arguments cannot be canonicalized (invalid
	// JSON, a duplicate key, too deep).
	RefusedArguments Refusal = "arguments"
)

// Refusals lists every [Refusal], in a fixed order.
var Refusals = []Refusal{RefusedMalformed, RefusedUnknownKey, RefusedForged, RefusedExpired,
	RefusedFuture, RefusedMismatch, RefusedPrincipal, RefusedArguments}

// refusalOf classifies a reason the boundary refused a call for.
func refusalOf(err error) Refusal {
	switch {
	case errors.Is(err, statetoken.ErrUnknownKey):
		return RefusedUnknownKey
	case errors.Is(err, statetoken.ErrAuth):
		return RefusedForged
	case errors.Is(err, errExpired):
		return RefusedExpired
	case errors.Is(err, errFuture):
		return RefusedFuture
	case errors.Is(err, errMismatch):
		return RefusedMismatch
	case errors.Is(err, errPrincipal):
		return RefusedPrincipal
	case errors.Is(err, ErrArguments):
		return RefusedArguments
	}
	return RefusedMalformed
}
