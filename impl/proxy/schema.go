package proxy

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
	"github.com/mcp-confirm/mcp-confirm/internal/schemabound"
)

// Why github.com/google/jsonschema-go: it is the validator go-sdk itself
// uses for the tools it serves (mcp.AddTool), so the proxy checks with the
// same reading of JSON Schema (draft 2020-12 and draft-07) as the SDK it
// is built on, and adds no dependency. It resolves no remote $ref: a schema
// that names one cannot make the proxy fetch anything.

// checkSchema validates the arguments split (splitArguments) against def's input
// schema before anything is asked. It returns a [confirm.Refusal] saying
// why when they do not match — for a value of the wrong JSON type, its
// place and the types the schema wants — or when the schema cannot be used
// (the call is refused: a schema the proxy cannot check is no reason to
// ask a person about a call the upstream may read otherwise).
func (p *Proxy) checkSchema(fp string, def *mcp.Tool, split []argument) error {
	name := showValue(def.Name, nameWidth)
	c := p.schemas.compile(fp, def)
	if c.refusal != nil {
		return c.refusal
	}
	schema, resolved := c.schema, c.resolved
	// The arguments as encoding/json decodes them into any (numbers as
	// float64, as the validator expects them: exact here, since the
	// question refuses any number a double cannot hold), each string value
	// decoded once more from the split rather than the whole document
	// again.
	m := make(map[string]any, len(split))
	for _, a := range split {
		var v any
		var err error
		if a.raw[0] == '"' {
			v, err = decodeString(a.raw)
		} else {
			err = json.Unmarshal(a.raw, &v)
		}
		if err != nil {
			return confirm.Refuse("The call's arguments are not valid JSON, so it was refused. Nothing was asked or sent.")
		}
		m[a.key] = v
	}
	var args any = m
	verr := resolved.Validate(args)
	if verr == nil {
		return nil
	}
	// Stops a call whose value the upstream would read as another type
	// (a string "false" where a boolean is wanted) from being approved.
	if m, ok := typeMismatch(schema, schema, args, nil, 0); ok {
		return confirm.Refuse("The call was refused before asking: %s is %s, but the input schema of %s wants %s. Nothing was asked or sent.",
			m.where(), article(m.got), name, wanted(m.want))
	}
	return confirm.Refuse("The call was refused before asking: its arguments do not match the input schema of %s (%s). Nothing was asked or sent.",
		name, prompt.Value(verr.Error(), prompt.Options{MaxWidth: 200}))
}

// A compiledSchema is a tool's input schema ready to validate with, or the
// refusal that it cannot be used.
type compiledSchema struct {
	schema   *jsonschema.Schema
	resolved *jsonschema.Resolved
	refusal  error
}

// maxSchemas bounds the compiled schemas kept: an upstream that changes its
// tools all the time must not grow the proxy's memory without bound.
const maxSchemas = 256

// schemaCache keeps each tool definition's compiled input schema, by the
// definition's fingerprint (which covers the input schema), so that a
// confirmed call does not decode and resolve it again. (A Resolved only
// reads itself to validate: go-sdk shares one among its tool calls too.)
type schemaCache struct {
	mu sync.Mutex
	m  map[string]compiledSchema
}

// compile returns def's compiled input schema; fp is Fingerprint(def).
func (sc *schemaCache) compile(fp string, def *mcp.Tool) compiledSchema {
	sc.mu.Lock()
	c, ok := sc.m[fp]
	sc.mu.Unlock()
	if ok && fp != "" {
		return c
	}
	c = compileSchema(def)
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.m == nil || len(sc.m) >= maxSchemas {
		sc.m = map[string]compiledSchema{}
	}
	sc.m[fp] = c
	return c
}

// compileSchema reads and resolves def's input schema.
func compileSchema(def *mcp.Tool) compiledSchema {
	name := showValue(def.Name, nameWidth)
	schema, err := inputSchema(def)
	if err != nil {
		return compiledSchema{refusal: confirm.Refuse("The upstream's input schema for %s cannot be used to check the arguments (%s), so the call was refused. Nothing was asked or sent.",
			name, prompt.Value(err.Error(), prompt.Options{MaxWidth: 160}))}
	}
	switch schema.Schema {
	case "", "https://json-schema.org/draft/2020-12/schema",
		"http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft-07/schema#":
	default:
		return compiledSchema{refusal: confirm.Refuse("The upstream's input schema for %s is written in a JSON Schema draft the proxy cannot check (%s), so the call was refused. Nothing was asked or sent.",
			name, prompt.Value(schema.Schema, prompt.Options{MaxWidth: 80}))}
	}
	resolved, err := schema.Resolve(nil)
	if err == nil {
		err = schemabound.Check(schema)
	}
	if err != nil {
		return compiledSchema{refusal: confirm.Refuse("The upstream's input schema for %s cannot be used to check the arguments (%s), so the call was refused. Nothing was asked or sent.",
			name, prompt.Value(err.Error(), prompt.Options{MaxWidth: 160}))}
	}
	return compiledSchema{schema: schema, resolved: resolved}
}

// inputSchema reads def's input schema, which go-sdk's client holds as
// decoded JSON.
func inputSchema(def *mcp.Tool) (*jsonschema.Schema, error) {
	if def.InputSchema == nil {
		return nil, fmt.Errorf("the tool has none")
	}
	b, err := json.Marshal(def.InputSchema)
	if err != nil {
		return nil, err
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// A mismatch is a value whose JSON type its schema does not allow.
type mismatch struct {
	path []any // keys (string) and indices (int) from the arguments down
	got  string
	want []string
}

// where names the mismatched value for a person: the argument, or the
// value inside it, keys escaped.
func (m mismatch) where() string {
	if len(m.path) == 0 {
		return "the arguments"
	}
	var b strings.Builder
	for i, step := range m.path {
		switch s := step.(type) {
		case int:
			b.WriteString("[" + strconv.Itoa(s) + "]")
		case string:
			if i > 0 {
				b.WriteString(".")
			}
			b.WriteString(showValue(s, keyWidth))
		}
	}
	if len(m.path) == 1 {
		return "the argument " + b.String()
	}
	return "the value at " + b.String()
}

// maxRefs bounds the $refs typeMismatch follows in a row: a schema whose
// references loop cannot hold it.
const maxRefs = 32

// typeMismatch finds the first value of v (decoded JSON), in key order,
// whose JSON type the schema s allows none of, following properties,
// additionalProperties, prefixItems, items and local $refs ("#" and
// "#/JSON pointer", as schemabound.Target reads them) from root. It explains a failed validation; it does
// not decide one, and finds nothing for other failures (a missing
// required property, an enum, a pattern, anyOf).
func typeMismatch(root, s *jsonschema.Schema, v any, path []any, refs int) (mismatch, bool) {
	for s != nil && s.Ref != "" {
		if refs++; refs > maxRefs {
			return mismatch{}, false
		}
		s, _ = schemabound.Target(root, s.Ref)
	}
	if s == nil {
		return mismatch{}, false
	}
	got := jsonType(v)
	want := s.Types
	if s.Type != "" {
		want = []string{s.Type}
	}
	if len(want) > 0 && !slices.Contains(want, got) && !(got == "integer" && slices.Contains(want, "number")) {
		return mismatch{path: slices.Clone(path), got: got, want: want}, true
	}
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			sub, ok := s.Properties[k]
			if !ok {
				sub = s.AdditionalProperties
			}
			if m, ok := typeMismatch(root, sub, v[k], append(path, k), refs); ok {
				return m, true
			}
		}
	case []any:
		for i, item := range v {
			var sub *jsonschema.Schema
			switch {
			case i < len(s.PrefixItems):
				sub = s.PrefixItems[i]
			case i < len(s.ItemsArray):
				sub = s.ItemsArray[i]
			case len(s.ItemsArray) > 0:
				sub = s.AdditionalItems
			default:
				sub = s.Items
			}
			if m, ok := typeMismatch(root, sub, item, append(path, i), refs); ok {
				return m, true
			}
		}
	}
	return mismatch{}, false
}

// jsonType is the JSON Schema type of decoded JSON, as the validator
// tells it: a whole number is an integer.
func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		if _, frac := math.Modf(v); frac == 0 {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "object"
}

// article puts "a" or "an" before a JSON type's name ("null" stands alone).
func article(t string) string {
	switch t {
	case "null":
		return "null"
	case "integer", "array", "object":
		return "an " + t
	}
	return "a " + t
}

// wanted says which types a schema wants, its names escaped: an upstream
// writes them.
func wanted(types []string) string {
	shown := make([]string, len(types))
	for i, t := range types {
		shown[i] = article(prompt.Quote(t))
	}
	if len(shown) == 1 {
		return shown[0]
	}
	return "one of " + strings.Join(shown, ", ")
}
