// Package doccheck checks that this module's documentation names only what
// exists, so that a reader who looks up a guarantee's test finds it.
//
// [Module.Check] reads every Markdown file of the module (README.md,
// BENCHMARKS.md, docs/*.md and the rest) and every comment of its Go
// files, package docs included, and reports:
//
//   - a test, benchmark, fuzz target or example (Test…, Benchmark…, Fuzz…,
//     Example…) that no Go file of the module declares as a function (or,
//     for helpers such as ledgertest's benchmark drivers, a type); a name
//     followed by "*" or "<", or anchored by "^" without a "$" (a -run
//     pattern), is a prefix, and some name must start with it;
//   - a repository path that does not exist, in Markdown code (`spans` and
//     fenced blocks) and anywhere in a Go comment: a word starting with
//     "./", or with a directory at the module's root and a slash (impl/,
//     internal/, cmd/, docs/, .ci/ …); "/..." and globs are understood,
//     words holding "$", "<" or "{" (placeholders, shell expansions) are
//     skipped, and a bare Markdown file name is looked for beside the
//     document, then at the root;
//   - in Markdown, a relative link whose file does not exist, or whose
//     #fragment names no heading (GitHub's anchors) of the file linked to.
//
// A test named with a subtest (`TestFrontEndSuite/SpentTwice`, as go
// test -run takes it) is checked one level down too: the subtest's name
// must be a string literal of some Go file of the module (spaces written
// as go test writes them, "_"), as a table's case names are; a document
// cannot cite a subtest whose name is built at run time.
//
// It does not check what a name is said to check (a reader and the tests
// themselves do that), that the literal names a subtest of that very
// test, subtests below the first level, paths written relative to another
// directory than the root, links to other sites, or anything under
// testdata/, node_modules/ or a directory whose name starts with a dot
// other than .ci.
package doccheck

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// A Problem is one thing a document names that does not exist.
type Problem struct {
	File string // relative to the module's root, slash-separated
	Line int
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg) }

// A Module is a module's tree and the test, benchmark, fuzz and example
// names its Go files declare.
type Module struct {
	root  string
	funcs []string            // sorted Test…/Benchmark…/Fuzz…/Example… functions and types
	lits  map[string]bool     // string literals of the Go files, spaces made "_": subtests' names
	top   map[string]bool     // entries at the root: directories (with "/") and files
	docs  []string            // Markdown files, relative
	gos   []string            // Go files, relative
	heads map[string][]string // anchors of each Markdown file, filled lazily
}

// skipDir reports whether a directory below the root holds no
// documentation of this module: fixtures, third-party code, VCS state.
func skipDir(name string) bool {
	return name == "testdata" || name == "node_modules" || (strings.HasPrefix(name, ".") && name != ".ci")
}

// Load reads the tree under root, the directory holding go.mod.
func Load(root string) (*Module, error) {
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return nil, fmt.Errorf("doccheck: %s is not a module's root: %w", root, err)
	}
	m := &Module{root: root, top: map[string]bool{}, heads: map[string][]string{}, lits: map[string]bool{}}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() {
			if !skipDir(e.Name()) {
				m.top[e.Name()+"/"] = true
			}
		} else {
			m.top[e.Name()] = true
		}
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case strings.HasSuffix(rel, ".md"):
			m.docs = append(m.docs, rel)
		case strings.HasSuffix(rel, ".go"):
			m.gos = append(m.gos, rel)
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				return fmt.Errorf("doccheck: %w", err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING {
					if v, err := strconv.Unquote(l.Value); err == nil {
						m.lits[strings.ReplaceAll(v, " ", "_")] = true
					}
				}
				return true
			})
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if d.Recv == nil && nameRE.MatchString(d.Name.Name) {
						m.funcs = append(m.funcs, d.Name.Name)
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						if ts, ok := s.(*ast.TypeSpec); ok && nameRE.MatchString(ts.Name.Name) {
							m.funcs = append(m.funcs, ts.Name.Name)
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(m.funcs)
	m.funcs = slices.Compact(m.funcs)
	return m, nil
}

// Funcs returns the test, benchmark, fuzz and example names found
// (functions, and types such as a benchmark driver's), sorted.
func (m *Module) Funcs() []string { return slices.Clone(m.funcs) }

// Unlisted returns the packages under each of dirs (directories relative
// to the root, holding Go files other than tests) that the Markdown file
// doc does not name as a code span of their path (`impl/ledger`), sorted:
// a layout table that must list every package.
func (m *Module) Unlisted(doc string, dirs ...string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(m.root, filepath.FromSlash(doc)))
	if err != nil {
		return nil, err
	}
	named := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		_, code := splitSpans(line)
		for _, c := range code {
			named[c] = true
		}
	}
	pkgs := map[string]bool{}
	for _, g := range m.gos {
		dir := path.Dir(g)
		if strings.HasSuffix(g, "_test.go") || slices.Contains(strings.Split(dir, "/"), "testdata") {
			continue
		}
		for _, d := range dirs {
			if dir == d || strings.HasPrefix(dir, d+"/") {
				pkgs[dir] = true
			}
		}
	}
	var out []string
	for p := range pkgs {
		if !named[p] {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Docs returns the Markdown files found, relative to the root.
func (m *Module) Docs() []string { return slices.Clone(m.docs) }

// Check checks every Markdown file and every Go file's comments.
func (m *Module) Check() ([]Problem, error) {
	var out []Problem
	for _, d := range m.docs {
		ps, err := m.CheckMarkdown(d)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	for _, g := range m.gos {
		ps, err := m.CheckGoComments(g)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	return out, nil
}

// nameRE matches a whole test, benchmark, fuzz or example function name.
var nameRE = regexp.MustCompile(`^(Test|Benchmark|Fuzz|Example)([A-Z0-9_][A-Za-z0-9_]*)?$`)

// mentionRE finds names in text; the character before must not be part
// of an identifier or a qualifier (fstest.TestFS is another package's).
var mentionRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9_.])((?:Test|Benchmark|Fuzz|Example)[A-Z0-9_][A-Za-z0-9_]*)`)

// names reports each test name in text that the module does not declare.
func (m *Module) names(text string, line func(off int) int, file string) []Problem {
	var out []Problem
	for _, loc := range mentionRE.FindAllStringSubmatchIndex(text, -1) {
		start, end := loc[2], loc[3]
		name := text[start:end]
		var next, prev byte
		if end < len(text) {
			next = text[end]
		}
		if start > 0 {
			prev = text[start-1]
		}
		prefix := next == '*' || next == '<' || (prev == '^' && next != '$')
		i := sort.SearchStrings(m.funcs, name)
		found := i < len(m.funcs) && (m.funcs[i] == name || prefix && strings.HasPrefix(m.funcs[i], name))
		if !found && prefix {
			// A test's name, "_" and a case: a name built as go test builds subtests' names.
			base := strings.TrimRight(name, "_")
			_, found = slices.BinarySearch(m.funcs, base)
		}
		if !found {
			what := "names " + name + ", which the module does not declare"
			if prefix {
				what = "names " + name + "… as a prefix, but no test of the module starts with it"
			}
			out = append(out, Problem{file, line(start), what})
			continue
		}
		if sub := subtestRE.FindStringSubmatch(text[end:]); sub != nil && !m.lits[sub[1]] {
			out = append(out, Problem{file, line(start), "names the subtest " + name + "/" + sub[1] + ", but no Go file of the module has " + strconv.Quote(sub[1]) + " as a string"})
		}
	}
	return out
}

// subtestRE matches the name of a subtest right after its test's name.
var subtestRE = regexp.MustCompile(`^/([A-Za-z0-9_][A-Za-z0-9_.-]*)`)

// CheckGoComments checks the comments of one Go file (relative to the
// root) for test names.
func (m *Module) CheckGoComments(rel string) ([]Problem, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(m.root, filepath.FromSlash(rel)), nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("doccheck: %w", err)
	}
	var out []Problem
	for _, g := range f.Comments {
		for _, c := range g.List {
			pos := c.Pos()
			out = append(out, m.names(c.Text, func(off int) int {
				return fset.Position(pos + token.Pos(off)).Line
			}, rel)...)
			for i, line := range strings.Split(c.Text, "\n") {
				out = append(out, m.paths(line, rel, fset.Position(pos).Line+i)...)
			}
		}
	}
	return out, nil
}

var (
	fenceRE = regexp.MustCompile("^\\s*(```|~~~)")
	spanRE  = regexp.MustCompile("`+")
	linkRE  = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refRE   = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+(\S+)`)
	headRE  = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	idRE    = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	schemeR = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// CheckMarkdown checks one Markdown file, relative to the root.
func (m *Module) CheckMarkdown(rel string) ([]Problem, error) {
	b, err := os.ReadFile(filepath.Join(m.root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, err
	}
	var out []Problem
	inFence := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		at := func(int) int { return n }
		out = append(out, m.names(line, at, rel)...)
		if fenceRE.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			out = append(out, m.paths(line, rel, n)...)
			continue
		}
		prose, code := splitSpans(line)
		for _, c := range code {
			out = append(out, m.paths(c, rel, n)...)
		}
		var targets []string
		for _, l := range linkRE.FindAllStringSubmatch(prose, -1) {
			targets = append(targets, l[1])
		}
		if r := refRE.FindStringSubmatch(prose); r != nil {
			targets = append(targets, r[1])
		}
		for _, t := range targets {
			if msg := m.link(rel, t); msg != "" {
				out = append(out, Problem{rel, n, msg})
			}
		}
	}
	return out, sc.Err()
}

// splitSpans returns line with its code spans blanked, and the spans.
func splitSpans(line string) (prose string, code []string) {
	var b strings.Builder
	for {
		loc := spanRE.FindStringIndex(line)
		if loc == nil {
			break
		}
		tick := line[loc[0]:loc[1]]
		end := strings.Index(line[loc[1]:], tick)
		if end < 0 {
			break
		}
		b.WriteString(line[:loc[0]])
		code = append(code, line[loc[1]:loc[1]+end])
		b.WriteString(" ")
		line = line[loc[1]+end+len(tick):]
	}
	b.WriteString(line)
	return b.String(), code
}

// link checks one link target of the Markdown file from; it returns what
// is wrong, or "".
func (m *Module) link(from, target string) string {
	if schemeR.MatchString(target) {
		return "" // another site, or mailto:
	}
	file, frag, _ := strings.Cut(target, "#")
	var p string
	switch {
	case file == "":
		p = from
	case strings.HasPrefix(file, "/"):
		p = path.Clean(strings.TrimPrefix(file, "/"))
	default:
		p = path.Join(path.Dir(from), file)
	}
	if p == ".." || strings.HasPrefix(p, "../") {
		return "links to " + target + ", outside the module"
	}
	if _, err := os.Stat(filepath.Join(m.root, filepath.FromSlash(p))); err != nil {
		return "links to " + target + ", but " + p + " does not exist"
	}
	if frag == "" || !strings.HasSuffix(p, ".md") {
		return ""
	}
	anchors, err := m.anchors(p)
	if err != nil {
		return "links to " + target + ": " + err.Error()
	}
	if !slices.Contains(anchors, frag) {
		return "links to " + target + ", but " + p + " has no heading with that anchor"
	}
	return ""
}

// anchors returns the anchors GitHub gives the headings of a Markdown
// file, and its explicit <a id> and <a name> anchors.
func (m *Module) anchors(rel string) ([]string, error) {
	if a, ok := m.heads[rel]; ok {
		return a, nil
	}
	b, err := os.ReadFile(filepath.Join(m.root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(string(b), "\n") {
		if fenceRE.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, id := range idRE.FindAllStringSubmatch(line, -1) {
			out = append(out, id[1])
		}
		h := headRE.FindStringSubmatch(line)
		if h == nil {
			continue
		}
		s := Slug(h[2])
		if k := seen[s]; k > 0 {
			out = append(out, fmt.Sprintf("%s-%d", s, k))
		} else {
			out = append(out, s)
		}
		seen[s]++
	}
	m.heads[rel] = out
	return out, nil
}

var inlineLinkRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// Slug returns the anchor GitHub gives a heading: its text without
// Markdown, lower-cased, with everything but letters, marks, digits,
// connector punctuation, spaces and hyphens removed, and spaces made
// hyphens.
func Slug(heading string) string {
	heading = inlineLinkRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r) || unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// paths reports each repository path in a piece of code that does not
// exist.
func (m *Module) paths(code, file string, line int) []Problem {
	var out []Problem
	words := strings.FieldsFunc(code, func(r rune) bool {
		return unicode.IsSpace(r) || strings.ContainsRune("'\"`=(),;|&[]", r)
	})
	for _, w := range words {
		if strings.ContainsAny(w, "${}<>") {
			continue // a placeholder or a shell expansion, not a path
		}
		w = strings.TrimRight(w, ".,:;!?")
		w = strings.TrimSuffix(strings.TrimSuffix(w, "..."), "/")
		if w == "." || w == "" {
			continue
		}
		p, ok := m.repoPath(w, file)
		if !ok {
			continue
		}
		full := filepath.Join(m.root, filepath.FromSlash(p))
		if strings.ContainsAny(p, "*?") {
			if hits, _ := filepath.Glob(full); len(hits) > 0 {
				continue
			}
		} else if _, err := os.Stat(full); err == nil {
			continue
		}
		out = append(out, Problem{file, line, "names the path " + w + ", which does not exist in the module"})
	}
	return out
}

// repoPath returns w as a path relative to the root if it is written as
// one: "./" and a path, or a directory at the root, a slash and a path; a
// bare Markdown file name is looked for beside the document from, then at
// the root.
func (m *Module) repoPath(w, from string) (string, bool) {
	if strings.HasPrefix(w, "./") {
		return path.Clean(w), true
	}
	first, _, slash := strings.Cut(w, "/")
	if slash && m.top[first+"/"] {
		return path.Clean(w), true
	}
	if !slash && mdRE.MatchString(w) {
		beside := path.Join(path.Dir(from), w)
		if _, err := os.Stat(filepath.Join(m.root, filepath.FromSlash(beside))); err == nil {
			return beside, true
		}
		return w, true
	}
	return "", false
}

var mdRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+\.md$`)
