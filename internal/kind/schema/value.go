package schema

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/stratahq/strata/internal/fault"
)

// This file holds the helpers that work on decoded JSON values (map[string]any, []any, string,
// bool, nil and json.Number; float64 and Go integers are tolerated so that a caller decoding
// without UseNumber does not crash the pipelines).

// PointerToken escapes one JSON pointer reference token (RFC 6901).
func PointerToken(tok string) string { return pointerToken(tok) }

// pointerToken implements PointerToken.
func pointerToken(tok string) string {
	if !strings.ContainsAny(tok, "~/") {
		return tok
	}
	tok = strings.ReplaceAll(tok, "~", "~0")
	return strings.ReplaceAll(tok, "/", "~1")
}

// joinPointer appends raw (unescaped) tokens to a JSON pointer.
func joinPointer(ptr string, toks ...string) string {
	var sb strings.Builder
	sb.WriteString(ptr)
	for _, t := range toks {
		sb.WriteByte('/')
		sb.WriteString(pointerToken(t))
	}
	return sb.String()
}

// deepCopy copies a decoded JSON value so that the pipelines never mutate their input (a caller's
// stored object may be cached or shared between goroutines).
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = deepCopy(e)
		}
		return a
	default:
		return v
	}
}

// numberText returns the JSON text of a number value and whether v is a number at all.
func numberText(v any) (string, bool) {
	switch n := v.(type) {
	case json.Number:
		return string(n), true
	case float64:
		if math.IsNaN(n) || math.IsInf(n, 0) {
			return "", false
		}
		return strconv.FormatFloat(n, 'g', -1, 64), true
	case float32:
		return strconv.FormatFloat(float64(n), 'g', -1, 32), true
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(n), true
	}
	return "", false
}

// decimal is a number in normal form: value = (neg ? -1 : 1) * 0.digits * 10^exp, digits without
// leading or trailing zeros (empty for zero). It lets strata compare and canonicalise numbers
// exactly without big.Rat, whose cost grows with the exponent a client chooses.
type decimal struct {
	neg    bool
	digits string
	exp    int
}

// maxExponent bounds the exponent strata accepts in a number. The validator converts numbers to
// big.Rat, which allocates 10^exp; Go refuses exponents beyond ~10^7 and the validator then
// dereferences a nil value. 1000 is far beyond float64's range and cheap to convert.
const maxExponent = 1000

// parseDecimal parses JSON number text. ok is false for text that is not a JSON number or whose
// exponent is outside ±maxExponent.
func parseDecimal(s string) (d decimal, ok bool) {
	if s == "" {
		return d, false
	}
	if s[0] == '-' {
		d.neg = true
		s = s[1:]
	}
	mant, expText := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, expText = s[:i], s[i+1:]
	}
	exp := 0
	if expText != "" {
		if len(expText) > 8 {
			return d, false
		}
		e, err := strconv.Atoi(expText)
		if err != nil {
			return d, false
		}
		exp = e
	}
	if exp > maxExponent || exp < -maxExponent {
		return d, false
	}
	intPart, frac := mant, ""
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		intPart, frac = mant[:i], mant[i+1:]
		if frac == "" {
			return d, false
		}
	}
	if intPart == "" {
		return d, false
	}
	for _, part := range []string{intPart, frac} {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return d, false
			}
		}
	}
	all := intPart + frac
	exp += len(intPart)
	trimmed := strings.TrimLeft(all, "0")
	exp -= len(all) - len(trimmed)
	trimmed = strings.TrimRight(trimmed, "0")
	if trimmed == "" {
		return decimal{}, true
	}
	d.digits = trimmed
	d.exp = exp
	return d, true
}

// integral reports whether the number has no fractional part.
func (d decimal) integral() bool { return d.digits == "" || d.exp >= len(d.digits) }

// integerText formats an integral decimal without fraction or exponent ("1.0" → "1",
// "1.2e3" → "1200"). Only call it on an integral value with a bounded exponent.
func (d decimal) integerText() string {
	if d.digits == "" {
		return "0"
	}
	s := d.digits + strings.Repeat("0", d.exp-len(d.digits))
	if d.neg {
		return "-" + s
	}
	return s
}

// Equal is DeepEqual for decoded JSON: objects compare key by key regardless of order and
// numbers compare numerically, so 1 and 1.0 (or json.Number and float64) are equal. Ratcheting
// and the compatibility diff (package compat) both compare values with it.
func Equal(a, b any) bool { return equalJSON(a, b) }

// equalJSON implements Equal.
func equalJSON(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, av := range a {
			bv, ok := b[k]
			if !ok || !equalJSON(av, bv) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !equalJSON(a[i], b[i]) {
				return false
			}
		}
		return true
	case string:
		b, ok := b.(string)
		return ok && a == b
	case bool:
		b, ok := b.(bool)
		return ok && a == b
	case nil:
		return b == nil
	}
	at, ok := numberText(a)
	if !ok {
		return false
	}
	bt, ok := numberText(b)
	if !ok {
		return false
	}
	if at == bt {
		return true
	}
	ad, aok := parseDecimal(at)
	bd, bok := parseDecimal(bt)
	if !aok || !bok {
		return false
	}
	if ad.digits == "" && bd.digits == "" {
		return true // 0 == -0
	}
	return ad == bd
}

// badNumbers returns the pointers (below prefix) of numbers the validator cannot process safely:
// text that is not a JSON number or has an exponent beyond ±maxExponent.
func badNumbers(v any, prefix string, out []string) []string {
	if allNumbersFine(v) {
		return out
	}
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			out = badNumbers(e, joinPointer(prefix, k), out)
		}
	case []any:
		for i, e := range v {
			out = badNumbers(e, joinPointer(prefix, strconv.Itoa(i)), out)
		}
	case string, bool, nil:
	default:
		t, ok := numberText(v)
		if !ok {
			return append(out, prefix)
		}
		if _, ok := parseDecimal(t); !ok {
			return append(out, prefix)
		}
	}
	return out
}

// describeValue renders a value for a message, quoting user input only up to a bounded length.
func describeValue(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(fault.Truncate(v, 64))
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case bool:
		return strconv.FormatBool(v)
	}
	if t, ok := numberText(v); ok {
		return fault.Truncate(t, 64)
	}
	return fmt.Sprintf("%T", v)
}

// jsonType names the JSON type of a decoded value as JSON Schema does ("integer" for integral
// numbers).
func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	if t, ok := numberText(v); ok {
		if d, ok := parseDecimal(t); ok && d.integral() {
			return "integer"
		}
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// allNumbersFine is the allocation-free fast path of badNumbers: true if every number in v can
// be processed.
func allNumbersFine(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			if !allNumbersFine(e) {
				return false
			}
		}
	case []any:
		for _, e := range v {
			if !allNumbersFine(e) {
				return false
			}
		}
	case string, bool, nil:
	default:
		t, ok := numberText(v)
		if !ok {
			return false
		}
		if _, ok := parseDecimal(t); !ok {
			return false
		}
	}
	return true
}
