// Package luasha256 is SHA-256 written in Lua 5.1, for Redis scripts that
// must hash inside their atomic step: Redis 7.0's Lua has SHA-1
// (redis.sha1hex) but no SHA-256, and a script cannot call out.
//
// [Source] is a Lua chunk that defines two local functions, to be put
// before a script's own code:
//
//	sha256hex(msg)              -- SHA-256 of msg, 64 lowercase hex digits
//	sha256resume(state, n, msg) -- SHA-256 of p..msg, where p is n bytes
//	                            -- (a multiple of 64) hashed in Go: state
//	                            -- is [Midstate]'s
//
// What it guarantees: the digests are SHA-256's, for every byte string
// (Lua strings are binary-safe), checked against crypto/sha256 on the
// FIPS 180-4 examples, every padding boundary, and fuzzed input
// (TestVectors, FuzzLuaSHA256). What it does not: speed — about 30 µs per
// 64-byte block inside Redis on a 2-core machine (BenchmarkLuaSHA256), and
// Redis runs nothing else meanwhile, so a script should hash only the few
// bytes it decides and resume from a [Midstate] computed in Go for the
// rest. It is not constant-time: hash nothing secret with it.
package luasha256

import (
	"crypto/sha256"
	_ "embed" // the Lua source
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

//go:embed sha256.lua
var source string

// Source returns the Lua chunk that defines sha256hex and sha256resume.
func Source() string { return source }

// Midstate hashes the longest prefix of p whose length is a multiple of
// 64 (SHA-256's block) and returns what a script's sha256resume needs to
// finish the hash of p followed by more bytes: the chaining value after
// that prefix (64 hex digits), the prefix's length n, and the rest of p
// (p[n:], under 64 bytes), which the script hashes itself.
func Midstate(p []byte) (state string, n int, rest []byte, err error) {
	n = len(p) &^ 63
	h := sha256.New()
	h.Write(p[:n])
	// crypto/sha256's saved state: "sha\x03", h0..h7 (big-endian), the
	// pending block (64 bytes) and the length (8 bytes). A change in that
	// layout fails here, and TestMidstate, rather than hash wrongly.
	m, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return "", 0, nil, fmt.Errorf("luasha256: %w", err)
	}
	if len(m) != 4+32+64+8 || string(m[:4]) != "sha\x03" || binary.BigEndian.Uint64(m[100:]) != uint64(n) {
		return "", 0, nil, errUnknownState
	}
	return hex.EncodeToString(m[4:36]), n, p[n:], nil
}

var errUnknownState = errors.New("luasha256: crypto/sha256's saved state has a layout this package does not know")
