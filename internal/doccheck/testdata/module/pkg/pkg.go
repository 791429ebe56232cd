// Package pkg is checked by TestPresent and, wrongly, by TestGoneFromComment.
// Its guide is docs/guide.md; docs/missing.md is not there.
package pkg

// BenchmarkDriver is a helper's type that documents may name.
type BenchmarkDriver struct{}

// BenchmarkShared is a helper function that documents may name.
func BenchmarkShared() {}
