package compat

import (
	"fmt"
	"sort"
	"strings"

	"github.com/stratahq/strata/internal/fault"
)

// maxDepth bounds the parallel walk. The schema package refuses schemas nested deeper than 32,
// so this only protects Diff from odd input; deeper subtrees are compared as whole values.
const maxDepth = 64

// Diff classifies every change from old to new (both revisions of one kind's spec schema), in
// a deterministic order (by Path, then Rule). Identical schemas give no changes; documentation
// changes (description, title, examples, $comment) are never reported.
func Diff(old, new map[string]any) []Change {
	w := &walker{}
	w.node(old, new, at{path: "", field: "/spec", name: "spec"}, 0)
	sort.SliceStable(w.out, func(i, j int) bool {
		if w.out[i].Path != w.out[j].Path {
			return w.out[i].Path < w.out[j].Path
		}
		return w.out[i].Rule < w.out[j].Rule
	})
	return w.out
}

// at locates the schema node being compared.
type at struct {
	path     string // JSON pointer into the schema
	field    string // instance path for humans
	name     string // nearest property name, for suggestions ("spec" at the root)
	userOnly bool   // the node or an ancestor is marked x-user-only in the new schema
}

func (a at) property(name string) at {
	return at{
		path:     a.path + "/properties/" + escapeToken(name),
		field:    a.field + "/" + escapeToken(name),
		name:     name,
		userOnly: a.userOnly,
	}
}

func (a at) child(keyword string) at {
	return at{path: a.path + "/" + keyword, field: a.field + "/*", name: a.name, userOnly: a.userOnly}
}

type walker struct {
	out []Change
}

func (w *walker) add(c Change) { w.out = append(w.out, c) }

// annotations are keywords that change neither data nor validation.
var annotations = map[string]bool{
	"description": true, "title": true, "examples": true, "$comment": true, "$schema": true,
	"$id": true, "readOnly": true, "writeOnly": true,
}

// handled are the keywords node compares explicitly; any other keyword (outside the
// structural subset) falls back to a generic comparison.
var handled = map[string]bool{
	"type": true, "enum": true, "const": true, "default": true, "pattern": true, "format": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"minLength": true, "maxLength": true, "minItems": true, "maxItems": true,
	"minProperties": true, "maxProperties": true, "multipleOf": true, "uniqueItems": true,
	"properties": true, "required": true, "items": true, "additionalProperties": true,
	"allOf": true, "anyOf": true, "oneOf": true, "not": true,
}

// node compares two schema nodes found at the same place in both revisions.
func (w *walker) node(o, n map[string]any, a at, depth int) {
	if o == nil {
		o = map[string]any{}
	}
	if n == nil {
		n = map[string]any{}
	}
	a.userOnly = a.userOnly || isTrue(n["x-user-only"])
	if depth > maxDepth {
		if canon(strip(o)) != canon(strip(n)) {
			w.add(Change{Path: a.path, Field: a.field, Rule: "schema-changed", Row: 13,
				IfClean: Reject, IfAffected: Reject,
				Message:    fmt.Sprintf("the schema of %s changed below the nesting limit of %d and cannot be classified", a.field, maxDepth),
				WayForward: "flatten the schema: strata refuses schemas nested this deep"})
		}
		return
	}
	if !w.types(o, n, a) {
		return // a type change is reported once; what is below no longer matters
	}
	w.enum(o, n, a)
	w.defaults(o, n, a)
	for _, b := range bounds {
		w.bound(o, n, a, b)
	}
	w.multipleOf(o, n, a)
	for _, kw := range []string{"const", "format", "pattern"} {
		w.valueKeyword(o, n, a, kw)
	}
	w.uniqueItems(o, n, a)
	for _, kw := range []string{"allOf", "anyOf", "not", "oneOf"} {
		w.combinator(o, n, a, kw)
	}
	w.listMapKeys(o, n, a)
	w.other(o, n, a)
	w.openness(o, n, a, depth)
	w.properties(o, n, a, depth)
	w.items(o, n, a, depth)
}

// typeSet returns the node's types, nil for an untyped node (anything goes).
func typeSet(m map[string]any) map[string]bool {
	switch t := m["type"].(type) {
	case nil:
		return nil
	case string:
		return map[string]bool{t: true}
	case []any:
		set := map[string]bool{}
		for _, e := range t {
			if s, ok := e.(string); ok {
				set[s] = true
			} else {
				set["?"+canon(e)] = true
			}
		}
		return set
	default:
		return map[string]bool{"?" + canon(t): true}
	}
}

// covers reports whether every value of type t is also a value of one of set's types.
func covers(set map[string]bool, t string) bool {
	return set == nil || set[t] || (t == "integer" && set["number"])
}

func coversAll(outer, inner map[string]bool) bool {
	if inner == nil {
		return outer == nil
	}
	for t := range inner {
		if !covers(outer, t) {
			return false
		}
	}
	return true
}

func typeNames(set map[string]bool) string {
	if set == nil {
		return "any type"
	}
	names := make([]string, 0, len(set))
	for t := range set {
		names = append(names, t)
	}
	sort.Strings(names)
	if len(names) == 1 {
		return names[0]
	}
	return "[" + strings.Join(names, ", ") + "]"
}

// types compares the type keyword (rows 11, 12, 13). It reports false when the type changed
// incompatibly, so the caller does not descend into a subtree that no longer means the same.
func (w *walker) types(o, n map[string]any, a at) bool {
	ot, nt := typeSet(o), typeSet(n)
	wider, narrower := coversAll(nt, ot), coversAll(ot, nt)
	switch {
	case wider && narrower:
		return true
	case wider:
		w.add(Change{Path: a.path, Field: a.field, Rule: "type-widened", Row: 11,
			Ack: AckReadersUpgradedFirst, IfClean: Acknowledge, IfAffected: Acknowledge,
			Message: fmt.Sprintf("%s widens from %s to %s: stored values stay valid, but a reader "+
				"compiled against %s fails to decode the first new value (and with it the whole list)",
				a.field, typeNames(ot), typeNames(nt), typeNames(ot)),
			WayForward: fmt.Sprintf("upgrade every reader of %s to accept %s first, then acknowledge %s",
				a.field, typeNames(nt), AckReadersUpgradedFirst)})
		return true
	case narrower:
		w.add(Change{Path: a.path, Field: a.field, Rule: "type-narrowed", Row: 12,
			Check: Violations, Keywords: []string{"type"}, IfClean: Accept, IfAffected: Reject,
			Message: fmt.Sprintf("%s narrows from %s to %s: allowed only if no stored object holds a value "+
				"of a removed type (every stored object must conform to the current types)",
				a.field, typeNames(ot), typeNames(nt)),
			WayForward: fmt.Sprintf("migrate the objects listed in the impact first (rewrite their %s as %s), "+
				"then narrow the type", a.field, typeNames(nt))})
		return true
	default:
		w.add(Change{Path: a.path, Field: a.field, Rule: "type-changed", Row: 13,
			IfClean: Reject, IfAffected: Reject,
			Message: fmt.Sprintf("%s changes type from %s to %s: stored values of the old type would break "+
				"every reader of the new one; types never change in place", a.field, typeNames(ot), typeNames(nt)),
			WayForward: fmt.Sprintf("keep `%s` as %s; add a new field (e.g. `%sV2`) of type %s, mark `%s` "+
				"deprecated: true, and remove it later with x-removed: true",
				a.name, typeNames(ot), a.name, typeNames(nt), a.name)})
		return false
	}
}

// loosened records a row-18 change: wider values are accepted, which readers may not expect.
func (w *walker) loosened(a at, rule, what string) {
	c := Change{Path: a.path, Field: a.field, Rule: rule, Row: 18, IfClean: Acknowledge, IfAffected: Acknowledge,
		Ack: AckReadersHandleWiderValues,
		Message: fmt.Sprintf("%s: %s accepts values it refused before; readers (controllers) must handle them",
			what, a.field)}
	if a.userOnly {
		c.Ack, c.IfClean, c.IfAffected = "", Accept, Accept
		c.Message = fmt.Sprintf("%s: %s accepts values it refused before; it is marked x-user-only, so "+
			"no controller reads it", what, a.field)
	}
	w.add(c)
}

// tightened records a row-16/17 change: new writes are checked, stored objects keep working
// (ratcheting) and are listed as the impact.
func (w *walker) tightened(a at, rule string, row int, keyword, what string) {
	w.add(Change{Path: a.path, Field: a.field, Rule: rule, Row: row,
		Check: Violations, Keywords: []string{keyword}, IfClean: Accept, IfAffected: Accept,
		Message: fmt.Sprintf("%s: new writes of %s must satisfy it; stored objects that do not stay "+
			"readable and writable elsewhere (ratcheting) and are listed as the impact", what, a.field)})
}

func (w *walker) enum(o, n map[string]any, a at) {
	ov, oin := o["enum"]
	nv, nin := n["enum"]
	if equal(ov, nv) && oin == nin {
		return
	}
	oe, _ := ov.([]any)
	ne, _ := nv.([]any)
	switch {
	case !oin && nin:
		w.tightened(a, "enum-added", 16, "enum", "an enum restriction is added")
		return
	case oin && !nin:
		w.loosened(a, "enum-removed", "the enum restriction is removed")
		return
	}
	oldSet, newSet := map[string]bool{}, map[string]bool{}
	for _, v := range oe {
		oldSet[canon(v)] = true
	}
	for _, v := range ne {
		newSet[canon(v)] = true
	}
	var added, removed []string
	for _, v := range ne {
		if c := canon(v); !oldSet[c] {
			added = append(added, quote(v))
			oldSet[c] = true // report duplicates once
		}
	}
	for _, v := range oe {
		if c := canon(v); !newSet[c] {
			removed = append(removed, quote(v))
			newSet[c] = true
		}
	}
	if len(added) > 0 {
		c := Change{Path: a.path, Field: a.field, Rule: "enum-value-added", Row: 14,
			Ack: AckReadersHandleNewValue, IfClean: Acknowledge, IfAffected: Acknowledge,
			Message: fmt.Sprintf("%s accepts the new value(s) %s; readers that switch over the known "+
				"values must handle them", a.field, strings.Join(added, ", "))}
		if isTrue(n["x-enum-open"]) {
			c.Ack, c.IfClean, c.IfAffected = "", Accept, Accept
			c.Message = fmt.Sprintf("%s accepts the new value(s) %s; the enum is declared x-enum-open, "+
				"so readers already handle unknown values", a.field, strings.Join(added, ", "))
		}
		w.add(c)
	}
	if len(removed) > 0 {
		w.add(Change{Path: a.path, Field: a.field, Rule: "enum-value-removed", Row: 15,
			Check: Violations, Keywords: []string{"enum"}, IfClean: Accept, IfAffected: Accept,
			Message: fmt.Sprintf("%s no longer accepts %s in new writes; stored objects using it keep it "+
				"(ratcheting) and are listed as the impact; readers must keep handling it",
				a.field, strings.Join(removed, ", "))})
	}
	// Otherwise only the order or duplicates changed (or the enum is malformed): no value is
	// accepted or refused anew, so nothing is reported.
}

// defaults compares default (rows 19, 20, 21).
func (w *walker) defaults(o, n map[string]any, a at) {
	ov, oin := o["default"]
	nv, nin := n["default"]
	switch {
	case !oin && !nin:
	case !oin && nin:
		w.add(Change{Path: a.path, Field: a.field, Rule: "default-added", Row: 20,
			Ack: AckDefaultEqualsAbsentBehaviour, IfClean: Acknowledge, IfAffected: Acknowledge,
			Message: fmt.Sprintf("%s gets the default %s: stored objects without it will read it from now on; "+
				"that is safe only if %s means exactly what readers did when the field was absent",
				a.field, quote(nv), quote(nv))})
	case oin && !nin:
		w.add(Change{Path: a.path, Field: a.field, Rule: "default-removed", Row: 21,
			Check: Absent, IfClean: Accept, IfAffected: Reject,
			Message: fmt.Sprintf("the default %s of %s is removed: stored objects that never wrote %s "+
				"would silently change from %s to absent", quote(ov), a.field, a.field, quote(ov)),
			WayForward: fmt.Sprintf("keep the default %s of `%s`; or rewrite the objects listed in the impact "+
				"with %s set explicitly, then remove the default", quote(ov), a.name, a.name)})
	case !equal(ov, nv):
		w.add(Change{Path: a.path, Field: a.field, Rule: "default-changed", Row: 19,
			IfClean: Reject, IfAffected: Reject,
			Message: fmt.Sprintf("the default of %s changes from %s to %s: every stored object that never "+
				"wrote %s would silently change meaning; defaults never change once set",
				a.field, quote(ov), quote(nv), a.field),
			WayForward: fmt.Sprintf("keep the default %s of `%s`; if the new behaviour is needed, add a new "+
				"field (e.g. `%sV2`) with the default %s and mark `%s` deprecated: true",
				quote(ov), a.name, a.name, quote(nv), a.name)})
	}
}

// bound is a numeric limit keyword; lower bounds tighten upwards, upper bounds downwards.
type bound struct {
	keyword   string
	lower     bool
	container bool
}

var bounds = []bound{
	{"exclusiveMaximum", false, false},
	{"exclusiveMinimum", true, false},
	{"maxItems", false, true},
	{"maxLength", false, false},
	{"maxProperties", false, true},
	{"maximum", false, false},
	{"minItems", true, true},
	{"minLength", true, false},
	{"minProperties", true, true},
	{"minimum", true, false},
}

func (w *walker) bound(o, n map[string]any, a at, b bound) {
	ov, oin := o[b.keyword]
	nv, nin := n[b.keyword]
	if oin == nin && equal(ov, nv) {
		return
	}
	tighter := true
	switch {
	case !nin:
		tighter = false
	case oin:
		or, ok1 := number(ov)
		nr, ok2 := number(nv)
		if ok1 && ok2 {
			cmp := nr.Cmp(or)
			if cmp == 0 {
				return
			}
			tighter = (cmp > 0) == b.lower
		}
	}
	if !tighter {
		what := fmt.Sprintf("%s is loosened from %s", b.keyword, quote(ov))
		if nin {
			what += " to " + quote(nv)
		} else {
			what = b.keyword + " " + quote(ov) + " is removed"
		}
		w.loosened(a, b.keyword+"-loosened", what)
		return
	}
	row := 16
	if b.container {
		row = 17
	}
	what := fmt.Sprintf("%s %s is added", b.keyword, quote(nv))
	if oin {
		what = fmt.Sprintf("%s is tightened from %s to %s", b.keyword, quote(ov), quote(nv))
	}
	w.tightened(a, b.keyword+"-tightened", row, b.keyword, what)
}

func (w *walker) multipleOf(o, n map[string]any, a at) {
	ov, oin := o["multipleOf"]
	nv, nin := n["multipleOf"]
	if oin == nin && equal(ov, nv) {
		return
	}
	switch {
	case !nin:
		w.loosened(a, "multipleOf-loosened", fmt.Sprintf("multipleOf %s is removed", quote(ov)))
		return
	case oin:
		// Every multiple of old is a multiple of new iff old/new is an integer.
		or, ok1 := number(ov)
		nr, ok2 := number(nv)
		if ok1 && ok2 && nr.Sign() != 0 {
			if q := or.Quo(or, nr); q.IsInt() {
				w.loosened(a, "multipleOf-loosened",
					fmt.Sprintf("multipleOf changes from %s to %s", quote(ov), quote(nv)))
				return
			}
		}
	}
	w.tightened(a, "multipleOf-tightened", 16, "multipleOf",
		fmt.Sprintf("multipleOf %s is required", quote(nv)))
}

// valueKeyword compares const, format and pattern: any new or different value restricts.
func (w *walker) valueKeyword(o, n map[string]any, a at, kw string) {
	ov, oin := o[kw]
	nv, nin := n[kw]
	switch {
	case oin == nin && equal(ov, nv):
	case !oin:
		w.tightened(a, kw+"-added", 16, kw, fmt.Sprintf("%s %s is added", kw, quote(nv)))
	case !nin:
		w.loosened(a, kw+"-removed", fmt.Sprintf("%s %s is removed", kw, quote(ov)))
	default:
		w.tightened(a, kw+"-changed", 16, kw, fmt.Sprintf("%s changes from %s to %s", kw, quote(ov), quote(nv)))
	}
}

func (w *walker) uniqueItems(o, n map[string]any, a at) {
	ou, nu := isTrue(o["uniqueItems"]), isTrue(n["uniqueItems"])
	switch {
	case !ou && nu:
		w.tightened(a, "uniqueItems-added", 17, "uniqueItems", "uniqueItems is required")
	case ou && !nu:
		w.loosened(a, "uniqueItems-removed", "uniqueItems is no longer required")
	}
}

// combinator compares allOf/anyOf/oneOf/not as whole values (see the package documentation).
func (w *walker) combinator(o, n map[string]any, a at, kw string) {
	ov, oin := o[kw]
	nv, nin := n[kw]
	if oin == nin && equal(ov, nv) {
		return
	}
	switch {
	case !oin:
		w.tightened(a, kw+"-added", 16, kw, kw+" is added")
		return
	case !nin:
		w.loosened(a, kw+"-removed", kw+" is removed")
		return
	}
	oe, ok1 := ov.([]any)
	ne, ok2 := nv.([]any)
	if ok1 && ok2 && (kw == "allOf" || kw == "anyOf") {
		oldInNew, newInOld := subset(oe, ne), subset(ne, oe)
		// allOf: more entries = fewer values; anyOf: fewer branches = fewer values.
		if (kw == "allOf" && oldInNew) || (kw == "anyOf" && newInOld) {
			w.tightened(a, kw+"-tightened", 16, kw, kw+" now accepts fewer values")
			return
		}
		if (kw == "allOf" && newInOld) || (kw == "anyOf" && oldInNew) {
			w.loosened(a, kw+"-loosened", kw+" now accepts more values")
			return
		}
	}
	c := Change{Path: a.path, Field: a.field, Rule: kw + "-changed", Row: 18,
		Check: Violations, Keywords: []string{kw}, IfClean: Acknowledge, IfAffected: Acknowledge,
		Ack: AckReadersHandleWiderValues,
		Message: fmt.Sprintf("%s of %s changes in a way strata does not classify: it may accept values "+
			"readers do not expect, and stored objects violating it are listed as the impact", kw, a.field)}
	if a.userOnly {
		c.Ack, c.IfClean, c.IfAffected = "", Accept, Accept
	}
	w.add(c)
}

// subset reports whether every element of small is (as JSON) an element of big.
func subset(small, big []any) bool {
	have := map[string]bool{}
	for _, e := range big {
		have[canon(e)] = true
	}
	for _, e := range small {
		if !have[canon(e)] {
			return false
		}
	}
	return true
}

func (w *walker) listMapKeys(o, n map[string]any, a at) {
	ov, oin := o["x-list-map-keys"]
	nv, nin := n["x-list-map-keys"]
	if oin == nin && equal(ov, nv) {
		return
	}
	old := "none"
	if oin {
		old = quote(ov)
	}
	w.add(Change{Path: a.path, Field: a.field, Rule: "list-map-keys-changed", Row: 17,
		IfClean: Reject, IfAffected: Reject,
		Message: fmt.Sprintf("the list map keys of %s change from %s: stored lists would be correlated "+
			"(and deduplicated) differently", a.field, old),
		WayForward: fmt.Sprintf("keep x-list-map-keys %s on `%s`; add a new list field (e.g. `%sV2`) with the "+
			"new keys and mark `%s` deprecated: true", old, a.name, a.name, a.name)})
}

// other compares keywords outside the structural subset as whole values.
func (w *walker) other(o, n map[string]any, a at) {
	keys := map[string]bool{}
	for k := range o {
		keys[k] = true
	}
	for k := range n {
		keys[k] = true
	}
	for _, k := range sortedKeys(asAnyMap(keys)) {
		if handled[k] || annotations[k] || strings.HasPrefix(k, "x-") || k == "deprecated" {
			continue
		}
		ov, oin := o[k]
		nv, nin := n[k]
		if oin == nin && equal(ov, nv) {
			continue
		}
		c := Change{Path: a.path, Field: a.field, Rule: k + "-changed", Row: 18,
			Check: Violations, Keywords: []string{k}, IfClean: Acknowledge, IfAffected: Acknowledge,
			Ack: AckReadersHandleWiderValues,
			Message: fmt.Sprintf("the keyword %q of %s changes; strata does not classify it, so it is "+
				"treated as possibly widening, and stored objects violating it are listed as the impact",
				fault.Truncate(k, 80), a.field)}
		if a.userOnly {
			c.Ack, c.IfClean, c.IfAffected = "", Accept, Accept
		}
		w.add(c)
	}
}

func asAnyMap(set map[string]bool) map[string]any {
	m := make(map[string]any, len(set))
	for k := range set {
		m[k] = nil
	}
	return m
}

// openness is whether an object node accepts keys it does not declare.
type openness int

const (
	closed    openness = iota // strata's default for objects
	open                      // additionalProperties: true or x-preserve-unknown-fields: true
	schemaful                 // additionalProperties: {schema}
)

func opennessOf(m map[string]any) openness {
	if isTrue(m["x-preserve-unknown-fields"]) {
		return open
	}
	switch ap := m["additionalProperties"].(type) {
	case bool:
		if ap {
			return open
		}
	case map[string]any:
		return schemaful
	}
	return closed
}

// openness compares the content model (rows 17, 18) and recurses into additionalProperties.
func (w *walker) openness(o, n map[string]any, a at, depth int) {
	os, ns := opennessOf(o), opennessOf(n)
	op, np := isTrue(o["x-preserve-unknown-fields"]), isTrue(n["x-preserve-unknown-fields"])
	switch {
	case os == ns:
		if os == schemaful {
			w.node(asMap(o["additionalProperties"]), asMap(n["additionalProperties"]), a.child("additionalProperties"), depth+1)
		}
	case op && !np:
		w.tightened(a, "preserve-unknown-fields-removed", 17, "additionalProperties",
			"x-preserve-unknown-fields is removed, so undeclared keys are refused")
	case !op && np:
		w.loosened(a, "preserve-unknown-fields-added", "x-preserve-unknown-fields is added, so any key is accepted")
	case ns == open || (ns == schemaful && os == closed):
		w.loosened(a, "additionalProperties-loosened", "additionalProperties accepts more keys")
	default: // open → schemaful/closed, schemaful → closed
		w.tightened(a, "additionalProperties-tightened", 17, "additionalProperties",
			"additionalProperties accepts fewer keys or values")
	}
}

// items compares the item schemas of arrays.
func (w *walker) items(o, n map[string]any, a at, depth int) {
	ov, oin := o["items"]
	nv, nin := n["items"]
	if oin == nin && equal(ov, nv) {
		return
	}
	om, ok1 := ov.(map[string]any)
	nm, ok2 := nv.(map[string]any)
	switch {
	case ok1 && ok2:
		w.node(om, nm, a.child("items"), depth+1)
	case !nin || isTrue(nv):
		w.loosened(a, "items-removed", "the item schema is removed")
	default:
		w.tightened(a, "items-changed", 17, "items", "the item schema is added or replaced")
	}
}

func isTombstone(v any) bool { return isTrue(asMap(v)["x-removed"]) }

// strip removes what does not affect stored data or validation, for comparing two property
// schemas as a whole (renames, tombstones).
func strip(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if annotations[k] || k == "deprecated" || k == "x-aliases" || k == "x-user-only" {
			continue
		}
		out[k] = v
	}
	return out
}

// properties compares the properties of an object node and its required list (rows 1–10).
func (w *walker) properties(o, n map[string]any, a at, depth int) {
	op := asMap(o["properties"])
	np := asMap(n["properties"])
	oreq, nreq := stringSet(o["required"]), stringSet(n["required"])
	parentOpen := opennessOf(o) != closed

	// Renames: a new alias on a live property pointing at a property that was live and is now
	// gone or tombstoned. renamedFrom maps the new name to the old, renamedTo the reverse.
	renamedFrom, renamedTo := map[string]string{}, map[string]string{}
	for _, name := range sortedKeys(np) {
		ns := asMap(np[name])
		if isTombstone(ns) {
			continue
		}
		oldAliases := stringSet(asMap(op[name])["x-aliases"])
		for _, alias := range stringList(ns["x-aliases"]) {
			prev, existed := op[alias]
			if !existed || alias == name || oldAliases[alias] {
				continue
			}
			if _, taken := renamedTo[alias]; taken {
				continue
			}
			if isTombstone(prev) {
				w.add(Change{Path: a.property(name).path, Field: a.property(name).field,
					Rule: "alias-revives-tombstone", Row: 8, IfClean: Reject, IfAffected: Reject,
					Message: fmt.Sprintf("`%s` gets the alias `%s`, a tombstoned property: its hidden stored "+
						"values would reappear as `%s`", name, alias, name),
					WayForward: fmt.Sprintf("remove `%s` from the x-aliases of `%s`; tombstoned names stay "+
						"reserved and their data stays dropped", alias, name)})
				continue
			}
			if later, inNew := np[alias]; inNew && !isTombstone(later) {
				continue // still a live property: not a rename (the schema package refuses this)
			}
			renamedFrom[name], renamedTo[alias] = alias, name
			break
		}
	}

	names := map[string]any{}
	for k := range op {
		names[k] = nil
	}
	for k := range np {
		names[k] = nil
	}
	for _, name := range sortedKeys(names) {
		ov, inOld := op[name]
		nv, inNew := np[name]
		pa := a.property(name)
		switch {
		case inOld && !inNew:
			if _, renamed := renamedTo[name]; renamed {
				continue
			}
			if isTombstone(ov) {
				w.add(Change{Path: pa.path, Field: pa.field, Rule: "tombstone-removed", Row: 8,
					IfClean: Reject, IfAffected: Reject,
					Message: fmt.Sprintf("the tombstone of `%s` is deleted: the name would become free, and "+
						"re-adding it later would resurrect stale stored values", name),
					WayForward: fmt.Sprintf("keep `%s` in the schema with x-removed: true; the name stays reserved", name)})
			} else {
				w.add(Change{Path: pa.path, Field: pa.field, Rule: "property-removed", Row: 10,
					IfClean: Reject, IfAffected: Reject,
					Message: fmt.Sprintf("`%s` (%s) is deleted from the schema: names can never be deleted, "+
						"stored values would be orphaned and readers would lose them", name, pa.field),
					WayForward: fmt.Sprintf("mark `%s` x-removed: true instead (after deprecated: true); the name "+
						"stays reserved. To rename it, add the new property with x-aliases: [%q]", name, name)})
			}
		case !inOld && inNew:
			if src, renamed := renamedFrom[name]; renamed {
				w.renamed(asMap(op[src]), asMap(nv), src, pa, depth)
				continue
			}
			w.added(asMap(nv), name, pa, nreq[name], parentOpen)
		default:
			w.both(asMap(ov), asMap(nv), name, pa, renamedTo, renamedFrom, depth)
		}
	}

	// Required: added entries of new properties in a closed parent are rows 4/5 (w.added).
	reqNames := map[string]any{}
	for k := range oreq {
		reqNames[k] = nil
	}
	for k := range nreq {
		reqNames[k] = nil
	}
	for _, name := range sortedKeys(reqNames) {
		pa := a.property(name)
		nv, inNew := np[name]
		_, inOld := op[name]
		wasRequired := oreq[name]
		if src, renamed := renamedFrom[name]; renamed {
			wasRequired, inOld = oreq[src], true
		}
		if _, renamed := renamedTo[name]; renamed || isTombstone(nv) {
			continue
		}
		switch {
		case nreq[name] && !wasRequired:
			if !inOld && !parentOpen {
				continue
			}
			if _, hasDefault := asMap(nv)["default"]; hasDefault {
				w.add(Change{Path: pa.path, Field: pa.field, Rule: "required-added", Row: 6,
					IfClean: Accept, IfAffected: Accept,
					Message: fmt.Sprintf("%s becomes required; it has a default, so stored objects without "+
						"it read the default and clients may still omit it", pa.field)})
				continue
			}
			w.add(Change{Path: pa.path, Field: pa.field, Rule: "required-added", Row: 6,
				Check: Absent, Ack: AckNewWritesOnly, IfClean: Accept, IfAffected: Acknowledge,
				Message: fmt.Sprintf("%s becomes required: stored objects without it stay readable (readers "+
					"must handle its absence) but any update touching their parent object must add it", pa.field),
				WayForward: fmt.Sprintf("give `%s` a default, or set it on the objects listed in the impact, "+
					"or acknowledge %s", name, AckNewWritesOnly)})
		case wasRequired && !nreq[name]:
			if !inNew {
				continue // the removal is reported at the property
			}
			w.add(Change{Path: pa.path, Field: pa.field, Rule: "required-removed", Row: 7,
				Ack: AckReadersHandleAbsence, IfClean: Acknowledge, IfAffected: Acknowledge,
				Message: fmt.Sprintf("%s becomes optional: new objects may omit it, and readers that "+
					"assume it is present will break", pa.field),
				WayForward: fmt.Sprintf("make every reader handle an absent `%s` first, then acknowledge %s",
					name, AckReadersHandleAbsence)})
		}
	}
}

// added classifies a property that is new in this revision (rows 1–5, 8 for a new tombstone).
func (w *walker) added(ns map[string]any, name string, pa at, required, parentOpen bool) {
	_, hasDefault := ns["default"]
	switch {
	case isTombstone(ns):
		w.add(Change{Path: pa.path, Field: pa.field, Rule: "property-tombstoned", Row: 8,
			Check: Present, Ack: AckDropData, IfClean: Accept, IfAffected: Acknowledge,
			Message:    fmt.Sprintf("`%s` is reserved as a tombstone; stored values under that name are hidden on read and dropped on the next write", name),
			WayForward: fmt.Sprintf("migrate the values of %s of the objects listed in the impact elsewhere, or acknowledge %s", pa.field, AckDropData)})
	case parentOpen:
		w.add(Change{Path: pa.path, Field: pa.field, Rule: "property-added-to-open-object", Row: 2,
			Check: Violations, Keywords: validationKeywords(ns), IfClean: Accept, IfAffected: Reject,
			Message: fmt.Sprintf("`%s` is declared in an object that accepted undeclared keys: stored objects "+
				"may already hold `%s` with a value the new schema refuses", name, name),
			WayForward: fmt.Sprintf("choose another name than `%s`, or first rewrite %s of the objects listed "+
				"in the impact to fit the new schema", name, pa.field)})
	case required && !hasDefault:
		w.add(Change{Path: pa.path, Field: pa.field, Rule: "required-property-added", Row: 5,
			Check: Absent, Ack: AckNewWritesOnly, IfClean: Accept, IfAffected: Acknowledge,
			Message: fmt.Sprintf("required `%s` is added without a default: stored objects lack it (readers "+
				"must handle its absence) and any update touching their parent object must add it", name),
			WayForward: fmt.Sprintf("give `%s` a default, or make it optional, or acknowledge %s", name, AckNewWritesOnly)})
	case required:
		w.add(Change{Path: pa.path, Field: pa.field, Rule: "required-property-added-with-default", Row: 4,
			IfClean: Accept, IfAffected: Accept,
			Message: fmt.Sprintf("required `%s` is added with the default %s: stored objects read the default, "+
				"clients may omit it", name, quote(ns["default"]))})
	case hasDefault:
		w.add(Change{Path: pa.path, Field: pa.field, Rule: "property-added-with-default", Row: 3,
			IfClean: Accept, IfAffected: Accept,
			Message: fmt.Sprintf("optional `%s` is added with the default %s: stored objects read the default "+
				"until they are next written", name, quote(ns["default"]))})
	default:
		w.add(Change{Path: pa.path, Field: pa.field, Rule: "property-added", Row: 1,
			IfClean: Accept, IfAffected: Accept,
			Message: fmt.Sprintf("optional `%s` is added; old readers ignore it", name)})
	}
}

// validationKeywords lists the keywords of a new property's schema that stored data can violate.
// "required" is left out on purpose: at the property's own pointer it would count the missing
// property itself; missing children are reported below /properties/ and counted through it.
func validationKeywords(ns map[string]any) []string {
	var kws []string
	for _, k := range sortedKeys(ns) {
		if annotations[k] || strings.HasPrefix(k, "x-") || k == "default" || k == "deprecated" || k == "required" {
			continue
		}
		kws = append(kws, k)
	}
	types := typeSet(ns)
	if (types == nil || types["object"]) && !isTrue(ns["x-preserve-unknown-fields"]) && ns["additionalProperties"] == nil {
		kws = append(kws, "additionalProperties") // closed by default: unknown stored keys violate it
		sort.Strings(kws)
	}
	return kws
}

// renamed classifies a rename by alias (row 9).
func (w *walker) renamed(os, ns map[string]any, src string, pa at, depth int) {
	c := Change{Path: pa.path, Field: pa.field, Rule: "property-renamed", Row: 9,
		Ack: AckReadersUpgraded, IfClean: Acknowledge, IfAffected: Acknowledge,
		Message: fmt.Sprintf("`%s` is renamed to `%s` (x-aliases): stored values are presented under the new "+
			"name; readers that only know `%s` lose them", src, pa.name, src),
		WayForward: fmt.Sprintf("upgrade every reader of `%s` to read `%s` first, then acknowledge %s",
			src, pa.name, AckReadersUpgraded)}
	if canon(strip(os)) != canon(strip(ns)) {
		sub := &walker{}
		sub.node(os, ns, pa, depth+1)
		var bad []string
		for _, s := range sub.out {
			switch s.Row {
			case 1, 3, 7, 11, 14, 18:
			default:
				bad = append(bad, s.Rule+" at "+s.Field)
			}
		}
		if len(bad) > 0 {
			c.Ack, c.IfClean, c.IfAffected = "", Reject, Reject
			c.Message = fmt.Sprintf("`%s` is renamed to `%s`, but its schema changes incompatibly (%s): "+
				"stored values of `%s` might not fit `%s`", src, pa.name, strings.Join(bad, "; "), src, pa.name)
			c.WayForward = fmt.Sprintf("give `%s` exactly the schema of `%s` (or a widening of it) for the rename, "+
				"and change it in a later revision; or add `%s` without the alias and deprecate `%s`",
				pa.name, src, pa.name, src)
		} else {
			c.Message += "; its schema is widened, which the same readers must accept"
		}
	}
	w.add(c)
}

// both classifies a property present in both revisions (rows 8, 9) and recurses into it.
func (w *walker) both(os, ns map[string]any, name string, pa at, renamedTo, renamedFrom map[string]string, depth int) {
	ot, nt := isTombstone(os), isTombstone(ns)
	switch {
	case ot && !nt:
		w.add(Change{Path: pa.path, Field: pa.field, Rule: "tombstone-reverted", Row: 8,
			IfClean: Reject, IfAffected: Reject,
			Message: fmt.Sprintf("`%s` was removed (x-removed) and would come back: stale stored values would "+
				"be resurrected", name),
			WayForward: fmt.Sprintf("keep `%s` tombstoned; add a property with a new name instead", name)})
	case ot && nt:
		if canon(strip(os)) != canon(strip(ns)) {
			w.add(Change{Path: pa.path, Field: pa.field, Rule: "tombstone-changed", Row: 8,
				IfClean: Reject, IfAffected: Reject,
				Message:    fmt.Sprintf("the schema of the tombstoned `%s` changes; a tombstone is frozen", name),
				WayForward: fmt.Sprintf("restore the previous schema of `%s`; add a property with a new name instead", name)})
		}
	case nt:
		if _, renamed := renamedTo[name]; renamed {
			return // reported as the rename
		}
		w.add(Change{Path: pa.path, Field: pa.field, Rule: "property-tombstoned", Row: 8,
			Check: Present, Ack: AckDropData, IfClean: Accept, IfAffected: Acknowledge,
			Message: fmt.Sprintf("`%s` is removed (x-removed): stored values are hidden on read and dropped on "+
				"the next write; the name stays reserved", name),
			WayForward: fmt.Sprintf("migrate %s of the objects listed in the impact elsewhere first, or "+
				"acknowledge %s", pa.field, AckDropData)})
	default:
		switch od, nd := isTrue(os["deprecated"]), isTrue(ns["deprecated"]); {
		case !od && nd:
			w.add(Change{Path: pa.path, Field: pa.field, Rule: "property-deprecated", Row: 8,
				IfClean: Accept, IfAffected: Accept,
				Message: fmt.Sprintf("`%s` is deprecated: writes still accept it with a warning", name)})
		case od && !nd:
			w.add(Change{Path: pa.path, Field: pa.field, Rule: "property-undeprecated", Row: 8,
				IfClean: Accept, IfAffected: Accept,
				Message: fmt.Sprintf("`%s` is no longer deprecated", name)})
		}
		newAliases := stringSet(ns["x-aliases"])
		for _, alias := range stringList(os["x-aliases"]) {
			if !newAliases[alias] {
				w.add(Change{Path: pa.path, Field: pa.field, Rule: "alias-removed", Row: 9,
					IfClean: Reject, IfAffected: Reject,
					Message: fmt.Sprintf("the alias `%s` of `%s` is removed: stored objects still holding `%s` "+
						"would lose the value", alias, name, alias),
					WayForward: fmt.Sprintf("keep `%s` in the x-aliases of `%s`; aliases are as permanent as names", alias, name)})
				newAliases[alias] = true
			}
		}
		if src, merged := renamedFrom[name]; merged {
			w.add(Change{Path: pa.path, Field: pa.field, Rule: "alias-merges-properties", Row: 9,
				IfClean: Reject, IfAffected: Reject,
				Message: fmt.Sprintf("the existing `%s` gets the alias `%s` of a removed property: objects "+
					"holding both would conflict", name, src),
				WayForward: fmt.Sprintf("keep `%s` (deprecated, later x-removed) and migrate its values to `%s` "+
					"explicitly; use x-aliases only for a new property", src, name)})
			return
		}
		w.node(os, ns, pa, depth+1)
	}
}
