// Package schemabound refuses JSON Schemas that
// github.com/google/jsonschema-go, the validator go-sdk uses, could not
// finish validating against: an upstream's tool input schema, or the
// schema of a question an upstream asks, is attacker-controlled.
//
// What it guarantees: a schema [Check] accepts applies no subschema to
// one value in a loop (jsonschema-go's validator would recurse until the
// Go runtime ends the whole process for a stack overflow, which no
// recover stops) and at most [MaxWork] subschemas to one value. It
// follows the references jsonschema-go resolves within one document ("#"
// and "#/JSON pointer") and refuses the ones it does not follow.
//
// What it does not: bound the work of a schema that recurses as the value
// does (a tree's node beneath a property), which is as deep as the value
// is; nor the product of [MaxWork] over a value's levels, when each
// level's subschemas apply the next level's to the same child many times
// over. Values are bounded in size by their transports.
package schemabound

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// MaxWork bounds the subschemas that validating one value against
// one subschema may apply to that same value ($ref, allOf, anyOf, oneOf,
// not, if/then/else, dependent schemas), each counted as often as it is
// reached.
const MaxWork = 1000

// Check refuses a schema that jsonschema-go's
// validator could not finish with: one whose subschemas apply one another
// to the same value in a loop ($defs a → $ref b → $ref a: the validator
// recurses until the Go runtime ends the whole process for a stack
// overflow, which no recover stops), or apply more than MaxWork
// subschemas to one value (anyOf of anyOf …, each reached twice, doubles
// at each level). Attack stopped: an upstream whose schema stops or stalls
// the proxy the first time a value is validated against it.
//
// It follows the references jsonschema-go resolves within one document
// ("#" and "#/JSON pointer", as its dereferenceJSONPointer reads them) and
// refuses what it does not follow: a reference of another form, an
// $anchor, a $dynamicRef or a $dynamicAnchor, or an $id below the root
// (which changes what a reference beneath it names).
func Check(root *jsonschema.Schema) error {
	nodes := map[*jsonschema.Schema]bool{}
	var walk func(s *jsonschema.Schema)
	walk = func(s *jsonschema.Schema) {
		if s == nil || nodes[s] {
			return
		}
		nodes[s] = true
		for _, c := range subschemas(s) {
			walk(c)
		}
	}
	walk(root)
	targets := map[*jsonschema.Schema]*jsonschema.Schema{}
	for s := range nodes {
		switch {
		case s.ID != "" && s != root:
			return fmt.Errorf("an $id below the root (%s) is not supported", s.ID)
		case s.Anchor != "" || s.DynamicAnchor != "" || s.DynamicRef != "":
			return errors.New("$anchor, $dynamicAnchor and $dynamicRef are not supported")
		case s.Ref != "":
			t, err := Target(root, s.Ref)
			if err != nil {
				return fmt.Errorf("$ref %s: %w", s.Ref, err)
			}
			targets[s] = t
		}
	}
	// work[s] is how many subschemas validating a value against s applies
	// to that value, s included; inProgress marks the path being summed.
	const inProgress = -1
	work := map[*jsonschema.Schema]int{}
	var sum func(s *jsonschema.Schema) (int, error)
	sum = func(s *jsonschema.Schema) (int, error) {
		switch w, ok := work[s]; {
		case ok && w == inProgress:
			return 0, errors.New("its subschemas refer to one another in a loop that applies them to the same value forever")
		case ok:
			return w, nil
		}
		work[s] = inProgress
		total := 1
		for _, c := range sameValue(s, targets[s]) {
			w, err := sum(c)
			if err != nil {
				return 0, err
			}
			if total += w; total > MaxWork {
				return 0, fmt.Errorf("it applies more than %d subschemas to one value", MaxWork)
			}
		}
		work[s] = total
		return total, nil
	}
	for s := range nodes {
		if _, err := sum(s); err != nil {
			return err
		}
	}
	return nil
}

// sameValue returns the subschemas jsonschema-go's validator applies to
// the value it validates against s, ref being the schema s.Ref names.
func sameValue(s, ref *jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	add := func(ss ...*jsonschema.Schema) {
		for _, c := range ss {
			if c != nil {
				out = append(out, c)
			}
		}
	}
	add(ref, s.Not, s.If, s.Then, s.Else)
	add(s.AllOf...)
	add(s.AnyOf...)
	add(s.OneOf...)
	for _, c := range s.DependentSchemas {
		add(c)
	}
	for _, c := range s.DependencySchemas {
		add(c)
	}
	return out
}

var (
	schemaType    = reflect.TypeFor[jsonschema.Schema]()
	schemaPtrType = reflect.TypeFor[*jsonschema.Schema]()
)

// subschemas returns every schema s holds directly: each field of type
// *Schema, []*Schema or map[string]*Schema, found by reflection so that
// none is missed.
func subschemas(s *jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Type() == schemaPtrType:
			if !f.IsNil() {
				out = append(out, f.Interface().(*jsonschema.Schema))
			}
		case f.Kind() == reflect.Slice && f.Type().Elem() == schemaPtrType:
			out = append(out, f.Interface().([]*jsonschema.Schema)...)
		case f.Kind() == reflect.Map && f.Type().Elem() == schemaPtrType:
			for _, c := range f.Interface().(map[string]*jsonschema.Schema) {
				out = append(out, c)
			}
		}
	}
	return out
}

// Target returns the schema the reference ref names within root, as
// [Check] follows it: "#" root itself, "#/…" the JSON pointer from root,
// read as jsonschema-go reads it (fields by their JSON names; "items" the
// schema or the array; "dependencies" the schemas).
func Target(root *jsonschema.Schema, ref string) (*jsonschema.Schema, error) {
	u, err := url.Parse(ref)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(ref, "#") {
		return nil, errors.New("a reference not starting with # is not supported")
	}
	ptr := u.Fragment
	if ptr == "" {
		return root, nil
	}
	if ptr[0] != '/' {
		return nil, errors.New("a reference by anchor (#name) is not supported")
	}
	v := reflect.ValueOf(root)
	for _, seg := range strings.Split(ptr[1:], "/") {
		seg = strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return nil, errors.New("it names nothing")
			}
			v = v.Elem()
		}
		switch v.Kind() {
		case reflect.Struct:
			v = schemaField(v, seg)
		case reflect.Slice:
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 || n >= v.Len() || len(seg) > 1 && seg[0] == '0' {
				return nil, errors.New("it names nothing")
			}
			v = v.Index(n)
		case reflect.Map:
			v = v.MapIndex(reflect.ValueOf(seg))
		default:
			return nil, errors.New("it names nothing")
		}
		if !v.IsValid() {
			return nil, errors.New("it names nothing")
		}
	}
	s, ok := v.Interface().(*jsonschema.Schema)
	if !ok || s == nil {
		return nil, errors.New("it names no schema")
	}
	return s, nil
}

// schemaField returns the field of the Schema v whose JSON name is name,
// or the zero Value.
func schemaField(v reflect.Value, name string) reflect.Value {
	switch name {
	case "items":
		if f := v.FieldByName("Items"); !f.IsNil() {
			return f
		}
		return v.FieldByName("ItemsArray")
	case "dependencies":
		return v.FieldByName("DependencySchemas")
	}
	for i := range schemaType.NumField() {
		tag, _, _ := strings.Cut(schemaType.Field(i).Tag.Get("json"), ",")
		if tag == name {
			return v.Field(i)
		}
	}
	return reflect.Value{}
}

// CheckWire checks a schema as go-sdk holds one read from the wire
// (decoded JSON, or a *jsonschema.Schema); nil has nothing to check.
func CheckWire(v any) error {
	if v == nil {
		return nil
	}
	s, ok := v.(*jsonschema.Schema)
	if !ok {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	if s == nil {
		return nil
	}
	return Check(s)
}
