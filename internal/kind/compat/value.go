package compat

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/kind/schema"
)

// maxExponent bounds the decimal exponent handed to big.Rat: "1e999999999" would otherwise make
// a registration (or the fuzzer) allocate gigabytes. Larger numbers fall back to float64.
const maxExponent = 400

// number converts a decoded JSON number to an exact rational, or reports false for non-numbers.
// Numbers compare numerically (1 == 1.0), as JSON Schema does.
func number(v any) (*big.Rat, bool) {
	var s string
	switch n := v.(type) {
	case json.Number:
		s = string(n)
	case float64:
		if math.IsNaN(n) || math.IsInf(n, 0) {
			return nil, false
		}
		return new(big.Rat).SetFloat64(n), true
	case float32:
		return number(float64(n))
	case int:
		return new(big.Rat).SetInt64(int64(n)), true
	case int64:
		return new(big.Rat).SetInt64(n), true
	case int32:
		return new(big.Rat).SetInt64(int64(n)), true
	case uint64:
		return new(big.Rat).SetUint64(n), true
	default:
		return nil, false
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || exp > maxExponent || exp < -maxExponent {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil && !isRangeErr(err) {
				return nil, false
			}
			if math.IsInf(f, 0) || math.IsNaN(f) {
				return nil, false
			}
			return new(big.Rat).SetFloat64(f), true
		}
	}
	if len(s) > 1000 {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// canon renders a decoded JSON value canonically: object keys sorted, numbers normalised, so
// two values are equal as JSON exactly when their canonical forms are equal.
func canon(v any) string {
	var b strings.Builder
	writeCanon(&b, v, 0)
	return b.String()
}

func writeCanon(b *strings.Builder, v any, depth int) {
	if depth > 10000 {
		b.WriteString("…")
		return
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case string:
		b.WriteString(strconv.Quote(x))
	case map[string]any:
		b.WriteByte('{')
		for i, k := range sortedKeys(x) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Quote(k))
			b.WriteByte(':')
			writeCanon(b, x[k], depth+1)
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanon(b, e, depth+1)
		}
		b.WriteByte(']')
	default:
		if r, ok := number(v); ok {
			b.WriteString(r.RatString())
			return
		}
		if n, ok := v.(json.Number); ok {
			b.WriteString("n:" + string(n))
			return
		}
		fmt.Fprintf(b, "?%T:%v", v, v)
	}
}

// equal reports whether two decoded JSON values are equal as JSON (schema.Equal: the same
// comparison ratcheting uses).
func equal(a, b any) bool { return schema.Equal(a, b) }

// quote renders a value for a message, shortened so a huge default does not flood the report.
func quote(v any) string {
	return fault.Truncate(canon(v), 80)
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

func asMap(v any) map[string]any {
	if m, ok := v.(map[string]any); ok {
		return m
	}
	return map[string]any{}
}

func isTrue(v any) bool {
	b, ok := v.(bool)
	return ok && b
}

// stringList returns the strings of a JSON array, ignoring anything else.
func stringList(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, 0, len(arr))
	for _, e := range arr {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func stringSet(v any) map[string]bool {
	set := map[string]bool{}
	for _, s := range stringList(v) {
		set[s] = true
	}
	return set
}

// escapeToken escapes one JSON pointer reference token (RFC 6901).
func escapeToken(s string) string { return schema.PointerToken(s) }

func unescapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// HasValue reports whether spec (an object's decoded spec, already mapped to canonical names)
// holds a value at the schema path: "properties/<k>" steps into key k, "items" into every
// element, "additionalProperties" into every value of an object. A key holding JSON null counts
// as a value: it is stored data. Paths with other steps (allOf, …) hold nothing.
func HasValue(spec any, path string) bool {
	values, ok := instances(spec, path)
	return ok && len(values) > 0
}

// Lacks reports whether some instance of the parent of the schema path (which must end in
// "properties/<k>") exists in spec as an object without key k. A missing parent is not a lack:
// a new required property inside an optional object does not affect objects without that
// object.
func Lacks(spec any, path string) bool {
	parent, key, ok := cutLastProperty(path)
	if !ok {
		return false
	}
	values, ok := instances(spec, parent)
	if !ok {
		return false
	}
	for _, v := range values {
		if m, isObject := v.(map[string]any); isObject {
			if _, has := m[key]; !has {
				return true
			}
		}
	}
	return false
}

func cutLastProperty(path string) (parent, key string, ok bool) {
	i := strings.LastIndex(path, "/")
	if i < 0 {
		return "", "", false
	}
	parent, ok = strings.CutSuffix(path[:i], "/properties")
	if !ok {
		return "", "", false
	}
	return parent, unescapeToken(path[i+1:]), true
}

// instances returns every value of spec the schema path reaches.
func instances(spec any, path string) ([]any, bool) {
	if spec == nil {
		return nil, true
	}
	values := []any{spec}
	if path == "" {
		return values, true
	}
	if !strings.HasPrefix(path, "/") {
		return nil, false
	}
	tokens := strings.Split(path[1:], "/")
	for i := 0; i < len(tokens); i++ {
		var next []any
		switch tokens[i] {
		case "properties":
			if i+1 >= len(tokens) {
				return nil, false
			}
			key := unescapeToken(tokens[i+1])
			i++
			for _, v := range values {
				if m, ok := v.(map[string]any); ok {
					if e, has := m[key]; has {
						next = append(next, e)
					}
				}
			}
		case "items":
			for _, v := range values {
				if arr, ok := v.([]any); ok {
					next = append(next, arr...)
				}
			}
		case "additionalProperties":
			for _, v := range values {
				if m, ok := v.(map[string]any); ok {
					for _, k := range sortedKeys(m) {
						next = append(next, m[k])
					}
				}
			}
		default:
			return nil, false
		}
		values = next
	}
	return values, true
}
