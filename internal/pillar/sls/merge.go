package sls

import (
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// mergeRecurse is Salt's merge with the default "smart" strategy for a jinja|yaml
// renderer, i.e. dictupdate.merge_recurse: a deep copy of lower, updated from higher, where
// two mappings merge key by key and anything else (a scalar, a list, null, a type change)
// is replaced by the higher value; with mergeLists (pillar_merge_lists) two lists become
// the lower list followed by the higher list's items not equal to any item of the lower
// list. It is used only to fold an SLS file's includes, as Salt does at render time; the
// merge of imported rows is strata's own (internal/pillar), and nothing here aliases its
// inputs.
func mergeRecurse(lower, higher map[string]any, mergeLists bool) map[string]any {
	out := deepCopy(lower).(map[string]any)
	update(out, higher, mergeLists)
	return out
}

func update(dest, upd map[string]any, mergeLists bool) {
	for k, v := range upd {
		cur, exists := dest[k]
		dm, dIsMap := cur.(map[string]any)
		um, uIsMap := v.(map[string]any)
		dl, dIsList := cur.([]any)
		ul, uIsList := v.([]any)
		switch {
		case exists && dIsMap && uIsMap:
			update(dm, um, mergeLists)
		case exists && dIsList && uIsList && mergeLists:
			merged := append([]any(nil), dl...)
			for _, item := range ul {
				if !pyIn(item, dl) {
					merged = append(merged, deepCopy(item))
				}
			}
			dest[k] = merged
		default:
			dest[k] = deepCopy(v)
		}
	}
}

// pyIn is Python's `x in list` against the lower list only, as Salt's update tests it.
func pyIn(x any, list []any) bool {
	for _, y := range list {
		if pyEqual(x, y) {
			return true
		}
	}
	return false
}

// pyEqual is Python's == on the values the loader builds: True == 1 == 1.0 (bool is an int
// subclass and ints compare with floats by exact value), containers compare deeply, and a
// string equals only a string.
func pyEqual(a, b any) bool {
	switch a := a.(type) {
	case nil:
		return b == nil
	case string:
		bs, ok := b.(string)
		return ok && a == bs
	case bool, json.Number:
		ra, aok := pyNumber(a)
		rb, bok := pyNumber(b)
		return aok && bok && ra.Cmp(rb) == 0
	case []any:
		bl, ok := b.([]any)
		if !ok || len(a) != len(bl) {
			return false
		}
		for i := range a {
			if !pyEqual(a[i], bl[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, av := range a {
			bv, ok := bm[k]
			if !ok || !pyEqual(av, bv) {
				return false
			}
		}
		return true
	}
	return false
}

// pyNumber is the exact value of a bool or a number: an integer's own value, a float's
// binary value (the double its repr rounds to), so that 2**60 equals the float 2.0**60
// although their decimal spellings differ.
func pyNumber(v any) (*big.Rat, bool) {
	switch v := v.(type) {
	case bool:
		if v {
			return big.NewRat(1, 1), true
		}
		return new(big.Rat), true
	case json.Number:
		s := string(v)
		if !strings.ContainsAny(s, ".eE") {
			r, ok := new(big.Rat).SetString(s)
			return r, ok
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, false
		}
		r := new(big.Rat)
		r.SetFloat64(f)
		return r, true
	}
	return nil, false
}

// truthy is Python's truth value of a loaded value: None, False, zero, "" and empty
// containers are false. Salt's yaml renderer turns a false document into {}, and the
// include loop skips a false included state.
func truthy(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case json.Number:
		r, ok := pyNumber(v)
		return !ok || r.Sign() != 0
	case []any:
		return len(v) > 0
	case map[string]any:
		return len(v) > 0
	}
	return true
}

// deepCopy copies the loader's value types, so that no two rows share a map or a slice.
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = deepCopy(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = deepCopy(x)
		}
		return out
	}
	return v
}
