package confusables_test

import (
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/confusables"
)

const header = "\uFEFF# confusables.txt\n# Version: 15.0.0\n"

func TestParse(t *testing.T) {
	d, err := confusables.Parse(strings.NewReader(header +
		"226B ;\t003E 003E ;\tMA\t# ( ≫ → >> )\n\n2216 ;\t005C ;\tMA\t# ( ∖ → \\ )\n" +
		"00E9 ;\t0065 ;\tMA\t# é → e, to show NFD first\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Version != "15.0.0" || len(d.Prototype) != 3 {
		t.Fatalf("Parse: version %q, %d entries", d.Version, len(d.Prototype))
	}
	for in, want := range map[string]string{"≫": ">>", "a∖b": "a\\b", "≫x": ">>x", "e\u0301": "e\u0301", "«": "«"} {
		if got := d.Skeleton(in); got != want {
			t.Errorf("Skeleton(%q) = %q, want %q", in, got, want)
		}
	}
	for r, want := range map[rune]rune{'≫': '>', '∖': '\\', '«': 0, '>': 0, 'é': 0} {
		if got := d.Imitates(r); got != want {
			t.Errorf("Imitates(%q) = %q, want %q", r, got, want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for name, text := range map[string]string{
		"no version":     "226B ;\t003E ;\tMA\n",
		"no data":        header,
		"two fields":     header + "226B ;\t003E\n",
		"bad hex":        header + "22XB ;\t003E ;\tMA\n",
		"two sources":    header + "226B 226A ;\t003E ;\tMA\n",
		"empty target":   header + "226B ;\t ;\tMA\n",
		"beyond Unicode": header + "110000 ;\t003E ;\tMA\n",
		"source twice":   header + "226B ;\t003E ;\tMA\n226B ;\t003C ;\tMA\n",
	} {
		if _, err := confusables.Parse(strings.NewReader(text)); err == nil {
			t.Errorf("%s: Parse accepted %q", name, text)
		}
	}
}
