package bearer

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/mcp-confirm/mcp-confirm/internal/ownfile"
)

// Tokens verifies static bearer tokens, each a random secret given to one
// principal, of which it keeps only the SHA-256: a copy of the file, or of
// the process's memory, gives no one a token.
type Tokens struct {
	byHash map[[sha256.Size]byte]string
}

// ErrPermissions refuses a secret's file or directory that someone other
// than its owner could read or write.
var ErrPermissions = errors.New("bearer: others can read or write it")

// hashPrefix starts each line of a token file.
const hashPrefix = "sha256:"

// ParseTokens reads a token file: one token a line, as "sha256:" and the
// 64 hex digits of the token's SHA-256, a space, and its principal (the
// rest of the line, which must not be empty). Blank lines and lines
// starting with '#' are skipped. A principal may have several tokens; a
// hash may appear once.
func ParseTokens(r io.Reader) (*Tokens, error) {
	t := &Tokens{byHash: map[[sha256.Size]byte]string{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		hash, principal, _ := strings.Cut(line, " ")
		principal = strings.TrimSpace(principal)
		digits, ok := strings.CutPrefix(hash, hashPrefix)
		var h [sha256.Size]byte
		if !ok || len(digits) != 2*sha256.Size || strings.ToLower(digits) != digits {
			return nil, fmt.Errorf("bearer: token file line %d: want %s and 64 lower-case hex digits, a space, and a principal", n, hashPrefix)
		}
		if _, err := hex.Decode(h[:], []byte(digits)); err != nil {
			return nil, fmt.Errorf("bearer: token file line %d: %w", n, err)
		}
		if err := checkPrincipal(principal); err != nil {
			return nil, fmt.Errorf("bearer: token file line %d: %w", n, err)
		}
		if _, dup := t.byHash[h]; dup {
			return nil, fmt.Errorf("bearer: token file line %d: the same token twice", n)
		}
		t.byHash[h] = principal
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bearer: token file: %w", err)
	}
	if len(t.byHash) == 0 {
		return nil, errors.New("bearer: token file has no token")
	}
	return t, nil
}

// checkPrincipal refuses a principal that logs and questions could not
// show as one plain word.
func checkPrincipal(p string) error {
	if p == "" {
		return errors.New("no principal")
	}
	if !utf8.ValidString(p) || strings.ContainsFunc(p, func(r rune) bool { return unicode.IsControl(r) }) {
		return fmt.Errorf("principal %q: control characters or invalid UTF-8", p)
	}
	return nil
}

// ReadTokens reads the token file at path ([ParseTokens]). It must be a
// regular file owned by this process's user (or root) that no one else
// can read or write, as ssh asks of a private key, in directories of the
// user's or root's that no one else may write (unless sticky): a token
// file others can write, or replace, lets them add a token of their own.
func ReadTokens(path string) (*Tokens, error) {
	// Checked on the open file, so that it is the file read, and the
	// directories above it; a FIFO does not hold the open.
	f, err := ownfile.Open(path, ownfile.Options{Secret: true})
	if errors.Is(err, ownfile.ErrInsecure) {
		return nil, fmt.Errorf("%w: %w", ErrPermissions, err)
	}
	if err != nil {
		return nil, fmt.Errorf("bearer: %w", err)
	}
	defer f.Close()
	return ParseTokens(f)
}

// privateDir checks that d is a directory of this process's user or
// root, without access for group or others.
func privateDir(d *os.File) error {
	fi, err := d.Stat()
	if err != nil {
		return err
	}
	switch {
	case !fi.IsDir():
		return errors.New("not a directory")
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%w (mode %#o: want %#o)", ErrPermissions, fi.Mode().Perm(), fi.Mode().Perm()&0o700)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != uint32(os.Geteuid()) && st.Uid != 0 {
		return fmt.Errorf("%w: owned by uid %d, not this user", ErrPermissions, st.Uid)
	}
	return nil
}

// Verify implements auth.TokenVerifier.
func (t *Tokens) Verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	// A map lookup by the token's hash: its timing tells nothing about the
	// tokens, whose hashes an attacker cannot aim at.
	if p, ok := t.byHash[sha256.Sum256([]byte(token))]; ok {
		return &auth.TokenInfo{UserID: p}, nil
	}
	return nil, fmt.Errorf("%w: unknown token", auth.ErrInvalidToken)
}

// Len reports how many tokens t knows.
func (t *Tokens) Len() int { return len(t.byHash) }

// Line returns the token file line for token and principal.
func Line(token, principal string) string {
	h := sha256.Sum256([]byte(token))
	return hashPrefix + hex.EncodeToString(h[:]) + " " + principal
}

// NewToken returns a fresh random token: 256 bits from crypto/rand,
// base64url. rand.Read never fails: it crashes the program.
func NewToken() string {
	var b [32]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// GeneratedPrincipal is the principal of a [Generate]d token.
const GeneratedPrincipal = "operator"

// Generate makes a fresh token for [GeneratedPrincipal] and writes it to a
// new file in dir, which it creates with mode 0700 if missing, and which
// must otherwise be the user's own and closed to others (the file is made
// 0600, new, never through a symlink). It returns the token's verifier,
// the file's path, and a function that removes the file.
func Generate(dir string) (*Tokens, string, func(), error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", nil, fmt.Errorf("bearer: token directory: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, "", nil, fmt.Errorf("bearer: token directory: %w", err)
	}
	defer root.Close()
	d, err := root.Open(".")
	if err != nil {
		return nil, "", nil, fmt.Errorf("bearer: token directory: %w", err)
	}
	err = privateDir(d)
	d.Close()
	if err != nil {
		return nil, "", nil, fmt.Errorf("bearer: token directory %s: %w", dir, err)
	}
	token := NewToken()
	name := "token-" + strconv.Itoa(os.Getpid())
	// O_EXCL: never write a token into a file someone prepared.
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		// Left by an earlier process of the same pid: ours to replace.
		if err = root.Remove(name); err == nil {
			f, err = root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		}
	}
	if err != nil {
		return nil, "", nil, fmt.Errorf("bearer: token file: %w", err)
	}
	_, err = io.WriteString(f, token+"\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	path := filepath.Join(dir, name)
	remove := func() { os.Remove(path) }
	if err != nil {
		remove()
		return nil, "", nil, fmt.Errorf("bearer: token file: %w", err)
	}
	h := sha256.Sum256([]byte(token))
	return &Tokens{byHash: map[[sha256.Size]byte]string{h: GeneratedPrincipal}}, path, remove, nil
}
