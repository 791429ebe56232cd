package prompt_test

import (
	"strings"
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

// mixedText is about n bytes of words of eight scripts, as
// BenchmarkProxyArgumentSize writes them.
func mixedText(n int) string {
	line := "Отчёт résumé Ελληνικά 中文文本 ひらがな العربية עברית हिन्दी "
	return strings.Repeat(line, n/len(line)+1)[:n-len(line)] + line
}

// BenchmarkQuestionMiB measures what a question pays for a 1 MiB value of
// mixed scripts: Value and Warnings of it, and Path and PathWarnings of a
// 1 MiB path of such components.
func BenchmarkQuestionMiB(b *testing.B) {
	text := mixedText(1 << 20)
	path := "/" + strings.ReplaceAll(text, " ", "/")
	b.Run("value", func(b *testing.B) {
		for b.Loop() {
			prompt.Value(text, prompt.Options{MaxWidth: 120})
			prompt.Warnings(text)
		}
	})
	b.Run("path", func(b *testing.B) {
		for b.Loop() {
			prompt.Path(path, prompt.Options{MaxWidth: 120})
			prompt.PathWarnings(path)
		}
	})
}
