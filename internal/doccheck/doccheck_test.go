package doccheck_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/internal/doccheck"
)

// TestDocsNameOnlyWhatExists: every test, benchmark, fuzz target and
// example that the module's Markdown files and Go comments name is
// declared by one of its _test.go files, and every relative link and
// repository path they give exists.
func TestDocsNameOnlyWhatExists(t *testing.T) {
	m, err := doccheck.Load("../..")
	if err != nil {
		t.Fatal(err)
	}
	// The check must have something to check: the module's own
	// documents and tests (a wrong root or a walk that skips everything
	// would pass silently).
	for _, want := range []string{"README.md", "BENCHMARKS.md"} {
		if !slices.Contains(m.Docs(), want) {
			t.Fatalf("the walk did not find %s: %v", want, m.Docs())
		}
	}
	if !slices.Contains(m.Funcs(), "TestDocsNameOnlyWhatExists") {
		t.Fatal("the walk did not find this test's own name")
	}
	problems, err := m.Check()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestCatchesMissingNames is the negative control: a fixture module whose
// documents and comments name a missing test, benchmark and fuzz target, a
// missing prefix, a missing subtest, a broken link, a missing anchor and
// missing paths must yield exactly those problems, and nothing for what it
// names correctly.
func TestCatchesMissingNames(t *testing.T) {
	m, err := doccheck.Load("testdata/module")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Funcs(), []string{"BenchmarkDriver", "BenchmarkPresent", "BenchmarkShared", "ExamplePresent_method", "FuzzPresent", "TestAttackOne", "TestPresent"}; !slices.Equal(got, want) {
		t.Fatalf("functions = %v, want %v", got, want)
	}
	problems, err := m.Check()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	want := []string{
		"README.md:16: names TestGone, which the module does not declare",
		"README.md:17: names BenchmarkGone, which the module does not declare",
		"README.md:17: names TestNothing… as a prefix, but no test of the module starts with it",
		"README.md:18: links to docs/nowhere.md, but docs/nowhere.md does not exist",
		"README.md:18: links to docs/guide.md#no-such-heading, but docs/guide.md has no heading with that anchor",
		"README.md:19: names the path pkg/gone.go, which does not exist in the module",
		"README.md:19: names the path ./cmd/x, which does not exist in the module",
		"README.md:19: names the path NOTES.md, which does not exist in the module",
		"README.md:19: links to #problem, but README.md has no heading with that anchor",
		"README.md:20: names the subtest TestPresent/Gone, but no Go file of the module has \"Gone\" as a string",
		"docs/guide.md:7: names FuzzGone, which the module does not declare",
		"docs/guide.md:7: names the path ./docs/nothing, which does not exist in the module",
		"pkg/pkg.go:1: names TestGoneFromComment, which the module does not declare",
		"pkg/pkg.go:2: names the path docs/missing.md, which does not exist in the module",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Two commands", "two-commands"},
		{"The proxy: confirmations in front of any MCP server", "the-proxy-confirmations-in-front-of-any-mcp-server"},
		{"Who is asking: HTTP authentication", "who-is-asking-http-authentication"},
		{"`go test -short`", "go-test--short"},
		{"[Links](x.md) and *stars*", "links-and-stars"},
		{"Guarantees → tests → limits", "guarantees--tests--limits"},
		{"Clés à l'été", "clés-à-lété"},
		{"snake_case", "snake_case"},
	} {
		if got := doccheck.Slug(c.heading); got != c.want {
			t.Errorf("Slug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}

// TestReadmeLayoutNamesEveryPackage: the README's layout names every
// package under impl/ and internal/, so a newcomer finds each one's
// reason; TestLayoutCatchesUnlistedPackage is its control.
func TestReadmeLayoutNamesEveryPackage(t *testing.T) {
	m, err := doccheck.Load("../..")
	if err != nil {
		t.Fatal(err)
	}
	missing, err := m.Unlisted("README.md", "impl", "internal")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range missing {
		t.Errorf("README.md's layout does not name the package %s", p)
	}
}

// TestLayoutCatchesUnlistedPackage: in the fixture module, whose README
// names pkg but not pkg/sub, exactly pkg/sub is unlisted.
func TestLayoutCatchesUnlistedPackage(t *testing.T) {
	m, err := doccheck.Load("testdata/module")
	if err != nil {
		t.Fatal(err)
	}
	missing, err := m.Unlisted("README.md", "pkg")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"pkg/sub"}; !slices.Equal(missing, want) {
		t.Fatalf("unlisted = %v, want %v", missing, want)
	}
}
