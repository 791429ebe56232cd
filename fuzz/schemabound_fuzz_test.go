package fuzz

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcp-confirm/mcp-confirm/internal/schemabound"
)

// FuzzSchemaBound asserts that schemabound.Check ends on any schema, and
// that a schema it accepts applies at most MaxWork subschemas to each
// node of a value, counted on that value: the members and items it has,
// the patterns its member names match. Check bounds this over every value
// a schema could meet; the count here is of one. Then jsonschema-go
// validates the value, which a schema applying its work twice at each
// level would not finish (the fuzzer reports a hang).
func FuzzSchemaBound(f *testing.F) {
	for _, c := range [][2]string{
		{`{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"object","properties":{"l":{"$ref":"#/$defs/n"},"r":{"$ref":"#/$defs/n"}}}}}`, `{"n":{"l":{"r":{"l":{}}}}}`},
		{`{"type":"array","items":{"allOf":[{"$ref":"#"},{"$ref":"#"}]}}`, strings.Repeat("[", 12) + strings.Repeat("]", 12)},
		{`{"type":"array","items":{"$ref":"#"},"contains":{"$ref":"#"}}`, `[[[[[[[[[[[[1]]]]]]]]]]]]`},
		{`{"type":"object","patternProperties":{"^x":{"$ref":"#"},"y$":{"$ref":"#"}}}`, strings.Repeat(`{"xy":`, 11) + `{}` + strings.Repeat("}", 11)},
		{`{"type":"object","additionalProperties":{"anyOf":[{"$ref":"#"},{"type":"string"}]},"propertyNames":{"maxLength":3}}`, `{"a":{"b":{"c":"d"}}}`},
		{`{"prefixItems":[{"$ref":"#"}],"items":{"not":{"$ref":"#/prefixItems/0"}},"unevaluatedItems":false}`, `[[1,2],[[3]]]`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"$ref":"#"}],"additionalItems":{"if":{"$ref":"#"},"then":{"type":"string"},"else":{"$ref":"#"}},"dependencies":{"a":{"required":["b"]}}}`, `[[[1,"x"]],2]`},
		{`{"anyOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/a"}],"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/b"},{"$ref":"#/$defs/b"}]},"b":{"properties":{"x":{"$ref":"#"}},"unevaluatedProperties":{"type":"number"}}}}`, `{"x":{"x":{"y":1}}}`},
	} {
		f.Add([]byte(c[0]), []byte(c[1]))
	}
	f.Fuzz(func(t *testing.T, schemaJSON, valueJSON []byte) {
		var root *jsonschema.Schema
		if json.Unmarshal(schemaJSON, &root) != nil || root == nil {
			return
		}
		var wire any
		if err := json.Unmarshal(schemaJSON, &wire); err != nil {
			t.Fatalf("a schema jsonschema-go decoded is not JSON: %v", err)
		}
		err := schemabound.Check(root)
		if werr := schemabound.CheckWire(wire); (werr == nil) != (err == nil) {
			t.Fatalf("Check: %v; CheckWire of the same document: %v", err, werr)
		}
		if err != nil {
			return
		}
		resolved, rerr := root.Resolve(nil)
		var value any
		if rerr != nil || json.Unmarshal(valueJSON, &value) != nil {
			return
		}
		c := counter{t: t, root: root, patterns: map[string]*regexp.Regexp{}}
		c.node(value, map[*jsonschema.Schema]int{root: 1}, "value")
		_ = resolved.Validate(value)
	})
}

// counter counts the subschemas jsonschema-go may apply to each node of
// one value, read from the keywords as the validator reads them.
type counter struct {
	t        *testing.T
	root     *jsonschema.Schema
	patterns map[string]*regexp.Regexp
}

// node counts what meets (subschemas, each as often as it is met)
// applies to v, fails beyond MaxWork, and goes on to v's members and
// items.
func (c *counter) node(v any, meets map[*jsonschema.Schema]int, where string) {
	applied := map[*jsonschema.Schema]int{}
	total := 0
	var apply func(s *jsonschema.Schema, n int)
	apply = func(s *jsonschema.Schema, n int) {
		if s == nil {
			return
		}
		if total += n; total > schemabound.MaxWork {
			c.t.Fatalf("Check accepted a schema that applies more than %d subschemas to %s", schemabound.MaxWork, where)
		}
		applied[s] += n
		if s.Ref != "" {
			target, err := schemabound.Target(c.root, s.Ref)
			if err != nil {
				c.t.Fatalf("Check accepted a $ref it cannot follow: %v", err)
			}
			apply(target, n)
		}
		for _, d := range append([]*jsonschema.Schema{s.Not, s.If, s.Then, s.Else}, append(append(s.AllOf, s.AnyOf...), s.OneOf...)...) {
			apply(d, n)
		}
		for _, d := range s.DependentSchemas {
			apply(d, n)
		}
		for _, d := range s.DependencySchemas {
			apply(d, n)
		}
	}
	for s, n := range meets {
		apply(s, n)
	}
	child := func(v any, where string, pick func(s *jsonschema.Schema) []*jsonschema.Schema) {
		next := map[*jsonschema.Schema]int{}
		for s, n := range applied {
			for _, d := range pick(s) {
				if d != nil {
					next[d] += n
				}
			}
		}
		if len(next) > 0 {
			c.node(v, next, where)
		}
	}
	switch v := v.(type) {
	case map[string]any:
		for k, m := range v {
			child(m, where+"."+k, func(s *jsonschema.Schema) []*jsonschema.Schema {
				var out []*jsonschema.Schema
				matched := false
				for p, d := range s.PatternProperties {
					if c.match(p, k) {
						out, matched = append(out, d), true
					}
				}
				if d, ok := s.Properties[k]; ok {
					out = append(out, d)
				} else if !matched {
					out = append(out, s.AdditionalProperties)
				}
				return append(out, s.UnevaluatedProperties)
			})
			child(k, where+" name "+strconv.Quote(k), func(s *jsonschema.Schema) []*jsonschema.Schema {
				return []*jsonschema.Schema{s.PropertyNames}
			})
		}
	case []any:
		for i, m := range v {
			child(m, where+"["+strconv.Itoa(i)+"]", func(s *jsonschema.Schema) []*jsonschema.Schema {
				out := []*jsonschema.Schema{s.Contains, s.UnevaluatedItems}
				switch {
				case i < len(s.PrefixItems):
					return append(out, s.PrefixItems[i])
				case i < len(s.ItemsArray):
					return append(out, s.ItemsArray[i])
				}
				return append(out, s.Items, s.AdditionalItems)
			})
		}
	}
}

// match reports whether the pattern p matches the member name k; a
// pattern Go's regexp does not compile counts as matching.
func (c *counter) match(p, k string) bool {
	re, ok := c.patterns[p]
	if !ok {
		re, _ = regexp.Compile(p)
		c.patterns[p] = re
	}
	return re == nil || re.MatchString(k)
}
