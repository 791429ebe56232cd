package requeststate

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadKeyFile(t *testing.T) {
	a := strings.Repeat("a", 32)
	b := strings.Repeat("b", 40)
	c := "c" + strings.Repeat(" ", 30) + "c"
	tests := []struct {
		name, file string
		want       []string
	}{
		{"one", a + "\n", []string{a}},
		{"no final newline", a, []string{a}},
		{"CRLF", a + "\r\n" + b + "\r\n", []string{a, b}},
		{"comments and blanks", "# rotation 2026-07\n\n" + b + "\n\r\n#" + a + "\n" + a + "\n", []string{b, a}},
		{"inner spaces kept", c + "\n", []string{c}},
		{"trailing space is part of the secret", a + " \n" + a + "\n", []string{a + " ", a}},
		{"only one CR trimmed", a + "\r\r\n", []string{a + "\r"}},
	}
	for _, tt := range tests {
		got, err := ReadKeyFile(strings.NewReader(tt.file))
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if len(got) != len(tt.want) {
			t.Errorf("%s: %d keys, want %d", tt.name, len(got), len(tt.want))
			continue
		}
		for i := range got {
			if !bytes.Equal(got[i], []byte(tt.want[i])) {
				t.Errorf("%s: key %d = %q, want %q", tt.name, i, got[i], tt.want[i])
			}
		}
	}
}

func TestReadKeyFileErrors(t *testing.T) {
	a := strings.Repeat("a", 32)
	tests := []struct {
		name, file, wantMsg string
	}{
		{"empty", "", "no secrets"},
		{"only comments", "# a\n\n#b\n", "no secrets"},
		{"short", a + "\n\nshort-secret\n", "line 3: secret is 12 bytes"},
		{"31 bytes", a[:31], "line 1: secret is 31 bytes"},
		{"indented comment is a secret", "  # not a comment\n", "line 1: secret is 17 bytes"},
		{"duplicate", a + "\n# x\n" + a + "\r\n", "line 3 duplicates line 1"},
	}
	for _, tt := range tests {
		_, err := ReadKeyFile(strings.NewReader(tt.file))
		if !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), tt.wantMsg) {
			t.Errorf("%s: err = %v, want ErrKey mentioning %q", tt.name, err, tt.wantMsg)
		}
		if err != nil && strings.Contains(err.Error(), "short-secret") {
			t.Errorf("%s: error echoes the secret: %v", tt.name, err)
		}
	}
	_, err := ReadKeyFile(iotest.ErrReader(errors.New("disk on fire")))
	if !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("read error: %v", err)
	}
}

// TestKeyFileFeedsNew: the keys a file holds build a ring in file order.
func TestKeyFileFeedsNew(t *testing.T) {
	keys, err := ReadKeyFile(strings.NewReader(strings.Repeat("n", 32) + "\n" + strings.Repeat("o", 32) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t0}
	fromFile := newTestBoundary(t, clk, keys...)
	newOnly := newTestBoundary(t, clk, []byte(strings.Repeat("n", 32)))
	oldOnly := newTestBoundary(t, clk, []byte(strings.Repeat("o", 32)))
	tok := mustIssue(t, fromFile, testBind, "s")
	if _, err := newOnly.verify(tok, testBind); err != nil {
		t.Fatalf("first line does not seal: %v", err)
	}
	if _, err := fromFile.verify(mustIssue(t, oldOnly, testBind, "s"), testBind); err != nil {
		t.Fatalf("second line does not verify: %v", err)
	}
}
