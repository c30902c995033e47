// Package schema compiles one revision of a kind's spec schema and runs the two pipelines every
// object of the kind goes through: Present on read (aliases, tombstones, defaults — never
// validating, never failing) and Admit on write (unknown fields, tombstones, deprecations,
// aliases, defaults, validation with ratcheting on update). It knows nothing about storage or
// HTTP: the registry stores revisions, the compat package diffs them, and this package answers
// "what does this revision make of this value".
//
// Kind schemas are a structural subset of JSON Schema 2020-12 (research §1.1 and §5.1): every node
// is typed, combinators only constrain what is declared outside them, and objects are closed unless
// they opt out. The subset is what makes defaulting, pruning, ratcheting correlation and schema
// diffing decidable.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/jsondepth"
)

// Limits on a schema document. They bound the work Parse does on user input; real kind schemas
// are a few KiB and a handful of levels deep.
const (
	MaxDocumentBytes = 256 << 10
	MaxDepth         = 32
	// maxJSONDepth bounds the raw JSON nesting before decoding: the limit of every stored
	// JSON value (jsondepth.Max). A schema node at depth 32 sits about 64 JSON levels deep;
	// the rest is room for defaults, enums and examples, which so nest less than a stored
	// value may.
	maxJSONDepth = jsondepth.Max
)

// Draft2020 is the only $schema a kind schema may name.
const Draft2020 = "https://json-schema.org/draft/2020-12/schema"

// resourceURL is the name the validator knows the document by. It is never fetched: the
// compiler has a loader that refuses every URL.
const resourceURL = "https://strata.invalid/kind-schema.json"

// Schema is one compiled, structurally valid revision of a kind's spec schema. It is immutable
// and safe for concurrent use, so the registry can cache one per revision.
type Schema struct {
	doc           map[string]any
	root          *node
	compiled      *jsonschema.Schema
	assertFormats bool
}

// node is strata's view of one schema node: what the pipelines need to walk a value (properties,
// aliases, tombstones, defaults, list map keys), leaving value constraints to the validator.
type node struct {
	ptr         string // JSON pointer of the node in the schema document
	types       []string
	preserve    bool // x-preserve-unknown-fields: unknown keys are kept, not refused
	props       map[string]*node
	names       []string          // property names, sorted, for deterministic walks
	aliasOf     map[string]string // old name → canonical property name
	addl        *node             // additionalProperties schema, if one
	addlOpen    bool              // additionalProperties is true or a schema
	items       *node
	removed     bool // x-removed: a tombstone; the name stays reserved
	deprecated  bool
	aliases     []string
	hasDefault  bool
	def         any
	listMapKeys []string
	// aliasesBelow says this node or a descendant declares x-aliases, so the write pipeline
	// can skip alias resolution for the (usual) subtrees without renames.
	aliasesBelow bool
	// mapListsBelow says this node or a descendant is an x-list-map-keys list, whose keys
	// Admit and Violations check for uniqueness.
	mapListsBelow bool
}

// markBelow sets aliasesBelow and mapListsBelow bottom-up and returns them for n.
func markBelow(n *node) (aliases, mapLists bool) {
	if n == nil {
		return false, false
	}
	aliases, mapLists = len(n.aliasOf) > 0, len(n.listMapKeys) > 0
	children := []*node{n.addl, n.items}
	for _, c := range n.props {
		children = append(children, c)
	}
	for _, c := range children {
		a, m := markBelow(c)
		aliases, mapLists = aliases || a, mapLists || m
	}
	n.aliasesBelow, n.mapListsBelow = aliases, mapLists
	return aliases, mapLists
}

func (n *node) allows(t string) bool {
	if n == nil {
		return true
	}
	if n.preserve && len(n.types) == 0 {
		return true
	}
	return slices.Contains(n.types, t) || (t == "integer" && slices.Contains(n.types, "number"))
}

func (n *node) nullable() bool { return n != nil && slices.Contains(n.types, "null") }

// integerOnly says the node's numbers must be integers, so they are stored without a fraction.
func (n *node) integerOnly() bool {
	return n != nil && slices.Contains(n.types, "integer") && !slices.Contains(n.types, "number")
}

// prop returns the property node named k, or the one k is an old name (x-aliases) of.
func (n *node) prop(k string) *node {
	if n == nil {
		return nil
	}
	if c, ok := n.props[k]; ok {
		return c
	}
	if c, ok := n.aliasOf[k]; ok {
		return n.props[c]
	}
	return nil
}

// child returns the node describing the value under key k of an object described by n: the
// property (or aliased property) of that name, else the additionalProperties schema, else nil.
func (n *node) child(k string) *node {
	if c := n.prop(k); c != nil {
		return c
	}
	if n == nil {
		return nil
	}
	return n.addl
}

// Doc returns the schema as decoded JSON (map[string]any, numbers as json.Number) — a copy, so
// the compat package may walk or annotate it freely.
func (s *Schema) Doc() map[string]any { return deepCopy(s.doc).(map[string]any) }

// AssertsFormats reports whether `format` is asserted by this revision (the root says
// "x-assert-formats": true).
func (s *Schema) AssertsFormats() bool { return s.assertFormats }

// Parse checks that doc (a JSON document) is in strata's structural subset and compiles it with
// santhosh-tekuri/jsonschema/v6, pinned to draft 2020-12.
//
// strata decides two things the validator would otherwise decide: no loaders (any $ref, $id or
// remote reference is refused, so a schema never fetches anything), and `format` is an annotation
// unless the root says "x-assert-formats": true — JSON Schema 2020-12 leaves format assertion
// to the implementation, and turning it on later would reject stored values, so it is an
// explicit, diffable property of the revision. The validator applies no defaults; Present and
// Admit do.
//
// Errors are *fault.Error 422 whose fields are JSON pointers into the schema document
// ("" is the whole document), each with a reason.
func Parse(doc []byte) (*Schema, error) {
	if len(doc) > MaxDocumentBytes {
		return nil, refuse(fault.FieldError{Field: "", Message: fmt.Sprintf("the schema is %d bytes; at most %d are allowed", len(doc), MaxDocumentBytes)})
	}
	if d := jsondepth.Raw(doc); d > maxJSONDepth {
		return nil, refuse(deepField(doc))
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, refuse(fault.FieldError{Field: "", Message: "not valid JSON: " + fault.Truncate(err.Error(), 200)})
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, refuse(fault.FieldError{Field: "", Message: "not valid JSON: data after the schema object"})
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return nil, refuse(fault.FieldError{Field: "", Message: "a kind schema must be a JSON object"})
	}
	if bad := badNumbers(obj, "", nil); len(bad) > 0 {
		fields := make([]fault.FieldError, 0, len(bad))
		for _, p := range bad {
			fields = append(fields, fault.FieldError{Field: p, Message: fmt.Sprintf("number out of range: exponents beyond ±%d are not supported", maxExponent)})
		}
		return nil, refuse(fields...)
	}

	p := &parser{}
	root := p.node(obj, "", 0, atRoot)
	if len(p.errs) > 0 {
		return nil, refuse(p.errs...)
	}
	markBelow(root)
	s := &Schema{doc: obj, root: root}
	s.assertFormats, _ = obj["x-assert-formats"].(bool)

	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if s.assertFormats {
		c.AssertFormat()
	}
	if err := c.AddResource(resourceURL, obj); err != nil {
		return nil, fault.Wrap(fault.KindInternal, err, "kind schema: adding the resource")
	}
	compiled, err := c.Compile(resourceURL)
	if err != nil {
		return nil, refuse(compileErrors(err)...)
	}
	s.compiled = compiled

	// Every default must be a value the field accepts: Present fills it into stored objects
	// without validating, so an invalid default would put invalid data in every read.
	for _, n := range p.defaults {
		if errs := s.checkDefault(c, n); len(errs) > 0 {
			p.errs = append(p.errs, errs...)
		}
	}
	if len(p.errs) > 0 {
		return nil, refuse(p.errs...)
	}
	return s, nil
}

func refuse(fields ...fault.FieldError) error {
	return fault.UnprocessableFields("the kind schema is not accepted", fields)
}

// noLoader refuses every URL: a kind schema is self-contained by rule, and a schema that could
// fetch would make registration depend on the network and leak requests to user-chosen hosts.
type noLoader struct{}

func (noLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("kind schemas cannot load %s", fault.Truncate(u, 100))
}

// deepField says where a document nesting deeper than maxJSONDepth goes too deep: the pointer
// jsondepth.Check names when the document decodes (the decoder's own limit is far deeper),
// the whole document otherwise.
func deepField(doc []byte) fault.FieldError {
	msg := fmt.Sprintf("the schema nests JSON deeper than %d levels", maxJSONDepth)
	var v any
	if err := json.Unmarshal(doc, &v); err == nil {
		var fe *fault.Error
		if err := jsondepth.Check(v, ""); errors.As(err, &fe) && len(fe.Fields) > 0 {
			return fault.FieldError{Field: fe.Fields[0].Field, Message: msg + ": " + fe.Fields[0].Message}
		}
	}
	return fault.FieldError{Field: "", Message: msg}
}

// compileErrors turns a compiler error into field errors. Metaschema violations carry the
// location inside the schema document; anything else is reported against the whole document.
func compileErrors(err error) []fault.FieldError {
	var sve *jsonschema.SchemaValidationError
	if errors.As(err, &sve) {
		var ve *jsonschema.ValidationError
		if errors.As(sve.Err, &ve) {
			var out []fault.FieldError
			for _, l := range flatten(ve, nil) {
				out = append(out, fault.FieldError{Field: pointerOf(l.InstanceLocation), Message: "not a valid JSON Schema 2020-12 keyword value: " + leafText(l)})
			}
			if len(out) > 0 {
				return out
			}
		}
	}
	return []fault.FieldError{{Field: "", Message: "the schema does not compile: " + fault.Truncate(err.Error(), 300)}}
}

// flatten collects the leaf errors of a validation error tree.
func flatten(ve *jsonschema.ValidationError, out []*jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return append(out, ve)
	}
	for _, c := range ve.Causes {
		out = flatten(c, out)
	}
	return out
}

// leafText is the validator's own message for one leaf error, without its "at '…':" prefix.
func leafText(ve *jsonschema.ValidationError) string {
	msg := (&jsonschema.ValidationError{ErrorKind: ve.ErrorKind}).Error()
	if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "at ") {
		msg = msg[i+2:]
	}
	return fault.Truncate(msg, 200)
}

func pointerOf(toks []string) string { return joinPointer("", toks...) }

// checkDefault validates n's default against n's own schema node and checks that it holds no
// property a closed object would refuse.
func (s *Schema) checkDefault(c *jsonschema.Compiler, n *node) []fault.FieldError {
	at := joinPointer(n.ptr, "default")
	var frag strings.Builder
	for _, tok := range strings.Split(n.ptr, "/")[1:] {
		frag.WriteByte('/')
		frag.WriteString(url.PathEscape(tok))
	}
	sub, err := c.Compile(resourceURL + "#" + frag.String())
	if err != nil {
		return []fault.FieldError{{Field: at, Message: "the default cannot be checked: " + fault.Truncate(err.Error(), 200)}}
	}
	// Present fills nested defaults into a default (top-down), so that is the value to check.
	def := present(n, deepCopy(n.def))
	var out []fault.FieldError
	for _, v := range unknownKeys(n, def, "", nil, nil) {
		out = append(out, fault.FieldError{Field: at, Message: fmt.Sprintf("the default holds %s, which the schema does not define", describePointer(v.Instance))})
	}
	if err := sub.Validate(def); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			for _, l := range flatten(ve, nil) {
				for _, v := range violationsOf(l, "") {
					out = append(out, fault.FieldError{Field: at, Message: fmt.Sprintf("the default does not validate against its own schema: %s%s", describePointerPrefix(v.Instance), v.Message)})
				}
			}
		}
	}
	if len(out) == 0 {
		n.def = canonical(n, n.def)
	}
	return out
}

func describePointer(p string) string {
	if p == "" {
		return "the value itself"
	}
	return "field " + p
}

func describePointerPrefix(p string) string {
	if p == "" {
		return ""
	}
	return p + ": "
}

// position says where a schema node sits, which decides the keywords it may carry.
type position int

const (
	atRoot position = iota
	atProperty
	atItems
	atAdditional
)

// nodeKeywords is the structural subset's vocabulary. Anything else is refused.
var nodeKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true, "items": true,
	"enum": true, "const": true, "default": true, "description": true, "title": true, "examples": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
	"minLength": true, "maxLength": true, "pattern": true, "format": true,
	"minItems": true, "maxItems": true, "uniqueItems": true, "minProperties": true, "maxProperties": true,
	"allOf": true, "anyOf": true, "oneOf": true, "not": true, "deprecated": true, "$schema": true,
	"x-preserve-unknown-fields": true, "x-aliases": true, "x-removed": true, "x-enum-open": true,
	"x-list-map-keys": true, "x-assert-formats": true,
}

// notInCombinator are keywords that define shape or behaviour. Inside allOf/anyOf/oneOf/not they
// would make a node's shape depend on which branch matched, which defeats pruning, defaulting and
// diffing (research §1.1 rules 2 and 3).
var notInCombinator = map[string]bool{
	"type": true, "default": true, "additionalProperties": true, "deprecated": true, "$schema": true,
	"x-preserve-unknown-fields": true, "x-aliases": true, "x-removed": true, "x-enum-open": true,
	"x-list-map-keys": true, "x-assert-formats": true,
}

var jsonTypes = map[string]bool{"object": true, "array": true, "string": true, "integer": true, "number": true, "boolean": true, "null": true}

type parser struct {
	errs     []fault.FieldError
	defaults []*node
}

func (p *parser) fail(ptr, format string, args ...any) {
	p.errs = append(p.errs, fault.FieldError{Field: ptr, Message: fmt.Sprintf(format, args...)})
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// flag reads an optional boolean keyword.
func (p *parser) flag(obj map[string]any, ptr, kw string) bool {
	v, ok := obj[kw]
	if !ok {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		p.fail(joinPointer(ptr, kw), "%s must be true or false", kw)
	}
	return b
}

// names reads an optional array of unique non-empty strings.
func (p *parser) names(obj map[string]any, ptr, kw string) ([]string, bool) {
	v, ok := obj[kw]
	if !ok {
		return nil, false
	}
	at := joinPointer(ptr, kw)
	arr, ok := v.([]any)
	if !ok {
		p.fail(at, "%s must be an array of strings", kw)
		return nil, false
	}
	out := make([]string, 0, len(arr))
	for i, e := range arr {
		s, ok := e.(string)
		switch {
		case !ok:
			p.fail(joinPointer(at, fmt.Sprint(i)), "%s must be an array of strings", kw)
			return nil, false
		case s == "" && kw != "required":
			p.fail(joinPointer(at, fmt.Sprint(i)), "%s entries must not be empty", kw)
			return nil, false
		case slices.Contains(out, s):
			p.fail(joinPointer(at, fmt.Sprint(i)), "%q appears twice in %s", fault.Truncate(s, 64), kw)
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// node checks and converts one schema node outside combinators.
func (p *parser) node(raw any, ptr string, depth int, pos position) *node {
	obj, ok := raw.(map[string]any)
	if !ok {
		p.fail(ptr, "must be a schema object")
		return nil
	}
	if depth > MaxDepth {
		p.fail(ptr, "schema nesting deeper than %d levels is not supported", MaxDepth)
		return nil
	}
	n := &node{ptr: ptr}
	for _, k := range sortedKeys(obj) {
		at := joinPointer(ptr, k)
		switch {
		case !nodeKeywords[k]:
			p.fail(at, "not supported in kind schemas: %s", fault.Truncate(k, 64))
		case (k == "$schema" || k == "x-assert-formats") && pos != atRoot:
			p.fail(at, "%s is only allowed at the root of the schema", k)
		case (k == "x-aliases" || k == "x-removed") && pos != atProperty:
			p.fail(at, "%s is only allowed on a property (a node under properties)", k)
		}
	}
	if v, ok := obj["$schema"]; ok && pos == atRoot {
		if s, _ := v.(string); s != Draft2020 && s != Draft2020+"#" {
			p.fail("/$schema", "kind schemas are JSON Schema 2020-12: $schema must be %q", Draft2020)
		}
	}
	if pos == atRoot {
		p.flag(obj, ptr, "x-assert-formats")
	}
	n.preserve = p.flag(obj, ptr, "x-preserve-unknown-fields")
	n.deprecated = p.flag(obj, ptr, "deprecated")
	p.flag(obj, ptr, "x-enum-open")
	if pos == atProperty {
		n.removed = p.flag(obj, ptr, "x-removed")
		n.aliases, _ = p.names(obj, ptr, "x-aliases")
	}

	// type
	if tv, ok := obj["type"]; ok {
		n.types = p.types(tv, joinPointer(ptr, "type"))
	} else if !n.preserve {
		p.fail(joinPointer(ptr, "type"), "missing: every schema node needs a type (or x-preserve-unknown-fields: true)")
	}
	if pos == atRoot && !(len(n.types) == 1 && n.types[0] == "object") {
		if _, ok := obj["type"]; ok || n.preserve {
			p.fail(joinPointer(ptr, "type"), `the root of a kind schema must be "type": "object"`)
		}
	}

	// properties
	if pv, ok := obj["properties"]; ok {
		props, ok := pv.(map[string]any)
		if !ok {
			p.fail(joinPointer(ptr, "properties"), "properties must be an object of schemas")
		} else {
			n.props = make(map[string]*node, len(props))
			n.names = sortedKeys(props)
			for _, name := range n.names {
				if c := p.node(props[name], joinPointer(ptr, "properties", name), depth+1, atProperty); c != nil {
					n.props[name] = c
				}
			}
			p.aliases(n)
		}
	}

	// additionalProperties
	if av, ok := obj["additionalProperties"]; ok {
		at := joinPointer(ptr, "additionalProperties")
		switch av := av.(type) {
		case bool:
			n.addlOpen = av
			if !av && n.preserve {
				p.fail(at, "additionalProperties: false contradicts x-preserve-unknown-fields: true")
			}
		case map[string]any:
			n.addlOpen = true
			n.addl = p.node(av, at, depth+1, atAdditional)
		default:
			p.fail(at, "additionalProperties must be true, false or a schema")
		}
	}

	// required
	if req, ok := p.names(obj, ptr, "required"); ok {
		for i, name := range req {
			at := joinPointer(ptr, "required", fmt.Sprint(i))
			c, defined := n.props[name]
			switch {
			case defined && c.removed:
				p.fail(at, "property %q is removed (x-removed) and cannot be required", fault.Truncate(name, 64))
			case !defined && !n.addlOpen && !n.preserve:
				if _, declared := propsOf(obj)[name]; !declared {
					p.fail(at, "property %q is not defined in properties, and the object is closed", fault.Truncate(name, 64))
				}
			}
		}
	}

	// items
	if iv, ok := obj["items"]; ok {
		n.items = p.node(iv, joinPointer(ptr, "items"), depth+1, atItems)
	} else if slices.Contains(n.types, "array") {
		p.fail(joinPointer(ptr, "items"), "missing: an array node needs an items schema")
	}
	if _, ok := obj["x-list-map-keys"]; ok {
		p.listMapKeys(n, obj, ptr)
	}

	p.pattern(obj, ptr)
	p.combinators(obj, ptr, depth, obj)

	if dv, ok := obj["default"]; ok {
		n.hasDefault = true
		n.def = dv
		p.defaults = append(p.defaults, n)
	}
	return n
}

func propsOf(obj map[string]any) map[string]any {
	m, _ := obj["properties"].(map[string]any)
	return m
}

// types reads a type keyword: one type name, or an array of unique names with at least one that
// is not "null" (a field that can only be null carries nothing).
func (p *parser) types(v any, at string) []string {
	switch v := v.(type) {
	case string:
		if !jsonTypes[v] {
			p.fail(at, "unknown type %q", fault.Truncate(v, 64))
			return nil
		}
		if v == "null" {
			p.fail(at, `a node cannot be only "null"; use ["<type>", "null"]`)
			return nil
		}
		return []string{v}
	case []any:
		var out []string
		for i, e := range v {
			s, ok := e.(string)
			if !ok || !jsonTypes[s] {
				p.fail(joinPointer(at, fmt.Sprint(i)), "not a JSON Schema type name")
				return nil
			}
			if slices.Contains(out, s) {
				p.fail(joinPointer(at, fmt.Sprint(i)), "type %q appears twice", s)
				return nil
			}
			out = append(out, s)
		}
		if len(out) == 0 || (len(out) == 1 && out[0] == "null") {
			p.fail(at, "type must name at least one type other than null")
			return nil
		}
		return out
	}
	p.fail(at, "type must be a type name or an array of type names")
	return nil
}

// aliases checks x-aliases across the siblings of n: an old name may belong to one property
// only and may not be a current property name, or reads could not tell where a value belongs.
func (p *parser) aliases(n *node) {
	for _, name := range n.names {
		c := n.props[name]
		if c == nil {
			continue
		}
		for i, a := range c.aliases {
			at := joinPointer(c.ptr, "x-aliases", fmt.Sprint(i))
			if _, clash := n.props[a]; clash {
				p.fail(at, "alias %q is the name of a current property", fault.Truncate(a, 64))
				continue
			}
			if other, taken := n.aliasOf[a]; taken {
				p.fail(at, "alias %q is already an alias of %q", fault.Truncate(a, 64), fault.Truncate(other, 64))
				continue
			}
			if n.aliasOf == nil {
				n.aliasOf = map[string]string{}
			}
			n.aliasOf[a] = name
		}
	}
}

// listMapKeys checks x-list-map-keys: the items are objects and every key is a required scalar
// property, so each item can be identified by its keys when correlating old and new lists.
func (p *parser) listMapKeys(n *node, obj map[string]any, ptr string) {
	keys, ok := p.names(obj, ptr, "x-list-map-keys")
	if !ok {
		return
	}
	at := joinPointer(ptr, "x-list-map-keys")
	if len(keys) == 0 {
		p.fail(at, "x-list-map-keys must name at least one property")
		return
	}
	if n.items == nil || !slices.Contains(n.types, "array") || !slices.Contains(n.items.types, "object") {
		p.fail(at, "x-list-map-keys needs an array whose items are objects")
		return
	}
	itemsObj, _ := obj["items"].(map[string]any)
	req, _ := itemsObj["required"].([]any)
	for i, k := range keys {
		kat := joinPointer(at, fmt.Sprint(i))
		c, ok := n.items.props[k]
		if !ok {
			p.fail(kat, "key %q is not a property of the items", fault.Truncate(k, 64))
			continue
		}
		if !slices.Contains(req, any(k)) {
			p.fail(kat, "key %q must be required in the items", fault.Truncate(k, 64))
		}
		for _, t := range c.types {
			if t != "string" && t != "integer" && t != "number" && t != "boolean" {
				p.fail(kat, "key %q must be a non-null scalar (string, integer, number or boolean)", fault.Truncate(k, 64))
				break
			}
		}
		if len(c.types) == 0 || c.removed {
			p.fail(kat, "key %q must be a typed, current property", fault.Truncate(k, 64))
		}
	}
	n.listMapKeys = keys
}

// pattern checks that a pattern compiles with the engine the validator uses (Go's regexp, the
// validator's default), so a bad pattern is a registration error and not a write-time surprise.
func (p *parser) pattern(obj map[string]any, ptr string) {
	v, ok := obj["pattern"]
	if !ok {
		return
	}
	s, ok := v.(string)
	if !ok {
		p.fail(joinPointer(ptr, "pattern"), "pattern must be a string")
		return
	}
	if _, err := regexp.Compile(s); err != nil {
		p.fail(joinPointer(ptr, "pattern"), "pattern does not compile: %s", fault.Truncate(err.Error(), 200))
	}
}

// combinators checks allOf/anyOf/oneOf/not of a node whose outside definition is outer.
func (p *parser) combinators(obj map[string]any, ptr string, depth int, outer map[string]any) {
	for _, kw := range []string{"allOf", "anyOf", "oneOf"} {
		v, ok := obj[kw]
		if !ok {
			continue
		}
		at := joinPointer(ptr, kw)
		arr, ok := v.([]any)
		if !ok || len(arr) == 0 {
			p.fail(at, "%s must be a non-empty array of schemas", kw)
			continue
		}
		for i, e := range arr {
			p.constraint(e, joinPointer(at, fmt.Sprint(i)), depth+1, outer)
		}
	}
	if v, ok := obj["not"]; ok {
		p.constraint(v, joinPointer(ptr, "not"), depth+1, outer)
	}
}

// constraint checks a subschema inside a combinator: it may only constrain properties and items
// that outer (the node's definition outside every combinator) declares.
func (p *parser) constraint(raw any, ptr string, depth int, outer map[string]any) {
	obj, ok := raw.(map[string]any)
	if !ok {
		p.fail(ptr, "must be a schema object")
		return
	}
	if depth > MaxDepth {
		p.fail(ptr, "schema nesting deeper than %d levels is not supported", MaxDepth)
		return
	}
	for _, k := range sortedKeys(obj) {
		at := joinPointer(ptr, k)
		switch {
		case !nodeKeywords[k]:
			p.fail(at, "not supported in kind schemas: %s", fault.Truncate(k, 64))
		case notInCombinator[k]:
			p.fail(at, "%s is not allowed inside allOf/anyOf/oneOf/not: combinators may only constrain what the node declares outside them", k)
		}
	}
	outerProps := propsOf(outer)
	if pv, ok := obj["properties"]; ok {
		props, ok := pv.(map[string]any)
		if !ok {
			p.fail(joinPointer(ptr, "properties"), "properties must be an object of schemas")
		}
		for _, name := range sortedKeys(props) {
			at := joinPointer(ptr, "properties", name)
			o, ok := outerProps[name].(map[string]any)
			if !ok {
				p.fail(at, "property %q is not declared outside the combinator", fault.Truncate(name, 64))
				continue
			}
			p.constraint(props[name], at, depth+1, o)
		}
	}
	if iv, ok := obj["items"]; ok {
		o, ok := outer["items"].(map[string]any)
		if !ok {
			p.fail(joinPointer(ptr, "items"), "items is not declared outside the combinator")
		} else {
			p.constraint(iv, joinPointer(ptr, "items"), depth+1, o)
		}
	}
	if req, ok := p.names(obj, ptr, "required"); ok {
		open := outer["x-preserve-unknown-fields"] == true
		if a, ok := outer["additionalProperties"]; ok && a != false {
			open = true
		}
		for i, name := range req {
			if _, ok := outerProps[name]; !ok && !open {
				p.fail(joinPointer(ptr, "required", fmt.Sprint(i)), "property %q is not declared outside the combinator", fault.Truncate(name, 64))
			}
		}
	}
	p.pattern(obj, ptr)
	p.combinators(obj, ptr, depth, outer)
}
