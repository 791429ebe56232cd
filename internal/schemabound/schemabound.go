// Package schemabound refuses JSON Schemas that
// github.com/google/jsonschema-go, the validator go-sdk uses, could not
// finish validating against: an upstream's tool input schema, or the
// schema of a question an upstream asks, is attacker-controlled.
//
// What it guarantees: a schema [Check] accepts applies no subschema to
// one value in a loop (jsonschema-go's validator would recurse until the
// Go runtime ends the whole process for a stack overflow, which no
// recover stops) and at most [MaxWork] subschemas to any one value at any
// depth, so that validating a value of n nodes (each array item, object
// member and member name one) applies at most MaxWork × n subschemas.
// Without the depth bound a schema applying each level's subschema twice
// to every item (items: allOf of two references to itself) took the
// validator 2^depth steps: 4.8 s for 22 nested arrays, years for a
// 100-byte argument of 40. It follows the references jsonschema-go
// resolves within one document ("#" and "#/JSON pointer") and refuses the
// ones it does not follow.
//
// What it does not: bound the cost of each subschema's own keywords (a
// pattern is Go's regexp, linear in the string; uniqueItems hashes each
// item once), nor the size of the value, which is its transport's to
// bound. The bound is an upper one: it counts every subschema one member
// or item could meet (each pattern as matching, then and else both), so
// it may refuse a schema whose real work is smaller.
package schemabound

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// MaxWork bounds the subschemas that validating a value against the
// root may apply to that value or to any one value within it ($ref,
// allOf, anyOf, oneOf, not, if/then/else and dependent schemas on the
// same value; properties, items and the like on a member or an item),
// each counted as often as it is reached.
const MaxWork = 1000

// maxSteps bounds the work of Check's own walk down the levels of a value
// (subschemas counted over the multisets it visits, and the closures each
// multiset reaches): a schema it cannot bound within it is refused.
// Attack stopped: a schema whose levels visit ever new multisets, or many
// members each meeting one wide subschema, stalling the check itself.
const maxSteps = 1 << 20

// Check refuses a schema that jsonschema-go's
// validator could not finish with: one whose subschemas apply one another
// to the same value in a loop ($defs a → $ref b → $ref a: the validator
// recurses until the Go runtime ends the whole process for a stack
// overflow, which no recover stops), or apply more than MaxWork
// subschemas to one value (anyOf of anyOf …, each reached twice, doubles
// at each level), at the root or at any depth below it (an item's schema
// applying the list's schema to it twice doubles at each level of
// nesting). Attack stopped: an upstream whose schema stops or stalls the
// proxy the first time a value is validated against it.
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
	return levels(root, targets, work)
}

// levels refuses a schema that applies more than MaxWork subschemas to
// one value at some depth. It walks the multisets of subschemas a value
// can meet at each depth — the root at the top; below, for each kind of
// member or item a value can hold, the subschemas that member or item
// meets from each subschema its parent applied — going below each
// multiset of subschemas with members or items once, as a tree's node
// beneath its own property meets the same one again.
func levels(root *jsonschema.Schema, targets map[*jsonschema.Schema]*jsonschema.Schema, work map[*jsonschema.Schema]int) error {
	// deeper[s] reports whether s applies a subschema to a member, a
	// member's name or an item.
	deeper := map[*jsonschema.Schema]bool{}
	reachesDeeper := func(s *jsonschema.Schema) bool {
		d, ok := deeper[s]
		if !ok {
			d = slices.ContainsFunc(children(map[*jsonschema.Schema]int{s: 1}), func(m map[*jsonschema.Schema]int) bool { return len(m) > 0 })
			deeper[s] = d
		}
		return d
	}
	// closure(s) counts the subschemas validating a value against s
	// applies to that value, as work[s] does, but keeps only those that
	// reach deeper: the rest cannot change what lies below.
	closures := map[*jsonschema.Schema]map[*jsonschema.Schema]int{}
	var closure func(s *jsonschema.Schema) map[*jsonschema.Schema]int
	closure = func(s *jsonschema.Schema) map[*jsonschema.Schema]int {
		if c, ok := closures[s]; ok {
			return c
		}
		c := map[*jsonschema.Schema]int{}
		if reachesDeeper(s) {
			c[s] = 1
		}
		for _, d := range sameValue(s, targets[s]) {
			for t, n := range closure(d) {
				c[t] += n
			}
		}
		closures[s] = c
		return c
	}
	type level struct {
		meets map[*jsonschema.Schema]int
		depth int
	}
	index := map[*jsonschema.Schema]int{}
	seen := map[string]bool{}
	queue := []level{{map[*jsonschema.Schema]int{root: 1}, 0}}
	steps := 0
	for len(queue) > 0 {
		l := queue[0]
		queue = queue[1:]
		applied := map[*jsonschema.Schema]int{}
		total := 0
		for s, n := range l.meets {
			if total += n * work[s]; total > MaxWork {
				return fmt.Errorf("it applies more than %d subschemas to one value %d levels down", MaxWork, l.depth)
			}
			c := closure(s)
			// Stops a schema of many members each meeting one wide
			// subschema from making this walk, not the validator, slow.
			if steps += 1 + len(c); steps > maxSteps {
				return errUnbounded
			}
			for t, k := range c {
				applied[t] += n * k
			}
		}
		// What lies below depends on these alone: the members of a
		// thousand properties each naming the root are one walk, not a
		// thousand.
		key := fingerprint(applied, index)
		if seen[key] {
			continue
		}
		seen[key] = true
		for _, child := range children(applied) {
			if steps += len(applied) + len(child); steps > maxSteps {
				return errUnbounded
			}
			if len(child) > 0 {
				queue = append(queue, level{child, l.depth + 1})
			}
		}
	}
	return nil
}

// errUnbounded is Check's refusal of a schema whose levels its walk could
// not bound within maxSteps.
var errUnbounded = errors.New("its levels could not be bounded in the work allowed")

// fingerprint names the multiset applied, each schema by the order index
// first saw it in.
func fingerprint(applied map[*jsonschema.Schema]int, index map[*jsonschema.Schema]int) string {
	pairs := make([][2]int, 0, len(applied))
	for s, n := range applied {
		i, ok := index[s]
		if !ok {
			i = len(index)
			index[s] = i
		}
		pairs = append(pairs, [2]int{i, n})
	}
	slices.SortFunc(pairs, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
	b := make([]byte, 0, 8*len(pairs))
	for _, p := range pairs {
		b = strconv.AppendInt(b, int64(p[0]), 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(p[1]), 10)
		b = append(b, ',')
	}
	return string(b)
}

// children returns, for each kind of member or item of a value validated
// against the subschemas applied (each as often as applied), the
// multiset of subschemas jsonschema-go applies to it: a member named in
// some properties meets that entry where there is one and
// additionalProperties where not, with every pattern's (each counted as
// matching) and unevaluatedProperties'; a member named nowhere
// additionalProperties' instead; a member's name propertyNames'; an item
// its prefixItems (or draft-07 items array) entry, or past them items and
// additionalItems, with contains and unevaluatedItems.
func children(applied map[*jsonschema.Schema]int) []map[*jsonschema.Schema]int {
	names := map[string]bool{}
	prefix := 0
	for s := range applied {
		for k := range s.Properties {
			names[k] = true
		}
		prefix = max(prefix, len(s.PrefixItems), len(s.ItemsArray))
	}
	kinds := make([]map[*jsonschema.Schema]int, 0, len(names)+prefix+3)
	meet := func(f func(s *jsonschema.Schema, add func(...*jsonschema.Schema))) {
		m := map[*jsonschema.Schema]int{}
		for s, n := range applied {
			f(s, func(ss ...*jsonschema.Schema) {
				for _, c := range ss {
					if c != nil {
						m[c] += n
					}
				}
			})
		}
		kinds = append(kinds, m)
	}
	member := func(name string, named bool) {
		meet(func(s *jsonschema.Schema, add func(...*jsonschema.Schema)) {
			if c, ok := s.Properties[name]; ok && named {
				add(c)
			} else {
				add(s.AdditionalProperties)
			}
			for _, c := range s.PatternProperties {
				add(c)
			}
			add(s.UnevaluatedProperties)
		})
	}
	for name := range names {
		member(name, true)
	}
	member("", false)
	meet(func(s *jsonschema.Schema, add func(...*jsonschema.Schema)) { add(s.PropertyNames) })
	for i := range prefix {
		meet(func(s *jsonschema.Schema, add func(...*jsonschema.Schema)) {
			if i < len(s.PrefixItems) || i < len(s.ItemsArray) {
				add(nth(s.PrefixItems, i), nth(s.ItemsArray, i))
			} else {
				add(s.Items, s.AdditionalItems)
			}
			add(s.Contains, s.UnevaluatedItems)
		})
	}
	meet(func(s *jsonschema.Schema, add func(...*jsonschema.Schema)) {
		add(s.Items, s.AdditionalItems, s.Contains, s.UnevaluatedItems)
	})
	return kinds
}

// nth returns ss[i], or nil past its end.
func nth(ss []*jsonschema.Schema, i int) *jsonschema.Schema {
	if i < len(ss) {
		return ss[i]
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
