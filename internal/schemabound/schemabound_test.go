package schemabound_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcp-confirm/mcp-confirm/internal/schemabound"
)

// anyOfChain is a schema of n $defs, each anyOf the next twice: a value
// is checked against 2^n subschemas.
func anyOfChain(n int) string {
	var defs []string
	for i := range n {
		defs = append(defs, fmt.Sprintf(`"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, fmt.Sprintf(`"d%d":{"type":"string"}`, n))
	return `{"type":"object","properties":{"x":{"$ref":"#/$defs/d0"}},"$defs":{` + strings.Join(defs, ",") + `}}`
}

// manyProperties returns n members of a properties keyword, each a
// reference to the root, each after a comma.
func manyProperties(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `,"p%d":{"$ref":"#"}`, i)
	}
	return b.String()
}

// deep returns values nested n deep: lists, objects (their member named
// to match the patterns above), and lists of such objects.
func deep(n int) []any {
	l, o, lo := any("s"), any("s"), any("s")
	for range n {
		l = []any{l}
		o = map[string]any{"xy": o}
		lo = []any{map[string]any{"xy": lo}}
	}
	return []any{l, o, lo}
}

// TestCheck: input schemas whose subschemas apply one
// another to the same value in a loop, or too many times, are refused
// before jsonschema-go validates anything against them; the references it
// does not follow are refused too. The accepted rows are the controls —
// among them the recursive schemas that consume the value as they recurse
// — and each is validated against a value to show the validator finishes.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name, schema string
		refuse       string // "" accepts
	}{
		{"plain", `{"type":"object","properties":{"a":{"type":"string"}}}`, ""},
		{"a tree: the root beneath a property", `{"type":"object","properties":{"child":{"$ref":"#"}}}`, ""},
		{"$defs", `{"type":"object","properties":{"a":{"$ref":"#/$defs/s"}},"$defs":{"s":{"type":"string"}}}`, ""},
		{"definitions, escaped", `{"type":"object","properties":{"a":{"$ref":"#/definitions/a~1b~0c"}},"definitions":{"a/b~c":{"type":"string"}}}`, ""},
		{"a pointer into properties", `{"type":"object","properties":{"a":{"type":"string"},"b":{"$ref":"#/properties/a"}}}`, ""},
		{"a pointer into items", `{"type":"object","properties":{"l":{"type":"array","items":{"type":"string"}},"m":{"$ref":"#/properties/l/items"}}}`, ""},
		{"a root $id", `{"$id":"https://example.com/s","type":"object","properties":{"a":{"$ref":"#/$defs/s"}},"$defs":{"s":{"type":"string"}}}`, ""},
		{"a list of a tree", `{"type":"object","properties":{"n":{"$ref":"#/$defs/node"}},"$defs":{"node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}}}}}`, ""},
		{"anyOf chain of 6", anyOfChain(6), ""},
		{"anyOf chain of 12", anyOfChain(12), "more than 1000"},
		{"a binary tree: two properties naming the node", `{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"object","properties":{"l":{"$ref":"#/$defs/n"},"r":{"$ref":"#/$defs/n"}}}}}`, ""},
		{"levels alternating: lists of objects of lists", `{"type":"object","properties":{"n":{"$ref":"#/$defs/l"}},"$defs":{"l":{"type":"array","items":{"type":"object","additionalProperties":{"$ref":"#/$defs/l"}}}}}`, ""},
		{"a tree through anyOf", `{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"$defs":{"n":{"anyOf":[{"type":"string"},{"type":"array","items":{"$ref":"#/$defs/n"}}]}}}`, ""},
		{"each item applying the list twice", `{"type":"object","properties":{"n":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"array","items":{"allOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/a"}]}}}}`, "levels down"},
		{"each item applying the list as items and as contains", `{"type":"object","properties":{"n":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"array","items":{"$ref":"#/$defs/a"},"contains":{"$ref":"#/$defs/a"}}}}`, "levels down"},
		{"a member matching two patterns", `{"type":"object","properties":{"n":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"object","patternProperties":{"^x":{"$ref":"#/$defs/a"},"y$":{"$ref":"#/$defs/a"}}}}}`, "levels down"},
		{"a prefix item applying the list as itself and as unevaluatedItems", `{"type":"object","properties":{"n":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"array","prefixItems":[{"$ref":"#/$defs/a"}],"unevaluatedItems":{"$ref":"#/$defs/a"}}}}`, "levels down"},
		{"a member's name against three subschemas, each three times", `{"type":"object","propertyNames":{"$ref":"#/$defs/b"},"$defs":{"b":{"allOf":[{"$ref":"#/$defs/c"},{"$ref":"#/$defs/c"},{"$ref":"#/$defs/c"}]},"c":{"anyOf":[{"$ref":"#/$defs/d"},{"$ref":"#/$defs/d"},{"$ref":"#/$defs/d"}]},"d":{"type":"string"}}}`, ""},
		{"a member meeting its property and unevaluatedProperties", `{"type":"object","properties":{"n":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"object","properties":{"xy":{"$ref":"#/$defs/a"}},"unevaluatedProperties":{"$ref":"#/$defs/a"}}}}`, "levels down"},
		{"draft-07: items past the array twice", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"n":{"$ref":"#/definitions/a"}},"definitions":{"a":{"type":"array","items":[{"type":"string"}],"additionalItems":{"allOf":[{"$ref":"#/definitions/a"},{"$ref":"#/definitions/a"}]}}}}`, "levels down"},
		{"draft-07: an items array entry and contains", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"n":{"$ref":"#/definitions/a"}},"definitions":{"a":{"type":"array","items":[{"$ref":"#/definitions/a"}],"contains":{"$ref":"#/definitions/a"}}}}`, "levels down"},
		{"a member named nowhere meeting additionalProperties twice", `{"type":"object","properties":{"n":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"object","additionalProperties":{"anyOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/a"}]}}}}`, "levels down"},
		{"member names meeting 30 × 41 subschemas", `{"type":"object","properties":{"n":{"$ref":"#/$defs/a"}},"$defs":{"a":{"allOf":[` + strings.TrimSuffix(strings.Repeat(`{"$ref":"#/$defs/b"},`, 30), ",") + `]},"b":{"propertyNames":{"$ref":"#/$defs/c"}},"c":{"anyOf":[` + strings.TrimSuffix(strings.Repeat(`{"$ref":"#/$defs/d"},`, 40), ",") + `]},"d":{"type":"string"}}}`, "2 levels down"},
		{"an item meeting one list's prefixItems entry and another's items", `{"type":"object","properties":{"n":{"allOf":[{"prefixItems":[{"$ref":"#/$defs/big"}]},{"items":{"$ref":"#/$defs/big"}}]}},"$defs":{"big":{"anyOf":[` + strings.TrimSuffix(strings.Repeat(`{"type":"string"},`, 600), ",") + `]}}}`, "2 levels down"},
		{"three thousand properties, each naming the root", `{"type":"object","properties":{"p":{"$ref":"#"}` + manyProperties(3000) + `}}`, ""},
		{"an item meeting the list through items and through contains alone", `{"type":"object","properties":{"n":{"$ref":"#/$defs/a"}},"$defs":{"a":{"allOf":[{"items":{"$ref":"#/$defs/a"}},{"contains":{"$ref":"#/$defs/a"}}]}}}`, "levels down"},
		{"one more subschema at each level", `{"type":"object","properties":{"n":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"array","items":{"allOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/b"}]}},"b":{"type":"array","items":{"$ref":"#/$defs/b"}}}}`, "levels down"},
		{"two $defs in a loop", `{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}}`, "loop"},
		{"a $def naming itself", `{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"$ref":"#/$defs/a"}}}`, "loop"},
		{"the root naming itself", `{"type":"object","$ref":"#"}`, "loop"},
		{"through allOf", `{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"allOf":[{"$ref":"#/$defs/a"}]}}}`, "loop"},
		{"through anyOf", `{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"anyOf":[{"type":"string"},{"$ref":"#/$defs/a"}]}}}`, "loop"},
		{"through oneOf", `{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"oneOf":[{"$ref":"#/$defs/a"}]}}}`, "loop"},
		{"through not", `{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"not":{"$ref":"#/$defs/a"}}}}`, "loop"},
		{"through if", `{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"if":{"$ref":"#/$defs/a"}}}}`, "loop"},
		{"through else", `{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"if":{"type":"string"},"else":{"$ref":"#/$defs/a"}}}}`, "loop"},
		{"through dependentSchemas", `{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"dependentSchemas":{"y":{"$ref":"#/$defs/a"}}}}}`, "loop"},
		{"draft-07 dependencies", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","definitions":{"a":{"dependencies":{"y":{"$ref":"#/definitions/a"}}}},"properties":{"x":{"$ref":"#/definitions/a"}}}`, "loop"},
		{"a pointer to a loop", `{"type":"object","properties":{"x":{"$ref":"#/properties/x"}}}`, "loop"},
		{"an $anchor", `{"type":"object","properties":{"x":{"$ref":"#s"}},"$defs":{"s":{"$anchor":"s","type":"string"}}}`, "not supported"},
		{"a $dynamicRef", `{"type":"object","properties":{"x":{"$dynamicRef":"#/$defs/s"}},"$defs":{"s":{"type":"string"}}}`, "not supported"},
		{"an anchor reference alone", `{"type":"object","properties":{"x":{"$ref":"#s"}},"$defs":{"s":{"$anchor":"s","type":"string"}}}`, "not supported"},
		{"an absolute reference", `{"$id":"https://example.com/s","type":"object","properties":{"x":{"$ref":"https://example.com/s#/$defs/s"}},"$defs":{"s":{"type":"string"}}}`, "not starting with # is not supported"},
		{"an $id below the root", `{"type":"object","properties":{"x":{"$id":"https://example.com/x","type":"string"}}}`, "not supported"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal([]byte(c.schema), &m); err != nil {
				t.Fatal(err)
			}
			var s *jsonschema.Schema
			if err := json.Unmarshal([]byte(c.schema), &s); err != nil {
				t.Fatal(err)
			}
			resolved, err := s.Resolve(nil)
			if err != nil {
				t.Fatalf("jsonschema-go refused it first: %v", err)
			}
			err = schemabound.CheckWire(m)
			switch {
			case c.refuse == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.refuse != "" && (err == nil || !strings.Contains(err.Error(), c.refuse)):
				t.Fatalf("err = %v, want one saying %q", err, c.refuse)
			case c.refuse == "":
				// The validator finishes (a value of the wrong type everywhere).
				_ = resolved.Validate(map[string]any{"a": 1.0, "b": 1.0, "x": 1.0, "n": map[string]any{"kids": []any{map[string]any{}}}, "child": map[string]any{"child": 1.0}})
				// And against values nested 40 deep, which a schema doubling
				// its work at each level would take years over.
				for _, v := range deep(40) {
					_ = resolved.Validate(map[string]any{"n": v, "child": v})
				}
			}
		})
	}
}

// TestCheckBoundsItsOwnWork: a 3 MB schema of 100,000 properties, each
// naming one anyOf of 990 object branches, is refused as beyond the
// walk's budget, and quickly: counted only per multiset, the walk took
// 67 s over it (each member's multiset a new one, each reaching the 990
// branches) before accepting it.
func TestCheckBoundsItsOwnWork(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{"p":{"$ref":"#/$defs/b"}`)
	for i := range 100000 {
		fmt.Fprintf(&b, `,"p%d":{"$ref":"#/$defs/b"}`, i)
	}
	b.WriteString(`},"$defs":{"b":{"anyOf":[{}`)
	for i := range 990 {
		fmt.Fprintf(&b, `,{"properties":{"q%d":{"type":"string"}}}`, i)
	}
	b.WriteString(`]}}}`)
	var s *jsonschema.Schema
	if err := json.Unmarshal([]byte(b.String()), &s); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := schemabound.Check(s)
	if err == nil || !strings.Contains(err.Error(), "could not be bounded in the work allowed") {
		t.Fatalf("Check: %v, want a refusal for the walk's own work", err)
	}
	d := time.Since(start)
	t.Logf("refused in %v", d)
	if d > 30*time.Second {
		t.Fatalf("Check took %v", d)
	}
}

// TestCheckSharedSubschemas: a schema built in Go may hold one subschema
// in two places; an item meeting it as items and as contains meets it
// twice, and the list's schema beneath it twice as often at each level.
func TestCheckSharedSubschemas(t *testing.T) {
	list := &jsonschema.Schema{Type: "array"}
	item := &jsonschema.Schema{Ref: "#"}
	list.Items, list.Contains = item, item
	if err := schemabound.Check(list); err == nil || !strings.Contains(err.Error(), "levels down") {
		t.Fatalf("items and contains one subschema naming the list: %v, want a refusal", err)
	}
	list.Contains = nil
	if err := schemabound.Check(list); err != nil {
		t.Fatalf("control, items alone: %v", err)
	}
}

// TestEveryKeywordClassified: each field of jsonschema-go's Schema that
// holds subschemas is one Check counts — applied to the same value, or to
// a member, a member's name or an item — or one the validator never
// applies. A jsonschema-go upgrade adding a keyword fails here until
// Check counts it.
func TestEveryKeywordClassified(t *testing.T) {
	known := map[string]string{
		"AllOf": "same value", "AnyOf": "same value", "OneOf": "same value", "Not": "same value",
		"If": "same value", "Then": "same value", "Else": "same value",
		"DependentSchemas": "same value", "DependencySchemas": "same value",
		"Properties": "member", "PatternProperties": "member", "AdditionalProperties": "member",
		"UnevaluatedProperties": "member", "PropertyNames": "member's name",
		"PrefixItems": "item", "Items": "item", "ItemsArray": "item", "AdditionalItems": "item",
		"Contains": "item", "UnevaluatedItems": "item",
		"Defs": "never applied", "Definitions": "never applied", "ContentSchema": "never applied",
	}
	schema := reflect.TypeFor[*jsonschema.Schema]()
	st := schema.Elem()
	for i := range st.NumField() {
		f := st.Field(i)
		k := f.Type.Kind()
		if f.Type == schema || (k == reflect.Slice || k == reflect.Map) && f.Type.Elem() == schema {
			if _, ok := known[f.Name]; !ok {
				t.Errorf("jsonschema.Schema.%s holds subschemas Check does not count", f.Name)
			}
			delete(known, f.Name)
		}
	}
	for name := range known {
		t.Errorf("jsonschema.Schema.%s: no such field holding subschemas", name)
	}
}
