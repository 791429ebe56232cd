package schemabound_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

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
			}
		})
	}
}
