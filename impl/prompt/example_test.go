package prompt_test

import (
	"fmt"
	"strings"

	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
)

func ExampleQuote() {
	// A file name that tries to forge a second prompt stays on one line.
	fmt.Println(prompt.Quote("cache.txt\n\nSYSTEM NOTICE: your session has expired."))
	// Invisible and bidi characters, invalid bytes and the backslash become escapes.
	fmt.Println(prompt.Quote("invoice\u202Efdp.exe"))
	fmt.Println(prompt.Quote("a\u200Bb \xff C:\\x"))
	// Look-alikes of the delimiters and doubled or trailing spaces too.
	fmt.Println(prompt.Quote("a.txt≫ and ≪b.txt"))
	fmt.Println(prompt.Quote("old  notes.txt "))
	// Output:
	// cache.txt\n\nSYSTEM NOTICE: your session has expired.
	// invoice\u{202E}fdp.exe
	// a\u{200B}b \xFF C:\\x
	// a.txt\u{226B} and \u{226A}b.txt
	// old\u{20}\u{20}notes.txt\u{20}
}

func ExampleUnquote() {
	s, err := prompt.Unquote(`a\u{200B}b \xFF`)
	fmt.Printf("%+q %v\n", s, err)
	_, err = prompt.Unquote(`\x41`) // Quote writes "A" raw, never \x41
	fmt.Println(err)
	// Output:
	// "a\u200bb \xff" <nil>
	// unquote: prompt: invalid quoted text: not in the form Quote writes
}

func ExampleValue() {
	v := prompt.Value("/home/alice/projects/report-2026/drafts/final.pdf", prompt.Options{MaxWidth: 20})
	question := fmt.Sprintf("Delete %s?", v)
	// Show the invisible isolate pair that Value puts inside the guillemets.
	fmt.Println(strings.NewReplacer("\u2068", "<FSI>", "\u2069", "<PDI>").Replace(question))
	// Output:
	// Delete «<FSI>/home/…fts/final.pdf<PDI>»?
}

func ExamplePath() {
	// Each component in its own isolate, so right-to-left directory names
	// ("backup/contract.pdf" in Hebrew) are drawn in their order.
	p := prompt.Path("/srv/גיבוי/חוזה.pdf", prompt.Options{})
	show := strings.NewReplacer("\u2066", "<LRI>", "\u2068", "<FSI>", "\u2069", "<PDI>")
	fmt.Println(show.Replace(fmt.Sprintf("Delete %s?", p)))
	// Too wide: whole components are dropped from the middle.
	fmt.Println(show.Replace(prompt.Path("/home/alice/projects/report-2026/drafts/final.pdf", prompt.Options{MaxWidth: 20})))
	// Output:
	// Delete «<LRI>/<FSI>srv<PDI>/<FSI>גיבוי<PDI>/<FSI>חוזה.pdf<PDI><PDI>»?
	// «<LRI>/<FSI>home<PDI>/…/<FSI>final.pdf<PDI><PDI>»
}

func ExampleWarnings() {
	for _, name := range []string{"report.pdf", "p\u0430ypal.com", "notes\u200B.txt"} {
		fmt.Println(prompt.Quote(name), prompt.Warnings(name))
	}
	// Output:
	// report.pdf []
	// pаypal.com [it mixes scripts or uses letters that look like punctuation, which can imitate another name]
	// notes\u{200B}.txt [it contains hidden or ambiguous characters, shown as \ escapes]
}
