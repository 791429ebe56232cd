// Package confusables derives the code points that look like the punctuation
// package prompt gives a meaning to: from UTS #39's confusables.txt, and, for
// the guillemets that file leaves alone, from Unicode's character names (see
// [Angle]). Package prompt's generator (gen_lookalikes.go) writes the derived
// table as Go source, and prompt's tests derive it again from the committed
// file to check that the table is current.
//
// The derivation follows UTS #39 section 4: the skeleton of a string is
// NFD, then each code point replaced by its prototype from confusables.txt,
// then NFD again. NFD comes from golang.org/x/text/unicode/norm and the names
// from golang.org/x/text/unicode/runenames, whose Unicode version must be
// the file's (all 15.0.0 with Go 1.26).
package confusables

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
	"golang.org/x/text/unicode/runenames"
)

// Data is a parsed confusables.txt.
type Data struct {
	// Version is the file's "# Version:" line, such as "15.0.0".
	Version string
	// Prototype maps each source code point to its prototype string.
	Prototype map[rune]string
}

// Parse reads confusables.txt: lines "SOURCE ; TARGET... ; TYPE # comment",
// code points in hex. A leading byte order mark is allowed. Any other line
// that is neither blank nor a comment is an error, as is a source given twice.
func Parse(r io.Reader) (*Data, error) {
	d := &Data{Prototype: map[rune]string{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if n == 1 {
			line = strings.TrimPrefix(line, "\uFEFF")
		}
		if v, ok := strings.CutPrefix(line, "# Version:"); ok && d.Version == "" {
			d.Version = strings.TrimSpace(v)
		}
		data, _, _ := strings.Cut(line, "#")
		if strings.TrimSpace(data) == "" {
			continue
		}
		fields := strings.Split(data, ";")
		if len(fields) != 3 {
			return nil, fmt.Errorf("confusables: line %d: want 3 fields, got %d", n, len(fields))
		}
		src, err := codePoints(fields[0])
		if err != nil || len(src) != 1 {
			return nil, fmt.Errorf("confusables: line %d: bad source %q", n, fields[0])
		}
		dst, err := codePoints(fields[1])
		if err != nil || len(dst) == 0 {
			return nil, fmt.Errorf("confusables: line %d: bad target %q", n, fields[1])
		}
		if _, dup := d.Prototype[src[0]]; dup {
			return nil, fmt.Errorf("confusables: line %d: %U given twice", n, src[0])
		}
		d.Prototype[src[0]] = string(dst)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("confusables: %w", err)
	}
	if d.Version == "" || len(d.Prototype) == 0 {
		return nil, errors.New("confusables: no version line or no data")
	}
	return d, nil
}

// Load parses the confusables.txt at path.
func Load(path string) (*Data, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("confusables: %w", err)
	}
	defer f.Close()
	return Parse(f)
}

// codePoints parses space-separated hex code points.
func codePoints(s string) ([]rune, error) {
	var rs []rune
	for _, f := range strings.Fields(s) {
		v, err := strconv.ParseUint(f, 16, 32)
		if err != nil || v > unicode.MaxRune {
			return nil, fmt.Errorf("bad code point %q", f)
		}
		rs = append(rs, rune(v))
	}
	return rs, nil
}

// Skeleton returns UTS #39's skeleton of s.
func (d *Data) Skeleton(s string) string {
	var b strings.Builder
	for _, r := range norm.NFD.String(s) {
		if p, ok := d.Prototype[r]; ok {
			b.WriteString(p)
		} else {
			b.WriteRune(r)
		}
	}
	return norm.NFD.String(b.String())
}

// A Lookalike is a code point that looks like the punctuation Of: its
// skeleton is Of repeated (at least an Imitated entry's MinRepeat times), or
// Of is '«' or '»' and Angle says it is a bracket of that shape.
type Lookalike struct {
	Rune rune
	Of   rune
}

// Imitated lists the punctuation whose look-alikes are wanted, each with the
// fewest repetitions of it that count: a skeleton of two or more full stops
// looks like an ellipsis, a single one only like a full stop.
var Imitated = []struct {
	Of        rune
	MinRepeat int
}{
	{'<', 1},  // «, the opening delimiter: ‹ ≪ ❮ → "<", "<<"
	{'>', 1},  // », the closing delimiter: › ≫ ❯ → ">", ">>"
	{'.', 2},  // …, the truncation mark: … → "...", ‥ → ".."
	{'\\', 1}, // \, the escape character: ∖ ＼ → "\"
	{'/', 1},  // /, the path separator: ∕ ⁄ → "/"
}

// Lookalikes returns, in code point order, every code point for which
// Imitates is not 0.
func (d *Data) Lookalikes() []Lookalike {
	var ls []Lookalike
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		if of := d.Imitates(r); of != 0 {
			ls = append(ls, Lookalike{r, of})
		}
	}
	return ls
}

// Imitates returns the punctuation r looks like, or 0: the entry of Imitated
// that r's skeleton is made of (repeated at least its MinRepeat times), or
// else Angle's guillemet. ASCII code points, the prototypes, and surrogates
// imitate nothing.
func (d *Data) Imitates(r rune) rune {
	if r < 0x80 || 0xD800 <= r && r <= 0xDFFF {
		return 0
	}
	sk := d.Skeleton(string(r))
	for _, im := range Imitated {
		if len(sk) >= im.MinRepeat && strings.Count(sk, string(im.Of)) == len(sk) {
			return im.Of
		}
	}
	return Angle(r, runenames.Name(r))
}

// Source returns the Go source of package prompt's look-alike table, made
// from confusables.txt of the given version and the character names of
// NamesVersion.
func Source(version string, ls []Lookalike) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by gen_lookalikes.go from testdata/confusables.txt (UTS #39, version %s) and the Unicode %s character names of x/text's runenames. DO NOT EDIT.\n\n", version, NamesVersion)
	b.WriteString("package prompt\n\n")
	b.WriteString("// lookalikes lists, in code point order, the code points whose UTS #39\n")
	b.WriteString("// skeleton is made only of <, only of >, of two or more full stops, only of\n")
	b.WriteString("// backslashes or only of slashes, each with the ASCII character it imitates,\n")
	b.WriteString("// and the other angle brackets and angle quotation marks, found by their\n")
	b.WriteString("// names (confusables.Angle), each with the guillemet of its side.\n")
	fmt.Fprintf(&b, "var lookalikes = [%d]lookalike{\n", len(ls))
	for _, l := range ls {
		fmt.Fprintf(&b, "\t{0x%04X, %s}, // %s\n", l.Rune, strconv.QuoteRune(l.Of), strconv.QuoteRuneToGraphic(l.Rune))
	}
	b.WriteString("}\n")
	return b.Bytes()
}
