package prompt_test

import (
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
)

// fileName is a typical path as delete_file shows it.
const fileName = "/home/alice/projects/report-2026/drafts/final.pdf"

// BenchmarkValueFileName measures what a confirmation question pays per
// untrusted value: Value (Quote, width check, isolates) on a typical path.
// BenchmarkValue measures the 1 MiB hostile inputs, BenchmarkQuoteFileName
// Quote alone.
func BenchmarkValueFileName(b *testing.B) {
	b.SetBytes(int64(len(fileName)))
	for b.Loop() {
		prompt.Value(fileName, prompt.Options{})
	}
}

// BenchmarkWarningsFileName measures the hidden-character and mixed-script
// check delete_file adds to its question, on the same path.
func BenchmarkWarningsFileName(b *testing.B) {
	b.SetBytes(int64(len(fileName)))
	for b.Loop() {
		if w := prompt.Warnings(fileName); w != nil {
			b.Fatalf("Warnings(%q) = %q", fileName, w)
		}
	}
}

// BenchmarkPathFileName measures the form delete_file's question uses now:
// Path on the same file name, each component in its own isolate.
func BenchmarkPathFileName(b *testing.B) {
	b.SetBytes(int64(len(fileName)))
	for b.Loop() {
		prompt.Path(fileName, prompt.Options{})
	}
}

// BenchmarkPathWarningsFileName measures delete_file's notes on the path.
func BenchmarkPathWarningsFileName(b *testing.B) {
	b.SetBytes(int64(len(fileName)))
	for b.Loop() {
		if w := prompt.PathWarnings(fileName); w != nil {
			b.Fatalf("PathWarnings(%q) = %q", fileName, w)
		}
	}
}
