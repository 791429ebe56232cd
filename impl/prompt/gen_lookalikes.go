//go:build ignore

// gen_lookalikes writes lookalikes.go, the table of code points that look
// like the question's punctuation, from testdata/confusables.txt (UTS #39)
// and Unicode's character names (golang.org/x/text/unicode/runenames). Run
// it with go generate; TestLookalikesMatchConfusables checks the result.
package main

import (
	"go/format"
	"log"
	"os"

	"github.com/mcp-confirm/mcp-confirm/internal/confusables"
)

func main() {
	d, err := confusables.Load("testdata/confusables.txt")
	if err != nil {
		log.Fatal(err)
	}
	src, err := format.Source(confusables.Source(d.Version, d.Lookalikes()))
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("lookalikes.go", src, 0o644); err != nil {
		log.Fatal(err)
	}
}
