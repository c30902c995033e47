package schema

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/stratahq/strata/internal/fault"
)

// Admit is the write pipeline, for create (old == nil) and update (old = the stored spec after
// Present). In order:
//
//  1. a field no schema node defines in a closed object ⇒ 400 naming every such field as a
//     "/spec/…" pointer; a tombstoned field (x-removed) ⇒ dropped with a warning; a deprecated
//     field ⇒ kept with a warning;
//  2. old names (x-aliases) are normalised to the canonical name. If several names of one field
//     are sent, the one whose value differs from the stored value wins; if two differ from it and
//     from each other ⇒ 422 naming both (research §5.2 row 9);
//  3. current defaults are applied to absent fields (as Present does);
//  4. validation: full on create; on update an error is ratcheted (becomes a warning) iff its
//     owner node can be correlated with old (object keys present in both; array items only
//     through x-list-map-keys, otherwise the whole array is the owner) and the owner is DeepEqual
//     to its old value, numbers compared numerically, a list map compared as a map (research
//     §5.3). The owner is the value for value keywords, the container for container keywords
//     (required, min/maxItems, uniqueItems, min/maxProperties, additionalProperties), so a new
//     required field without default fails as soon as anything in its parent changes, and the
//     declaring node for anything under allOf/anyOf/oneOf/not; duplicate list-map keys are
//     ratcheted while the stored list had them. These are Kubernetes' verdicts on all 74 cases of
//     testdata/ratchet-k8s-golden.json (TestRatchetingAgreesWithKubernetes);
//  5. numbers of integer-only fields are canonicalised (1.0 → 1) so typed Go readers decode them.
//
// Remaining errors ⇒ 422 with one entry per instance pointer ("/spec/size",
// "maximum: 12 is greater than 10"). Warnings are human strings for HTTP Warning headers. spec
// must be a JSON object; spec and old are not mutated.
func (s *Schema) Admit(spec any, old any) (out any, warnings []string, err error) {
	obj, ok := spec.(map[string]any)
	if !ok {
		return nil, nil, fault.UnprocessableFields("spec does not validate against the kind's schema",
			[]fault.FieldError{{Field: "/spec", Message: "type: expected object, got " + jsonType(spec)}})
	}
	if bad := badNumbers(obj, "/spec", nil); len(bad) > 0 {
		fields := make([]fault.FieldError, 0, len(bad))
		for _, p := range bad {
			fields = append(fields, fault.FieldError{Field: p, Message: numberRangeMessage})
		}
		return nil, nil, fault.UnprocessableFields("spec does not validate against the kind's schema", fields)
	}
	value := deepCopy(obj)

	var unknown []fault.FieldError
	screen(s.root, value, nil, &unknown, &warnings)
	if len(unknown) > 0 {
		return nil, nil, fault.InvalidFields("spec has fields the kind's schema does not define", unknown)
	}
	if conflicts := resolveAliases(s.root, value, old, nil); len(conflicts) > 0 {
		return nil, nil, fault.UnprocessableFields("spec sets a renamed field under two names", conflicts)
	}
	value = present(s.root, value)

	var fields []fault.FieldError
	for _, f := range s.failures(value) {
		ratchet := old != nil && unchanged(s.root, f.at, value, old)
		if f.duplicateKeys && old != nil {
			ratchet = stillDuplicated(s.root, f.at, value, old)
		}
		for _, fi := range f.findings {
			if ratchet {
				warnings = append(warnings, fmt.Sprintf("%s: unchanged value still violates %s (allowed because it was stored before)", fi.Instance, fi.constraint))
			} else {
				fields = append(fields, fault.FieldError{Field: fi.Instance, Message: fi.Message})
			}
		}
	}
	if len(fields) > 0 {
		return nil, nil, fault.UnprocessableFields("spec does not validate against the kind's schema", fields)
	}
	return canonical(s.root, value), warnings, nil
}

// screen is step 1 of Admit, in place on the caller's copy: it collects unknown fields of closed
// objects, drops tombstoned fields and warns about deprecated and renamed ones.
func screen(n *node, v any, path []string, unknown *[]fault.FieldError, warnings *[]string) {
	switch val := v.(type) {
	case map[string]any:
		if n == nil || !n.allows("object") {
			return
		}
		for _, k := range sortedKeys(val) {
			sub := append(path, k)
			at := func() string { return joinPointer("/spec", sub...) }
			if c := n.prop(k); c != nil {
				q := fault.Truncate(k, 64)
				switch {
				case c.removed:
					delete(val, k)
					*warnings = append(*warnings, fmt.Sprintf("%s: field %q was removed from the kind's schema; the value was dropped", at(), q))
					continue
				case c.deprecated:
					*warnings = append(*warnings, fmt.Sprintf("%s: field %q is deprecated", at(), q))
				}
				if _, current := n.props[k]; !current {
					*warnings = append(*warnings, fmt.Sprintf("%s: field %q was renamed to %q; the value is stored under the new name", at(), q, n.aliasOf[k]))
				}
				screen(c, val[k], sub, unknown, warnings)
				continue
			}
			if n.addl != nil {
				screen(n.addl, val[k], sub, unknown, warnings)
				continue
			}
			if n.addlOpen || n.preserve {
				continue
			}
			*unknown = append(*unknown, fault.FieldError{Field: at(), Message: fmt.Sprintf("unknown field %q: the kind's schema does not define it", fault.Truncate(k, 64))})
		}
	case []any:
		if n == nil || n.items == nil || !n.allows("array") {
			return
		}
		for i, e := range val {
			screen(n.items, e, append(path, strconv.Itoa(i)), unknown, warnings)
		}
	}
}

// resolveAliases is step 2 of Admit, in place: it stores every renamed field under its canonical
// name. old is the correlated stored value (nil on create), used by the conflict rule.
func resolveAliases(n *node, v any, old any, path []string) []fault.FieldError {
	if n == nil || !n.aliasesBelow {
		return nil
	}
	var errs []fault.FieldError
	switch val := v.(type) {
	case map[string]any:
		if n == nil || !n.allows("object") {
			return nil
		}
		oldObj, _ := old.(map[string]any)
		for _, name := range n.names {
			c := n.props[name]
			if c == nil || len(c.aliases) == 0 {
				continue
			}
			var sent []string
			if _, ok := val[name]; ok {
				sent = append(sent, name)
			}
			for _, a := range c.aliases {
				if _, ok := val[a]; ok {
					sent = append(sent, a)
				}
			}
			if len(sent) == 0 || (len(sent) == 1 && sent[0] == name) {
				continue
			}
			oldV, hadOld := oldObj[name]
			var changed []string
			for _, k := range sent {
				if !hadOld || !equalJSON(val[k], oldV) {
					changed = append(changed, k)
				}
			}
			winner := sent[0]
			if len(changed) > 0 {
				winner = changed[0]
				conflict := false
				for _, k := range changed[1:] {
					if !equalJSON(val[k], val[winner]) {
						conflict = true
					}
				}
				if conflict {
					for _, k := range changed {
						errs = append(errs, fault.FieldError{Field: joinPointer("/spec", append(path, k)...), Message: fmt.Sprintf(
							"%q is one field under several names (renamed from %v) and they were set to different values; send one of them", fault.Truncate(name, 64), c.aliases)})
					}
					continue
				}
			}
			w := val[winner]
			for _, k := range sent {
				delete(val, k)
			}
			val[name] = w
		}
		for _, k := range sortedKeys(val) {
			var o any
			if oldObj != nil {
				o = oldObj[k]
			}
			errs = append(errs, resolveAliases(n.child(k), val[k], o, append(path, k))...)
		}
	case []any:
		if n == nil || n.items == nil || !n.allows("array") {
			return nil
		}
		oldArr, _ := old.([]any)
		for i, e := range val {
			var o any
			if len(n.listMapKeys) > 0 {
				o, _ = findByKeys(oldArr, e, n.listMapKeys)
			} else if i < len(oldArr) {
				o = oldArr[i]
			}
			errs = append(errs, resolveAliases(n.items, e, o, append(path, strconv.Itoa(i)))...)
		}
	}
	return errs
}

// unchanged reports whether the value at instance location at (the owner of a failing keyword)
// can be correlated with old and is DeepEqual to it. Object steps need the key in both values;
// array steps need x-list-map-keys to find the old item, otherwise the array as a whole is
// compared (an atomic list is unchanged only if every element is).
func unchanged(n *node, at []string, nv, ov any) bool {
	for _, tok := range at {
		switch val := nv.(type) {
		case map[string]any:
			om, ok := ov.(map[string]any)
			if !ok {
				return false
			}
			o, ok := om[tok]
			if !ok {
				return false
			}
			nv, ov = val[tok], o
			n = n.child(tok)
		case []any:
			oa, ok := ov.([]any)
			if !ok {
				return false
			}
			if n == nil || len(n.listMapKeys) == 0 {
				return equalJSON(val, oa)
			}
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(val) {
				return false
			}
			o, ok := findByKeys(oa, val[i], n.listMapKeys)
			if !ok {
				return false
			}
			nv, ov = val[i], o
			n = n.items
		default:
			return false
		}
	}
	if na, ok := nv.([]any); ok && n != nil && len(n.listMapKeys) > 0 {
		// A list map is a map: the same items in another order are unchanged (Kubernetes'
		// listType=map).
		oa, ok := ov.([]any)
		if !ok || len(na) != len(oa) {
			return false
		}
		for _, item := range na {
			o, ok := findByKeys(oa, item, n.listMapKeys)
			if !ok || !equalJSON(item, o) {
				return false
			}
		}
		return true
	}
	return equalJSON(nv, ov)
}

// stillDuplicated reports whether every key duplicated in the list map at `at` of nv was
// already duplicated in ov: then the duplicates are the stored object's, and ratcheted.
func stillDuplicated(root *node, at []string, nv, ov any) bool {
	n := root
	for _, tok := range at {
		nm, ok1 := nv.(map[string]any)
		om, ok2 := ov.(map[string]any)
		if !ok1 || !ok2 {
			return false
		}
		nv, ov, n = nm[tok], om[tok], n.child(tok)
	}
	na, ok1 := nv.([]any)
	oa, ok2 := ov.([]any)
	if !ok1 || !ok2 || n == nil || len(n.listMapKeys) == 0 {
		return false
	}
	dups := func(list []any) map[string]bool {
		seen, out := map[string]bool{}, map[string]bool{}
		for _, item := range list {
			m, _ := item.(map[string]any)
			var key []any
			for _, k := range n.listMapKeys {
				key = append(key, m[k])
			}
			b, _ := json.Marshal(key)
			if seen[string(b)] {
				out[string(b)] = true
			}
			seen[string(b)] = true
		}
		return out
	}
	before := dups(oa)
	for k := range dups(na) {
		if !before[k] {
			return false
		}
	}
	return true
}

// findByKeys finds the item of list whose list map keys equal item's.
func findByKeys(list []any, item any, keys []string) (any, bool) {
	if i, ok := firstWithKeys(list, item, keys); ok {
		return list[i], true
	}
	return nil, false
}
