package prompt

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"go/format"
	"os"
	"testing"
	"unicode"

	"github.com/mcp-confirm/mcp-confirm/internal/confusables"
)

// confusablesSHA256 pins testdata/confusables.txt: UTS #39 version 15.0.0,
// the copy in ICU 72.1's sources (icu/source/data/unidata/confusables.txt of
// icu_72.1.orig.tar.gz, Debian 12's source package icu 72.1-3+deb12u1).
const confusablesSHA256 = "2b10130885c3370b101c52d7baedc452ab7f0e257b86c1e52ee657ecfc29ce64"

// TestLookalikesMatchConfusables checks that lookalikes.go is what
// gen_lookalikes.go writes from the committed confusables.txt and Unicode's
// names, and that both are of the Unicode version of Go's tables.
func TestLookalikesMatchConfusables(t *testing.T) {
	if confusables.NamesVersion != unicode.Version {
		t.Fatalf("runenames has Unicode %s names, Go's tables %s: rerun go generate with matching versions", confusables.NamesVersion, unicode.Version)
	}
	raw, err := os.ReadFile("testdata/confusables.txt")
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != confusablesSHA256 {
		t.Errorf("testdata/confusables.txt has SHA-256 %x, want %s (update both together)", sum, confusablesSHA256)
	}
	d, err := confusables.Parse(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if d.Version != unicode.Version {
		t.Fatalf("confusables.txt is version %s, Go's unicode tables %s: skeletons would use another NFD", d.Version, unicode.Version)
	}
	want, err := format.Source(confusables.Source(d.Version, d.Lookalikes()))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("lookalikes.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("lookalikes.go is not what gen_lookalikes.go writes from testdata/confusables.txt: run go generate")
	}
	// Negative control: the comparison notices a file that lost one line.
	cut := bytes.Replace(raw, []byte("226B ;\t003E 003E ;"), []byte("#"), 1)
	if c, err := confusables.Parse(bytes.NewReader(cut)); err != nil || len(c.Lookalikes()) != len(lookalikes)-1 {
		t.Errorf("without the line for ≫ the derivation should find one look-alike fewer (err %v)", err)
	}
	derived := d.Lookalikes()
	// Negative control: the comparison notices a table without the angle
	// brackets found by name.
	var byData []confusables.Lookalike
	for _, l := range derived {
		if l.Of != '«' && l.Of != '»' {
			byData = append(byData, l)
		}
	}
	if stale, err := format.Source(confusables.Source(d.Version, byData)); err != nil || bytes.Equal(stale, got) || len(byData) == len(derived) {
		t.Errorf("a table without the angle brackets (%d of %d entries) passes the comparison (err %v)", len(byData), len(derived), err)
	}
	if len(derived) != len(lookalikes) {
		t.Fatalf("derived %d look-alikes, the table has %d", len(derived), len(lookalikes))
	}
	for i, l := range derived {
		if lookalikes[i] != (lookalike{l.Rune, l.Of}) || imitates(l.Rune) != l.Of {
			t.Errorf("look-alike %d: derived %U of %q, table %U of %q", i, l.Rune, l.Of, lookalikes[i].r, lookalikes[i].of)
		}
	}
}

// TestLookalikesDerivation pins what the derivation finds, with negative
// controls: the look-alikes of the delimiters are in, the prototypes,
// characters that look like one full stop, and shapes that are no angle
// brackets are out.
func TestLookalikesDerivation(t *testing.T) {
	in := map[rune]rune{
		'≪': '<', '≫': '>', '‹': '<', '›': '>', '❮': '<', '❯': '>', '⨠': '>', 'ᐸ': '<',
		'‥': '.', '…': '.', '∖': '\\', '＼': '\\', '⧵': '\\', '∕': '/', '⁄': '/', 'ノ': '/',
	}
	// The angle brackets by name, the package doc's list: UTS #39 maps
	// nothing to « or ».
	for _, pair := range []string{"《》", "〈〉", "⟨⟩", "⟪⟫", "❬❭", "❰❱", "⦑⦒", "⦓⦔", "⦕⦖", "⧼⧽", "〈〉", "︽︾", "︿﹀"} {
		in[[]rune(pair)[0]], in[[]rune(pair)[1]] = '«', '»'
	}
	for r, of := range in {
		if got := imitates(r); got != of {
			t.Errorf("imitates(%q) = %q, want %q", r, got, of)
		}
	}
	angles := 0
	for _, l := range lookalikes {
		if l.of == '«' || l.of == '»' {
			angles++
		}
	}
	if angles != 26 {
		t.Errorf("the table has %d angle brackets by name, the package doc lists 26", angles)
	}
	// « » are the delimiters, neutralized on their own. The full stop's
	// look-alikes (one dot) are not the ellipsis's; ASCII prototypes are not
	// look-alikes of themselves. Triangles, corner brackets, geometric angles
	// and operators not named brackets are not angle brackets.
	for _, r := range []rune{'«', '»', '.', '․', '٠', '<', '>', '\\', '/', 'a', '中', '¦', '▶', '◀', '「', '」', '∟', '⸖', '⪡', '⪢', '＜', '＞'} {
		if got := imitates(r); got != 0 {
			t.Errorf("imitates(%q) = %q, want none", r, got)
		}
	}
	letters := 0
	for _, l := range lookalikes {
		if unicode.IsLetter(l.r) {
			letters++
			if lookalikeSymbol(l.r) {
				t.Errorf("%U is a letter, escaped as a symbol", l.r)
			}
		} else if !lookalikeSymbol(l.r) || Quote(string(l.r)) == string(l.r) {
			t.Errorf("%U %q is a look-alike symbol left raw", l.r, l.r)
		}
	}
	t.Logf("%d look-alikes, %d of them letters", len(lookalikes), letters)
}
