package keyfile_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
	"github.com/mcp-confirm/mcp-confirm/internal/keyfile"
)

// key is a fixed random-looking key for tests.
func key(seed byte) []byte {
	k := make([]byte, 32)
	for i := range k {
		k[i] = seed + byte(i*7)
	}
	return k
}

func TestGenerate(t *testing.T) {
	a, b := keyfile.Generate(), keyfile.Generate()
	if a == b || !strings.HasPrefix(a, keyfile.Prefix) || len(a) != len(keyfile.Prefix)+48 {
		t.Fatalf("Generate: %q, %q", a, b)
	}
	keys, err := keyfile.Parse(strings.NewReader(a + "\n" + b + "\n"))
	if err != nil || len(keys) != 2 || len(keys[0]) != keyfile.MinKeyLen {
		t.Fatalf("Parse(Generate): %d keys, %v", len(keys), err)
	}
	if keyfile.Encode(keys[0]) != a {
		t.Fatal("Encode does not round-trip")
	}
	if _, err := requeststate.New(requeststate.Options{Keys: keys, Audience: "a"}); err != nil {
		t.Fatalf("generated keys do not build a boundary: %v", err)
	}
}

func TestParse(t *testing.T) {
	a, b := keyfile.Encode(key(1)), keyfile.Encode(append(key(2), key(3)...))
	tests := []struct {
		name, file string
		want       [][]byte
	}{
		{"one", a + "\n", [][]byte{key(1)}},
		{"no final newline", a, [][]byte{key(1)}},
		{"CRLF", a + "\r\n" + b + "\r\n", [][]byte{key(1), append(key(2), key(3)...)}},
		{"comments and blanks", "# rotated 2026-07\n\n" + b + "\n\r\n#" + a + "\n" + a + "\n", [][]byte{append(key(2), key(3)...), key(1)}},
	}
	for _, tt := range tests {
		got, err := keyfile.Parse(strings.NewReader(tt.file))
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: got %x, want %x", tt.name, got, tt.want)
		}
	}
}

// Every line that is not an encoded random key is refused, naming the
// line and never quoting it.
func TestParseRefuses(t *testing.T) {
	good := keyfile.Encode(key(1))
	flipped := []byte(good)
	if i := len(keyfile.Prefix) + 10; flipped[i] == 'A' {
		flipped[i] = 'B'
	} else {
		flipped[i] = 'A'
	}
	zero := keyfile.Encode(make([]byte, 32))
	text := keyfile.Encode([]byte("correct horse battery staple!!!!"))
	// checkFlipped alters only the check's last byte; distinct(n) is a
	// 32-byte key of n distinct byte values.
	raw, err := base64.RawURLEncoding.DecodeString(good[len(keyfile.Prefix):])
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 1
	checkFlipped := keyfile.Prefix + base64.RawURLEncoding.EncodeToString(raw)
	distinct := func(n int) []byte {
		k := make([]byte, 32)
		for i := range k {
			k[i] = byte(i % n)
		}
		return k
	}
	tests := []struct {
		name, file, want string
	}{
		{"empty", "", "no key in the file"},
		{"only comments", "# a\n\n#b\n", "no key in the file"},
		{"passphrase", "correct horse battery staple, sw0rdfish\n", "line 1: not a key"},
		{"34-character passphrase", "MyVeryLongAndSecretPassphrase12345\n", "line 1: not a key"},
		{"alphanumeric passphrase that is base64", "ThisIsMyVeryLongPasswordThatIsSecure12345678\n", "line 1: a bare base64 string"},
		{"openssl rand -base64 48", "# old\nVGhpcyBpcyBub3QgYSByYW5kb20ga2V5IGJ1dCBpdCBsb29rcyBsaWtlIG9uZSEhIQ==\n", "line 2: a bare base64 string"},
		{"raw 32 bytes", "0123456789abcdef0123456789abcdef\n", "line 1: not a key"},
		{"indented", "  " + good + "\n", "line 1: not a key"},
		{"trailing space", good + " \n", "line 1: not unpadded base64url"},
		{"padded", good + "=\n", "line 1: not unpadded base64url"},
		{"carriage return inside", good[:30] + "\r" + good[30:] + "\n", "line 1: not unpadded base64url"},
		{"standard alphabet", keyfile.Prefix + "+/+/" + good[len(keyfile.Prefix)+4:] + "\n", "not unpadded base64url"},
		{"short", keyfile.Encode(key(1)[:31]) + "\n", "the key is 31 bytes"},
		{"long", keyfile.Encode(bytes.Repeat(key(1), 3)) + "\n", "the key is 96 bytes"},
		{"altered", string(flipped) + "\n", "the check does not match"},
		{"the check's last byte altered", checkFlipped + "\n", "the check does not match"},
		{"15 distinct byte values", keyfile.Encode(distinct(15)) + "\n", "only 15 distinct byte values"},
		{"bare base64 of exactly 32 bytes", base64.StdEncoding.EncodeToString(key(2)) + "\n", "line 1: a bare base64 string"},
		{"zeros", zero + "\n", "only 1 distinct byte values"},
		{"encoded text", text + "\n", "distinct byte values"},
		{"duplicate", good + "\n# x\n" + good + "\r\n", "line 3 duplicates line 1"},
		{"too long a line", good + "\n" + strings.Repeat("x", 10_000) + "\n", "line 2 is too long"},
	}
	for _, tt := range tests {
		_, err := keyfile.Parse(strings.NewReader(tt.file))
		if !errors.Is(err, requeststate.ErrKey) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want ErrKey mentioning %q", tt.name, err, tt.want)
			continue
		}
		for _, secret := range []string{"horse", "Passphrase", "Password", "VGhpcy", good[len(keyfile.Prefix):], "0123456789abcdef"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s: the error quotes the line: %v", tt.name, err)
			}
		}
	}
	// Control: 16 distinct byte values is a key.
	if _, err := keyfile.Parse(strings.NewReader(keyfile.Encode(distinct(16)) + "\n")); err != nil {
		t.Errorf("16 distinct byte values: %v", err)
	}
	_, err = keyfile.Parse(iotest.ErrReader(errors.New("disk on fire")))
	if !errors.Is(err, requeststate.ErrKey) || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("read error: %v", err)
	}
}

// The keys of a file build a ring in file order: the first seals, the
// others verify.
func TestKeysFeedRequestState(t *testing.T) {
	keys, err := keyfile.Parse(strings.NewReader(keyfile.Encode(key(1)) + "\n" + keyfile.Encode(key(2)) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(keys[0], key(1)) || !bytes.Equal(keys[1], key(2)) {
		t.Fatal("keys out of file order")
	}
}

// write creates a key file with mode in dir.
func write(t *testing.T, dir string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, "keys")
	if err := os.WriteFile(p, []byte(keyfile.Generate()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// dir makes a fresh directory with mode.
func dir(t *testing.T, mode os.FileMode) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "d")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, mode); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestRead(t *testing.T) {
	ok := func(name, p string) {
		t.Helper()
		if keys, err := keyfile.Read(p); err != nil || len(keys) != 1 {
			t.Errorf("%s: %v", name, err)
		}
	}
	refused := func(name, p, want string) {
		t.Helper()
		_, err := keyfile.Read(p)
		if !errors.Is(err, keyfile.ErrInsecure) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want ErrInsecure mentioning %q", name, err, want)
		}
	}
	ok("0600", write(t, dir(t, 0o755), 0o600))
	ok("0400", write(t, dir(t, 0o700), 0o400))
	ok("sticky world-writable directory", write(t, dir(t, os.ModeSticky|0o777), 0o600))
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620, 0o602, 0o660, 0o666, 0o610} {
		refused(fmt.Sprintf("%04o", mode), write(t, dir(t, 0o755), mode), fmt.Sprintf("permissions %04o", mode))
	}
	refused("group-writable directory", write(t, dir(t, 0o775), 0o600), "may replace")
	refused("world-writable directory", write(t, dir(t, 0o757), 0o600), "may replace")
	parent := dir(t, 0o777)
	child := filepath.Join(parent, "child")
	if err := os.Mkdir(child, 0o700); err != nil {
		t.Fatal(err)
	}
	refused("world-writable grandparent", write(t, child, 0o600), "directory "+parent)
	refused("a directory", dir(t, 0o700), "not a regular file")
	fifo := filepath.Join(dir(t, 0o755), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	refused("a FIFO, which must not hold the read", fifo, "not a regular file")

	// A link from a safe directory to a file in an unsafe one.
	target := write(t, dir(t, 0o777), 0o600)
	link := filepath.Join(dir(t, 0o755), "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	refused("link into an unsafe directory", link, "may replace")
	// A link in an unsafe directory to a file in a safe one.
	link = filepath.Join(dir(t, 0o777), "link")
	if err := os.Symlink(write(t, dir(t, 0o755), 0o600), link); err != nil {
		t.Fatal(err)
	}
	refused("link in an unsafe directory", link, "may replace")
	// A link between safe directories, as Kubernetes mounts secrets.
	link = filepath.Join(dir(t, 0o755), "link")
	if err := os.Symlink(write(t, dir(t, 0o755), 0o600), link); err != nil {
		t.Fatal(err)
	}
	ok("link between safe directories", link)

	if _, err := keyfile.Read(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// A key file owned by another user could be rewritten by that user: it is
// refused even with mode 0600. Only root can give a file away.
func TestReadRefusesAnotherOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the file to another user (uid 65534)")
	}
	p := write(t, dir(t, 0o755), 0o600)
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := keyfile.Read(p); !errors.Is(err, keyfile.ErrInsecure) || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Fatalf("err = %v", err)
	}
	d := dir(t, 0o755)
	if err := os.Chown(d, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := keyfile.Read(write(t, d, 0o600)); !errors.Is(err, keyfile.ErrInsecure) || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Fatalf("directory of another user: err = %v", err)
	}
}

func TestCreate(t *testing.T) {
	d := dir(t, 0o755)
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	p := filepath.Join(d, "keys")
	if err := keyfile.Create(p); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600 even with umask 0", fi.Mode(), err)
	}
	keys, err := keyfile.Read(p)
	if err != nil || len(keys) != 1 {
		t.Fatalf("Read(Create): %d keys, %v", len(keys), err)
	}
	before, _ := os.ReadFile(p)
	if err := keyfile.Create(p); !errors.Is(err, os.ErrExist) {
		t.Fatalf("Create over an existing file: %v", err)
	}
	if after, _ := os.ReadFile(p); !bytes.Equal(before, after) {
		t.Fatal("Create changed an existing file")
	}
}

func ExampleParse() {
	keys, err := keyfile.Parse(strings.NewReader(
		"# newest first: it seals; all verify\n" +
			keyfile.Encode([]byte("0123456789abcdefghijklmnopqrstuv")) + "\n"))
	fmt.Println(len(keys), err)
	_, err = keyfile.Parse(strings.NewReader("correct horse battery staple, sw0rdfish\n"))
	fmt.Println(err)
	// Output:
	// 1 <nil>
	// requeststate: unusable key: line 1: not a key; want mcp-confirm-key-v1:… as `mcp-confirm keygen` writes
}
