// Package keyfile reads and writes the file of requestState keys that
// replicas share: its format, its permissions, and new random keys.
//
// # Format
//
// A key file is UTF-8 text, one entry per line; a trailing "\r" is
// ignored, and so are blank lines and lines whose first character is '#'.
// Every other line is one key:
//
//	mcp-confirm-key-v1:<base64url>
//
// where <base64url> is the unpadded base64url encoding (RFC 4648 §5) of
// the key, at least [MinKeyLen] random bytes (at most [MaxKeyLen]),
// followed by the first 4 bytes of the key's SHA-256: a check, so that a
// mistyped or truncated key is refused rather than used. Nothing else may
// be on the line: no spaces. The first key seals new requestStates; every
// key verifies (see requeststate.Options.Keys). [Generate] makes a line,
// `mcp-confirm keygen` writes a file.
//
// A key is decoded bytes, never the text of the line. A bare string, such
// as a passphrase or `openssl rand -base64 48` prints, is refused: a
// passphrase of letters and digits is also valid base64, so only a prefix
// and a check that no typist produces by accident tell an encoded random
// key from a typed one. A key of fewer than 16 distinct byte values is
// refused too (a broken generator, such as one reading /dev/zero); that
// cannot tell weak randomness from strong, and does not try.
//
// # Permissions
//
// [Read] refuses, as ssh does for a private key, a file that is not a
// regular file, that group or others may read or write (any of the mode
// bits 077), or that is owned by someone other than the reading user or
// root; and a file whose directory, or any directory above it (on its path
// as given and with symbolic links resolved), may be written by group or
// others without the sticky bit, or is owned by someone other than the
// user or root: whoever can write one of those can replace the keys.
//
// # What it does not do
//
// Keep the keys secret once read (they are in the process's memory), or
// notice a file changed after it was read: rotate by restarting replicas
// (the three phases of docs/operating.md, "Rotating keys").
package keyfile

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
	"github.com/mcp-confirm/mcp-confirm/internal/ownfile"
)

// Prefix starts every key line.
const Prefix = "mcp-confirm-key-v1:"

// Key lengths, in bytes; [Generate] makes keys of MinKeyLen.
const (
	MinKeyLen = requeststate.MinSecretLen // 32
	MaxKeyLen = 64
	checkLen  = 4
)

// ErrInsecure reports a key file others could read or replace.
var ErrInsecure = errors.New("keyfile: insecure key file")

// Errors about a file's content wrap requeststate.ErrKey.
var errKey = requeststate.ErrKey

// Encode returns the key line of key (without a newline).
func Encode(key []byte) string {
	sum := sha256.Sum256(key)
	return Prefix + base64.RawURLEncoding.EncodeToString(append(bytes.Clone(key), sum[:checkLen]...))
}

// Generate returns the key line of a new random key of [MinKeyLen] bytes.
func Generate() string {
	key := make([]byte, MinKeyLen)
	rand.Read(key) // never fails (crypto/rand)
	return Encode(key)
}

// decode returns the key of one non-comment line, or why it is not one.
// The reason never quotes the line.
func decode(line string) ([]byte, error) {
	enc, ok := strings.CutPrefix(line, Prefix)
	if !ok {
		if looksEncoded(line) {
			return nil, fmt.Errorf("a bare base64 string (as openssl rand -base64 prints) cannot be told from a typed passphrase; want %s… as `mcp-confirm keygen` writes", Prefix)
		}
		return nil, fmt.Errorf("not a key; want %s… as `mcp-confirm keygen` writes", Prefix)
	}
	// The decoder skips '\r' and '\n' anywhere: only the alphabet is a key.
	if strings.IndexFunc(enc, notBase64URL) >= 0 {
		return nil, fmt.Errorf("not unpadded base64url after %s", Prefix)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("not unpadded base64url after %s", Prefix)
	}
	if len(raw) < MinKeyLen+checkLen || len(raw) > MaxKeyLen+checkLen {
		return nil, fmt.Errorf("the key is %d bytes; want %d to %d", max(len(raw)-checkLen, 0), MinKeyLen, MaxKeyLen)
	}
	key, check := raw[:len(raw)-checkLen], raw[len(raw)-checkLen:]
	sum := sha256.Sum256(key)
	if subtle.ConstantTimeCompare(check, sum[:checkLen]) != 1 {
		return nil, errors.New("the check does not match: the key was altered or mistyped")
	}
	// Stops a broken generator's output (zeros, text) from becoming a key.
	var seen [256]bool
	distinct := 0
	for _, b := range key {
		if !seen[b] {
			seen[b] = true
			distinct++
		}
	}
	if distinct < 16 {
		return nil, fmt.Errorf("the key has only %d distinct byte values: not random", distinct)
	}
	return key, nil
}

// notBase64URL reports whether r is outside the base64url alphabet.
func notBase64URL(r rune) bool {
	return !('A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-' || r == '_')
}

// looksEncoded reports whether s decodes as base64 of at least MinKeyLen
// bytes (standard or URL alphabet, padded or not).
func looksEncoded(s string) bool {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) >= MinKeyLen {
			return true
		}
	}
	return false
}

// Parse reads the keys of a key file (see the package doc). Errors wrap
// requeststate.ErrKey and name the line, never its content. A file with
// no key is an error, so that an empty file cannot fall back to an
// ephemeral key.
func Parse(r io.Reader) ([][]byte, error) {
	var (
		keys  [][]byte
		lines []int // line number of each key
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 4096)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" || line[0] == '#' {
			continue
		}
		key, err := decode(line)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", errKey, n, err)
		}
		for i, prev := range keys {
			if subtle.ConstantTimeCompare(prev, key) == 1 {
				return nil, fmt.Errorf("%w: line %d duplicates line %d", errKey, n, lines[i])
			}
		}
		keys, lines = append(keys, key), append(lines, n)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: line %d is too long to be a key", errKey, n+1)
		}
		return nil, fmt.Errorf("%w: reading line %d: %v", errKey, n+1, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no key in the file", errKey)
	}
	return keys, nil
}

// Read checks the file at path and the directories above it (see the
// package doc), then parses it. Permission problems wrap [ErrInsecure].
func Read(path string) ([][]byte, error) {
	f, err := OpenSecret(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

// OpenSecret opens a file that holds a secret (a key file, a ledger URL
// with its password) after the checks of the package doc: owner-only
// permissions, owned by the user or root, in directories nobody else may
// write. Permission problems wrap [ErrInsecure].
func OpenSecret(path string) (*os.File, error) {
	// The opened file itself is checked, not whatever the name points to
	// later, and the directories above it; a FIFO does not hold the open.
	f, err := ownfile.Open(path, ownfile.Options{Secret: true})
	if errors.Is(err, ownfile.ErrInsecure) {
		return nil, fmt.Errorf("%w: %w", ErrInsecure, err)
	}
	return f, err
}

// Create writes a new key file at path (mode 0600), holding one new key;
// it never overwrites a file.
func Create(path string) error {
	return WriteNew(path, fmt.Sprintf("# mcp-confirm requestState keys, created %s.\n"+
		"# The first key seals, every key verifies. Keep this file owner-only, and\n"+
		"# the same on every replica; rotate as docs/operating.md says.\n%s\n",
		time.Now().UTC().Format(time.DateOnly), Generate()))
}

// WriteNew writes content to a new file at path, mode 0600 (and fsync'd);
// it never overwrites a file, and leaves none behind on an error.
func WriteNew(path, content string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(f, content); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	// A default ACL of the directory can grant more than OpenFile's mode;
	// chmod narrows it again (the ACL mask follows the group bits).
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}
