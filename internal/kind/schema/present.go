package schema

import (
	"encoding/json"
)

// Present is the read pipeline. It never fails and never validates: on a stored spec (decoded
// JSON, numbers as json.Number) it maps aliased old names to canonical names (x-aliases; when both
// are stored the canonical one wins), hides tombstoned fields (x-removed: true), and fills current
// defaults into ABSENT fields top-down (an explicit null is defaulted only if the field is not
// nullable). Nothing is persisted: the stored object changes only on its next write. Input of an
// unexpected shape passes through untouched. It returns a new value and does not mutate spec.
func (s *Schema) Present(spec any) any {
	return present(s.root, deepCopy(spec))
}

// present applies the read pipeline in place to a value the caller owns.
func present(n *node, v any) any {
	switch val := v.(type) {
	case map[string]any:
		if n == nil || !n.allows("object") {
			return v
		}
		for _, name := range n.names {
			c := n.props[name]
			if c == nil {
				continue
			}
			for _, a := range c.aliases {
				if av, ok := val[a]; ok {
					if _, has := val[name]; !has {
						val[name] = av
					}
					delete(val, a)
				}
			}
			if c.removed {
				delete(val, name)
				continue
			}
			cur, has := val[name]
			if c.hasDefault && (!has || (cur == nil && !c.nullable())) {
				val[name] = deepCopy(c.def)
			}
			if cv, ok := val[name]; ok {
				val[name] = present(c, cv)
			}
		}
		if n.addl != nil {
			for k, e := range val {
				if _, known := n.props[k]; !known {
					val[k] = present(n.addl, e)
				}
			}
		}
	case []any:
		if n == nil || n.items == nil || !n.allows("array") {
			return v
		}
		for i, e := range val {
			val[i] = present(n.items, e)
		}
	}
	return v
}

// canonical rewrites, in place, the numbers of integer-only fields without fraction or exponent
// (1.0 → 1, 1e2 → 100). JSON Schema calls 1.0 an integer, but Go's encoding/json cannot decode the
// literal 1.0 into an int field, so a typed reader of the kind would fail on the stored object.
// Other numbers keep their text, so json.Number precision (12345678901234567890) survives.
func canonical(n *node, v any) any {
	switch val := v.(type) {
	case map[string]any:
		if n == nil {
			return v
		}
		for k, e := range val {
			if c := n.child(k); c != nil {
				val[k] = canonical(c, e)
			}
		}
	case []any:
		if n == nil || n.items == nil {
			return v
		}
		for i, e := range val {
			val[i] = canonical(n.items, e)
		}
	case json.Number:
		if !n.integerOnly() {
			return v
		}
		d, ok := parseDecimal(string(val))
		if !ok || !d.integral() {
			return v
		}
		if t := d.integerText(); t != string(val) {
			return json.Number(t)
		}
	}
	return v
}
