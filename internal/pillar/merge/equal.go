package merge

import (
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// equal is Python's == on decoded JSON, which Salt's list merge uses to skip items the lower
// list already holds, except that booleans equal only booleans (see the package doc).
func equal(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equal(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	if x, ok := a.(json.Number); ok {
		if y, ok := b.(json.Number); ok {
			if x == y {
				return true // same text, the common case: no parsing
			}
			if isIntText(x) && isIntText(y) && x != "-0" && y != "-0" {
				return false // integer literals are canonical but for -0
			}
		}
	}
	na, ok := toNumber(a)
	if !ok {
		return false // a type JSON decoding does not produce: nothing to compare by
	}
	nb, ok := toNumber(b)
	return ok && na.equal(nb)
}

// number is a JSON number as Python's json module reads it: an integer literal (no fraction,
// no exponent) is an exact integer of any size, anything else a float64 (±Inf beyond its range).
type number struct {
	isInt bool
	i     *big.Int
	f     float64
}

func isIntText(n json.Number) bool { return !strings.ContainsAny(string(n), ".eE") }

func toNumber(v any) (number, bool) {
	switch t := v.(type) {
	case json.Number:
		s := string(t)
		if isIntText(t) {
			if i, ok := new(big.Int).SetString(s, 10); ok {
				return number{isInt: true, i: i}, true
			}
			return number{}, false
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && !isRange(err) {
			return number{}, false
		}
		return number{f: f}, true
	case float64:
		return number{f: t}, true
	case float32:
		return number{f: float64(t)}, true
	case int:
		return number{isInt: true, i: big.NewInt(int64(t))}, true
	case int64:
		return number{isInt: true, i: big.NewInt(t)}, true
	case int32:
		return number{isInt: true, i: big.NewInt(int64(t))}, true
	case uint64:
		return number{isInt: true, i: new(big.Int).SetUint64(t)}, true
	}
	return number{}, false
}

// isRange reports an out-of-range float literal, which Python reads as ±inf or 0.0 just as
// ParseFloat returns them.
func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// equal compares exactly, as Python compares int with float: 2**53+1 does not equal the float
// 2**53+1.0, which rounds to 2**53.
func (a number) equal(b number) bool {
	switch {
	case a.isInt && b.isInt:
		return a.i.Cmp(b.i) == 0
	case !a.isInt && !b.isInt:
		return a.f == b.f
	case a.isInt:
		return intEqualsFloat(a.i, b.f)
	default:
		return intEqualsFloat(b.i, a.f)
	}
}

func intEqualsFloat(i *big.Int, f float64) bool {
	if math.IsInf(f, 0) || math.IsNaN(f) || f != math.Trunc(f) {
		return false
	}
	fi, _ := new(big.Float).SetFloat64(f).Int(nil)
	return fi.Cmp(i) == 0
}
