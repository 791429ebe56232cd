package audit

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Key lines: a checkpoint signing key (private: the servers') and its
// public half (for whoever verifies), each the prefix and the unpadded
// base64url of the 32-byte Ed25519 seed or public key followed by the
// first 4 bytes of its SHA-256 (a check, as the requestState key file
// has).
const (
	KeyPrefix       = "mcp-confirm-audit-key-v1:"
	PublicKeyPrefix = "mcp-confirm-audit-pub-v1:"
)

// GenerateKey returns a new signing key's line and its public key's line.
func GenerateKey() (private, public string) {
	seed := make([]byte, ed25519.SeedSize)
	rand.Read(seed)
	k := ed25519.NewKeyFromSeed(seed)
	return encodeKey(KeyPrefix, seed), encodeKey(PublicKeyPrefix, k.Public().(ed25519.PublicKey))
}

// PublicLine returns the public key line of key.
func PublicLine(key ed25519.PrivateKey) string {
	return encodeKey(PublicKeyPrefix, key.Public().(ed25519.PublicKey))
}

func encodeKey(prefix string, b []byte) string {
	sum := sha256.Sum256(b)
	return prefix + base64.RawURLEncoding.EncodeToString(append(append([]byte(nil), b...), sum[:4]...))
}

func decodeKey(prefix, line string) ([]byte, error) {
	rest, ok := strings.CutPrefix(line, prefix)
	if !ok {
		return nil, fmt.Errorf("audit: not a %s line", strings.TrimSuffix(prefix, ":"))
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(b) != 32+4 {
		return nil, errors.New("audit: malformed key line")
	}
	sum := sha256.Sum256(b[:32])
	if !bytes.Equal(sum[:4], b[32:]) {
		return nil, errors.New("audit: key line fails its check (mistyped or truncated)")
	}
	return b[:32], nil
}

// ParseKey reads the first key line of r (blank lines and '#' comments
// skipped): a signing key.
func ParseKey(r io.Reader) (ed25519.PrivateKey, error) {
	line, err := firstLine(r)
	if err != nil {
		return nil, err
	}
	seed, err := decodeKey(KeyPrefix, line)
	if err != nil {
		return nil, err
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// ParsePublicKey reads a public key line, or a signing key line (whose
// public half it returns), from r.
func ParsePublicKey(r io.Reader) (ed25519.PublicKey, error) {
	line, err := firstLine(r)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(line, KeyPrefix) {
		k, err := ParseKey(strings.NewReader(line))
		if err != nil {
			return nil, err
		}
		return k.Public().(ed25519.PublicKey), nil
	}
	b, err := decodeKey(PublicKeyPrefix, line)
	if err != nil {
		return nil, err
	}
	return ed25519.PublicKey(b), nil
}

func firstLine(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" || line[0] == '#' {
			continue
		}
		return line, nil
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("audit: no key line")
}
