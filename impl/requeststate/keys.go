package requeststate

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
)

// MinSecretLen is the shortest secret New accepts, in bytes.
const MinSecretLen = 32

// HKDF labels. Distinct labels make the AEAD key, the principal-hash key and
// the key id independent functions of one secret.
const (
	infoAEAD      = "mcp-confirm/requeststate/v1/aes-256-gcm"
	infoPrincipal = "mcp-confirm/requeststate/v1/principal-hmac-sha256"
	infoKeyID     = "mcp-confirm/requeststate/v1/key-id"
)

const (
	keyIDLen   = 4  // non-secret ring lookup tag carried in every token
	saltLen    = 16 // random per-token salt of the principal hash
	principalN = saltLen + sha256.Size
)

// ringKey is one slot of the key ring, holding only material derived from
// the operator's secret (the secret itself is not retained).
type ringKey struct {
	id        [keyIDLen]byte
	aead      cipher.AEAD // AES-256-GCM with random 96-bit nonces
	macKey    []byte      // HMAC-SHA256 key for the principal hash
	aeadBytes []byte      // derived AES key, kept only to detect duplicates at construction
}

func deriveKey(secret []byte) (ringKey, error) {
	var k ringKey
	aesKey, err := hkdf.Key(sha256.New, secret, nil, infoAEAD, 32)
	if err != nil {
		return k, fmt.Errorf("deriving AEAD key: %w", err)
	}
	macKey, err := hkdf.Key(sha256.New, secret, nil, infoPrincipal, sha256.Size)
	if err != nil {
		return k, fmt.Errorf("deriving principal key: %w", err)
	}
	id, err := hkdf.Key(sha256.New, secret, nil, infoKeyID, keyIDLen)
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

// buildRing derives one ring slot per secret. Errors name the secret's index
// and length, never its bytes.
func buildRing(secrets [][]byte) ([]ringKey, error) {
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%w: no keys", ErrKey)
	}
	ring := make([]ringKey, 0, len(secrets))
	for i, s := range secrets {
		// Stops brute force of short or human-chosen secrets.
		if len(s) < MinSecretLen {
			return nil, fmt.Errorf("%w: key %d is %d bytes, need at least %d", ErrKey, i, len(s), MinSecretLen)
		}
		k, err := deriveKey(s)
		if err != nil {
			return nil, fmt.Errorf("%w: key %d: %v", ErrKey, i, err)
		}
		for j, prev := range ring {
			// A duplicated secret usually means a botched rotation: refuse it loudly.
			if hmac.Equal(prev.aeadBytes, k.aeadBytes) {
				return nil, fmt.Errorf("%w: key %d duplicates key %d", ErrKey, i, j)
			}
			if prev.id == k.id {
				return nil, fmt.Errorf("%w: key %d has the same key id as key %d; generate a new secret", ErrKey, i, j)
			}
		}
		ring = append(ring, k)
	}
	return ring, nil
}
