package approve

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// MinKeyLen is the shortest [Options.Key] New accepts, in bytes.
const MinKeyLen = 32

// HKDF labels: distinct labels make the link cipher, the link MAC, the
// cookie AEAD and the form-token MAC independent functions of one secret,
// and independent of what package requeststate derives from the same
// secret under its own labels.
const (
	infoLinkCipher = "mcp-confirm/approve/v1/link-aes-256"
	infoLinkMAC    = "mcp-confirm/approve/v1/link-hmac-sha256"
	infoCookie     = "mcp-confirm/approve/v1/cookie-aes-256-gcm"
	infoForm       = "mcp-confirm/approve/v1/form-hmac-sha256"
)

// linkMACLen is the length of a link's tag: guessing a valid link is a
// forgery of a 128-bit HMAC tag.
const linkMACLen = 16

// linkLen is the length of a link in characters: the encrypted id and
// its tag, 32 bytes in unpadded base64url.
const linkLen = (8*(len(ledger.ID{})+linkMACLen) + 5) / 6

// b64 is the one spelling of every encoded value here: unpadded
// base64url, unused trailing bits zero.
var b64 = base64.RawURLEncoding.Strict()

// keys holds what the page derives from [Options.Key]; never the key.
type keys struct {
	link    cipher.Block // AES-256: a link hides the ledger id it names
	linkMAC []byte       // HMAC-SHA256 key of a link's tag
	cookie  cipher.AEAD  // AES-256-GCM, random nonces: sessions and sign-ins
	form    []byte       // HMAC-SHA256 key of the per-form token
}

func deriveKeys(secret []byte) (keys, error) {
	if len(secret) < MinKeyLen {
		return keys{}, fmt.Errorf("approve: key of %d bytes: want at least %d", len(secret), MinKeyLen)
	}
	derive := func(info string) []byte {
		k, err := hkdf.Key(sha256.New, secret, nil, info, 32)
		if err != nil { // only for lengths HKDF cannot give: 32 always fits
			panic(err)
		}
		return k
	}
	link, err := aes.NewCipher(derive(infoLinkCipher))
	if err != nil {
		return keys{}, err
	}
	cb, err := aes.NewCipher(derive(infoCookie))
	if err != nil {
		return keys{}, err
	}
	cookie, err := cipher.NewGCMWithRandomNonce(cb)
	if err != nil {
		return keys{}, err
	}
	return keys{link: link, linkMAC: derive(infoLinkMAC), cookie: cookie, form: derive(infoForm)}, nil
}

// makeLink returns the link of confirmation id: its id encrypted with
// AES-256 (one block: a pseudorandom permutation, so the link tells
// nothing of the id, which is in logs and requestStates), followed by a
// 128-bit HMAC-SHA256 tag of that block, in base64url.
func (k *keys) makeLink(id ledger.ID) string {
	var b [len(ledger.ID{}) + linkMACLen]byte
	k.link.Encrypt(b[:len(id)], id[:])
	copy(b[len(id):], k.tag(b[:len(id)]))
	return b64.EncodeToString(b[:])
}

// parseLink returns the confirmation id that link names, if this key made
// it.
func (k *keys) parseLink(link string) (ledger.ID, bool) {
	var id ledger.ID
	if len(link) != linkLen {
		return id, false
	}
	b, err := b64.DecodeString(link)
	if err != nil || len(b) != len(id)+linkMACLen {
		return id, false
	}
	// Forged links: without the key, a link that names any confirmation
	// is a forgery of the tag (2^-128 a guess), whatever ids are known.
	if !hmac.Equal(b[len(id):], k.tag(b[:len(id)])) {
		return id, false
	}
	k.link.Decrypt(id[:], b[:len(id)])
	return id, true
}

func (k *keys) tag(block []byte) []byte {
	m := hmac.New(sha256.New, k.linkMAC)
	m.Write(block)
	return m.Sum(nil)[:linkMACLen]
}

// formToken returns the token a form of session sid for link must carry.
func (k *keys) formToken(sid []byte, link string) string {
	m := hmac.New(sha256.New, k.form)
	m.Write(sid)
	m.Write([]byte{0})
	m.Write([]byte(link))
	return b64.EncodeToString(m.Sum(nil))
}

// errCookie is every reason a cookie is not opened; the page treats each
// as no cookie at all.
var errCookie = errors.New("approve: invalid cookie")

// seal encrypts and authenticates plain for a cookie's purpose (the
// purpose is authenticated too, so a sign-in cookie cannot stand in for
// a session).
func (k *keys) seal(purpose string, plain []byte) string {
	return b64.EncodeToString(k.cookie.Seal(nil, nil, plain, []byte(purpose)))
}

// open reverses seal.
func (k *keys) open(purpose, value string) ([]byte, error) {
	b, err := b64.DecodeString(value)
	if err != nil {
		return nil, errCookie
	}
	plain, err := k.cookie.Open(nil, nil, b, []byte(purpose))
	if err != nil {
		return nil, errCookie
	}
	return plain, nil
}
