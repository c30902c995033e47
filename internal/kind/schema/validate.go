package schema

import (
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/stratahq/strata/internal/fault"
)

// Violation is one way a value fails the schema, for the data-aware registration checks.
type Violation struct {
	// Instance is the JSON pointer of the offending value with a "/spec" prefix, e.g.
	// "/spec/ports/1/port"; for required: the pointer of the MISSING property.
	Instance string
	// Schema is the JSON pointer of the schema node that owns the property, e.g.
	// "/properties/ports/items/properties/port" (combinator steps removed: a constraint inside
	// allOf belongs to the node declared outside it); for required and for unknown properties:
	// the property's node ("/properties/x") even if the schema does not declare it.
	Schema string
	// Keyword is the failing keyword: "type", "maximum", "required", "enum", "pattern",
	// "additionalProperties" (unknown key of a closed object), "x-removed" (a tombstoned
	// property holds a value), …
	Keyword string
	Message string
}

// Violations validates spec (already Present-ed by this schema) fully, without ratcheting, and
// returns every leaf violation: one per missing required property and one per unknown key of a
// closed object. The result is sorted by instance pointer.
func (s *Schema) Violations(spec any) []Violation {
	obj, ok := spec.(map[string]any)
	if !ok {
		return []Violation{{Instance: "/spec", Schema: "", Keyword: "type", Message: "type: expected object, got " + jsonType(spec)}}
	}
	if bad := badNumbers(obj, "/spec", nil); len(bad) > 0 {
		out := make([]Violation, 0, len(bad))
		for _, p := range bad {
			out = append(out, Violation{Instance: p, Keyword: "type", Message: numberRangeMessage})
		}
		return out
	}
	var out []Violation
	for _, f := range s.failures(obj) {
		for _, fi := range f.findings {
			// Unknown keys are reported by unknownKeys for every closed object, declared
			// additionalProperties: false or not, so the validator's report would duplicate them.
			if fi.Keyword != "additionalProperties" {
				out = append(out, fi.Violation)
			}
		}
	}
	out = unknownKeys(s.root, obj, "/spec", make([]string, 0, 16), out)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Instance != out[j].Instance {
			return out[i].Instance < out[j].Instance
		}
		return out[i].Keyword < out[j].Keyword
	})
	return out
}

const numberRangeMessage = "number out of range: exponents beyond ±1000 are not supported"

// unknownKeys reports the keys of closed objects that the schema does not define (keyword
// additionalProperties) and tombstoned properties that still hold a value (keyword x-removed).
// path holds the reference tokens from base (the pointer of the value checked) down to v; a pointer is built only for a key
// reported, so a long key above many members (a map of maps under additionalProperties) is
// not copied once per member on every write.
func unknownKeys(n *node, v any, base string, path []string, out []Violation) []Violation {
	switch val := v.(type) {
	case map[string]any:
		if n == nil || !n.allows("object") {
			return out
		}
		for _, k := range sortedKeys(val) {
			sub := append(path, k)
			if c := n.prop(k); c != nil {
				if c.removed {
					out = append(out, Violation{Instance: joinPointer(base, sub...), Schema: c.ptr, Keyword: "x-removed", Message: fmt.Sprintf("x-removed: field %q was removed from the schema but holds a value", fault.Truncate(k, 64))})
					continue
				}
				out = unknownKeys(c, val[k], base, sub, out)
				continue
			}
			if n.addl != nil {
				out = unknownKeys(n.addl, val[k], base, sub, out)
				continue
			}
			if n.addlOpen || n.preserve {
				continue
			}
			out = append(out, Violation{Instance: joinPointer(base, sub...), Schema: joinPointer(n.ptr, "properties", k), Keyword: "additionalProperties", Message: fmt.Sprintf("additionalProperties: field %q is not defined by the schema", fault.Truncate(k, 64))})
		}
	case []any:
		if n == nil || n.items == nil || !n.allows("array") {
			return out
		}
		for i, e := range val {
			out = unknownKeys(n.items, e, base, append(path, strconv.Itoa(i)), out)
		}
	}
	return out
}

// failure is one failing keyword: where its owner node is in the instance (the value for value
// keywords, the container for container keywords such as required or maxItems), whether it is
// under a combinator (then ratcheted by the node that declares it), and the violations it stands for.
type failure struct {
	at           []string
	inCombinator bool
	// duplicateKeys marks the duplicate keys of a list map: ratcheted, as Kubernetes does,
	// when the stored list already had every key that is duplicated now.
	duplicateKeys bool
	findings      []finding
}

type finding struct {
	Violation
	constraint string // "maximum 10", for the ratcheting warning
}

// failures validates v fully with the compiled schema.
func (s *Schema) failures(v any) []failure {
	out := mapListDuplicates(s.root, v, nil, nil)
	err := s.compiled.Validate(v)
	if err == nil {
		return out
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return append(out, failure{findings: []finding{{Violation: Violation{Instance: "/spec", Keyword: "type", Message: fault.Truncate(err.Error(), 200)}}}})
	}
	for _, l := range leaves(ve, nil) {
		schemaPtr, in := ownerOf(l)
		at := l.InstanceLocation
		if d := combinatorDepth(l); d >= 0 && d < len(at) {
			// A combinator's constraint belongs to the node that declares the combinator, as in
			// Kubernetes' ratcheting: it is ratcheted only while that whole node is unchanged.
			at = at[:d]
		}
		out = append(out, failure{at: at, inCombinator: in, findings: findingsOf(l, "/spec", schemaPtr)})
	}
	return out
}

// mapListDuplicates reports items of x-list-map-keys lists whose keys repeat an earlier item's:
// the keys identify an item when old and new lists are correlated, so they must be unique. The
// list is the owner (a container constraint, like uniqueItems).
func mapListDuplicates(n *node, v any, path []string, out []failure) []failure {
	if n == nil || !n.mapListsBelow {
		return out
	}
	switch val := v.(type) {
	case map[string]any:
		if n == nil || !n.allows("object") {
			return out
		}
		for _, k := range sortedKeys(val) {
			if c := n.child(k); c != nil {
				out = mapListDuplicates(c, val[k], append(path, k), out)
			}
		}
	case []any:
		if n == nil || n.items == nil || !n.allows("array") {
			return out
		}
		if len(n.listMapKeys) > 0 {
			var findings []finding
			for j := 1; j < len(val); j++ {
				if first, ok := firstWithKeys(val[:j], val[j], n.listMapKeys); ok {
					findings = append(findings, finding{Violation: Violation{
						Instance: joinPointer("/spec", append(path, strconv.Itoa(j))...), Schema: n.ptr, Keyword: "x-list-map-keys",
						Message: fmt.Sprintf("x-list-map-keys: item %d has the same %s as item %d", j, strings.Join(n.listMapKeys, ", "), first),
					}, constraint: "x-list-map-keys (unique keys)"})
				}
			}
			if len(findings) > 0 {
				out = append(out, failure{at: slices.Clone(path), duplicateKeys: true, findings: findings})
			}
		}
		for i, e := range val {
			out = mapListDuplicates(n.items, e, append(path, strconv.Itoa(i)), out)
		}
	}
	return out
}

// firstWithKeys returns the index of the first item of list with the same list map keys as item.
func firstWithKeys(list []any, item any, keys []string) (int, bool) {
	im, ok := item.(map[string]any)
	if !ok {
		return 0, false
	}
	for i, cand := range list {
		cm, ok := cand.(map[string]any)
		if !ok {
			continue
		}
		match := true
		for _, k := range keys {
			a, aok := im[k]
			b, bok := cm[k]
			if !aok || !bok || !equalJSON(a, b) {
				match = false
				break
			}
		}
		if match {
			return i, true
		}
	}
	return 0, false
}

// leaves collects the failing keywords of a validation error tree. Groups and allOf are expanded
// (each of their causes is a real violation); anyOf, oneOf and not are leaves themselves, because
// their causes are alternatives, not violations.
func leaves(ve *jsonschema.ValidationError, out []*jsonschema.ValidationError) []*jsonschema.ValidationError {
	switch ve.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf, *kind.Not:
		return append(out, ve)
	}
	if len(ve.Causes) == 0 {
		return append(out, ve)
	}
	for _, c := range ve.Causes {
		out = leaves(c, out)
	}
	return out
}

// ownerOf returns the JSON pointer of the schema node owning a leaf's keyword, with combinator
// steps removed, and whether the keyword sits under (or is) a combinator.
func ownerOf(l *jsonschema.ValidationError) (string, bool) {
	frag := l.SchemaURL
	if i := strings.IndexByte(frag, '#'); i >= 0 {
		frag = frag[i+1:]
	} else {
		frag = ""
	}
	var toks []string
	for _, t := range strings.Split(frag, "/")[1:] {
		if u, err := url.PathUnescape(t); err == nil {
			t = u
		}
		toks = append(toks, t)
	}
	var kept []string
	in := false
	for i := 0; i < len(toks); i++ {
		switch toks[i] {
		case "properties":
			kept = append(kept, toks[i])
			if i+1 < len(toks) {
				i++
				kept = append(kept, toks[i])
			}
		case "allOf", "anyOf", "oneOf":
			in = true
			i++
		case "not":
			in = true
		default:
			kept = append(kept, toks[i])
		}
	}
	switch l.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf, *kind.Not:
		in = true
	}
	owner := ""
	if len(kept) > 0 {
		owner = "/" + strings.Join(kept, "/")
	}
	return owner, in
}

// combinatorDepth is how many instance steps lead from the root to the node that declares the
// first allOf/anyOf/oneOf/not on l's schema path, or -1 when there is none: each properties/X,
// items, additionalProperties and patternProperties/X step consumes one instance token.
func combinatorDepth(l *jsonschema.ValidationError) int {
	frag := l.SchemaURL
	i := strings.IndexByte(frag, '#')
	if i < 0 {
		return -1
	}
	toks := strings.Split(frag[i+1:], "/")[1:]
	depth := 0
	for j := 0; j < len(toks); j++ {
		switch toks[j] {
		case "allOf", "anyOf", "oneOf", "not":
			return depth
		case "properties", "patternProperties":
			depth++
			j++
		case "items", "additionalProperties":
			depth++
		case "prefixItems":
			depth++
			j++
		}
	}
	return -1
}

// violationsOf converts one leaf error into violations with instance pointers under prefix.
func violationsOf(l *jsonschema.ValidationError, prefix string) []Violation {
	owner, _ := ownerOf(l)
	fs := findingsOf(l, prefix, owner)
	out := make([]Violation, len(fs))
	for i, f := range fs {
		out[i] = f.Violation
	}
	return out
}

func findingsOf(l *jsonschema.ValidationError, prefix, owner string) []finding {
	inst := joinPointer(prefix, l.InstanceLocation...)
	keyword := ""
	if kp := l.ErrorKind.KeywordPath(); len(kp) > 0 {
		keyword = kp[0]
	}
	one := func(msg, constraint string) []finding {
		return []finding{{Violation: Violation{Instance: inst, Schema: owner, Keyword: keyword, Message: msg}, constraint: constraint}}
	}
	switch k := l.ErrorKind.(type) {
	case *kind.Required:
		out := make([]finding, 0, len(k.Missing))
		for _, m := range k.Missing {
			out = append(out, finding{Violation: Violation{
				Instance: joinPointer(inst, m), Schema: joinPointer(owner, "properties", m), Keyword: "required",
				Message: fmt.Sprintf("required: property %q is missing", fault.Truncate(m, 64)),
			}, constraint: "required"})
		}
		return out
	case *kind.AdditionalProperties:
		out := make([]finding, 0, len(k.Properties))
		for _, p := range k.Properties {
			out = append(out, finding{Violation: Violation{
				Instance: joinPointer(inst, p), Schema: joinPointer(owner, "properties", p), Keyword: "additionalProperties",
				Message: fmt.Sprintf("additionalProperties: field %q is not defined by the schema", fault.Truncate(p, 64)),
			}, constraint: "additionalProperties"})
		}
		return out
	case *kind.Type:
		want := strings.Join(k.Want, " or ")
		return one(fmt.Sprintf("type: expected %s, got %s", want, k.Got), "type "+want)
	case *kind.Enum:
		return one(fmt.Sprintf("enum: %s is not one of %s", describeValue(k.Got), listValues(k.Want)), "enum")
	case *kind.Const:
		return one(fmt.Sprintf("const: %s is not %s", describeValue(k.Got), describeValue(k.Want)), "const")
	case *kind.Format:
		return one(fmt.Sprintf("format: %s is not a valid %s", describeValue(k.Got), k.Want), "format "+k.Want)
	case *kind.Pattern:
		return one(fmt.Sprintf("pattern: %s does not match %s", describeValue(k.Got), fault.Truncate(k.Want, 100)), "pattern "+fault.Truncate(k.Want, 100))
	case *kind.MinLength:
		return one(fmt.Sprintf("minLength: length %d is less than %d", k.Got, k.Want), fmt.Sprintf("minLength %d", k.Want))
	case *kind.MaxLength:
		return one(fmt.Sprintf("maxLength: length %d is greater than %d", k.Got, k.Want), fmt.Sprintf("maxLength %d", k.Want))
	case *kind.Minimum:
		return one(fmt.Sprintf("minimum: %s is less than %s", ratText(k.Got), ratText(k.Want)), "minimum "+ratText(k.Want))
	case *kind.Maximum:
		return one(fmt.Sprintf("maximum: %s is greater than %s", ratText(k.Got), ratText(k.Want)), "maximum "+ratText(k.Want))
	case *kind.ExclusiveMinimum:
		return one(fmt.Sprintf("exclusiveMinimum: %s is not greater than %s", ratText(k.Got), ratText(k.Want)), "exclusiveMinimum "+ratText(k.Want))
	case *kind.ExclusiveMaximum:
		return one(fmt.Sprintf("exclusiveMaximum: %s is not less than %s", ratText(k.Got), ratText(k.Want)), "exclusiveMaximum "+ratText(k.Want))
	case *kind.MultipleOf:
		return one(fmt.Sprintf("multipleOf: %s is not a multiple of %s", ratText(k.Got), ratText(k.Want)), "multipleOf "+ratText(k.Want))
	case *kind.MinItems:
		return one(fmt.Sprintf("minItems: %d items, at least %d required", k.Got, k.Want), fmt.Sprintf("minItems %d", k.Want))
	case *kind.MaxItems:
		return one(fmt.Sprintf("maxItems: %d items, at most %d allowed", k.Got, k.Want), fmt.Sprintf("maxItems %d", k.Want))
	case *kind.MinProperties:
		return one(fmt.Sprintf("minProperties: %d properties, at least %d required", k.Got, k.Want), fmt.Sprintf("minProperties %d", k.Want))
	case *kind.MaxProperties:
		return one(fmt.Sprintf("maxProperties: %d properties, at most %d allowed", k.Got, k.Want), fmt.Sprintf("maxProperties %d", k.Want))
	case *kind.UniqueItems:
		return one(fmt.Sprintf("uniqueItems: items %d and %d are equal", k.Duplicates[0], k.Duplicates[1]), "uniqueItems")
	case *kind.AnyOf:
		return one("anyOf: the value matches none of the alternatives", "anyOf")
	case *kind.OneOf:
		if len(k.Subschemas) >= 2 {
			return one(fmt.Sprintf("oneOf: the value matches alternatives %d and %d; exactly one must match", k.Subschemas[0], k.Subschemas[1]), "oneOf")
		}
		return one("oneOf: the value matches none of the alternatives", "oneOf")
	case *kind.Not:
		return one("not: the value matches a schema it must not match", "not")
	}
	if keyword == "" {
		keyword = "schema"
	}
	return []finding{{Violation: Violation{Instance: inst, Schema: owner, Keyword: keyword, Message: keyword + ": " + leafText(l)}, constraint: keyword}}
}

// ratText renders an exact number the way a user wrote it: 10, 2.5, not 5/2.
func ratText(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	s := r.FloatString(12)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

func listValues(vs []any) string {
	parts := make([]string, 0, len(vs))
	for i, v := range vs {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("… (%d more)", len(vs)-10))
			break
		}
		parts = append(parts, describeValue(v))
	}
	return strings.Join(parts, ", ")
}
