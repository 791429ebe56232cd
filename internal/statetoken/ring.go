package statetoken

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
)

// MinSecretLen is the shortest secret NewRing accepts, in bytes.
const MinSecretLen = 32

// HKDF labels. Distinct labels make the AEAD key, the principal-hash key and
// the key id independent functions of one secret.
const (
	infoAEAD      = "mcp-confirm/requeststate/v1/aes-256-gcm"
	infoPrincipal = "mcp-confirm/requeststate/v1/principal-hmac-sha256"
	infoKeyID     = "mcp-confirm/requeststate/v1/key-id"
)

const (
	// KeyIDLen is the length of the non-secret ring lookup tag that
	// begins every decoded token.
	KeyIDLen = 4
	saltLen  = 16 // random per-token salt of the principal hash
	// PrincipalClaimLen is the length of a principal claim: salt and HMAC.
	PrincipalClaimLen = saltLen + sha256.Size
)

// A Ring is the key ring: one key per secret, the first sealing, every one
// opening. It holds only material derived from the secrets, never the
// secrets themselves, and is safe for concurrent use.
type Ring struct {
	keys []Key // keys[0] seals
}

// Key is one slot of the ring, holding only material derived from the
// operator's secret (the secret itself is not retained).
type Key struct {
	id        [KeyIDLen]byte
	aead      cipher.AEAD // AES-256-GCM with random 96-bit nonces
	macKey    []byte      // HMAC-SHA256 key for the principal hash
	aeadBytes []byte      // derived AES key, kept only to detect duplicates at construction
}

func deriveKey(secret []byte) (Key, error) {
	var k Key
	aesKey, err := hkdf.Key(sha256.New, secret, nil, infoAEAD, 32)
	if err != nil {
		return k, fmt.Errorf("deriving AEAD key: %w", err)
	}
	macKey, err := hkdf.Key(sha256.New, secret, nil, infoPrincipal, sha256.Size)
	if err != nil {
		return k, fmt.Errorf("deriving principal key: %w", err)
	}
	id, err := hkdf.Key(sha256.New, secret, nil, infoKeyID, KeyIDLen)
	if err != nil {
		return k, fmt.Errorf("deriving key id: %w", err)
	}
	block, err := aes.NewCipher(aesKey)
	if err != nil {
		return k, fmt.Errorf("AES: %w", err)
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return k, fmt.Errorf("GCM: %w", err)
	}
	copy(k.id[:], id)
	k.aead, k.macKey, k.aeadBytes = aead, macKey, aesKey
	return k, nil
}

// NewRing derives one ring slot per secret; secrets[0] seals. Errors wrap
// [ErrKey] and name the secret's index and length, never its bytes.
func NewRing(secrets [][]byte) (*Ring, error) {
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%w: no keys", ErrKey)
	}
	keys := make([]Key, 0, len(secrets))
	for i, s := range secrets {
		// Stops brute force of short or human-chosen secrets.
		if len(s) < MinSecretLen {
			return nil, fmt.Errorf("%w: key %d is %d bytes, need at least %d", ErrKey, i, len(s), MinSecretLen)
		}
		k, err := deriveKey(s)
		if err != nil {
			return nil, fmt.Errorf("%w: key %d: %v", ErrKey, i, err)
		}
		for j, prev := range keys {
			// A duplicated secret usually means a botched rotation: refuse it loudly.
			if hmac.Equal(prev.aeadBytes, k.aeadBytes) {
				return nil, fmt.Errorf("%w: key %d duplicates key %d", ErrKey, i, j)
			}
			if prev.id == k.id {
				return nil, fmt.Errorf("%w: key %d has the same key id as key %d; generate a new secret", ErrKey, i, j)
			}
		}
		keys = append(keys, k)
	}
	return &Ring{keys: keys}, nil
}
