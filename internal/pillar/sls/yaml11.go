package sls

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
)

// The implicit resolvers of PyYAML's SafeLoader (yaml/resolver.py), which Salt's loader
// inherits: YAML 1.1's types, as PyYAML spells them. A plain scalar's tag is the first of
// these that matches, in PyYAML's registration order; the first-character tables PyYAML
// uses only speed the search up and never change its result.
var (
	boolRE  = regexp.MustCompile(`^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$`)
	floatRE = regexp.MustCompile(`^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`)
	intRE   = regexp.MustCompile(`^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$`)
	nullRE  = regexp.MustCompile(`^(?:~|null|Null|NULL|)$`)
	tsRE    = regexp.MustCompile(`^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$`)
)

// The YAML tags the loader distinguishes, in yaml.v3's short spelling.
const (
	tagNull      = "!!null"
	tagBool      = "!!bool"
	tagInt       = "!!int"
	tagFloat     = "!!float"
	tagStr       = "!!str"
	tagTimestamp = "!!timestamp"
	tagMerge     = "!!merge"
	tagValue     = "!!value"
	tagMap       = "!!map"
	tagSeq       = "!!seq"
)

// resolvePlain returns the tag PyYAML gives a plain (unquoted) scalar. Python's '$'
// would also match before a final newline, but a plain scalar never ends in one.
func resolvePlain(v string) string {
	if v == "" {
		return tagNull
	}
	switch c := v[0]; {
	case strings.IndexByte("yYnNtTfFoO", c) >= 0 && boolRE.MatchString(v):
		return tagBool
	case strings.IndexByte("-+0123456789.", c) >= 0 && floatRE.MatchString(v):
		return tagFloat
	case strings.IndexByte("-+0123456789", c) >= 0 && intRE.MatchString(v):
		return tagInt
	case v == "<<":
		return tagMerge
	case strings.IndexByte("~nN", c) >= 0 && nullRE.MatchString(v):
		return tagNull
	case c >= '0' && c <= '9' && tsRE.MatchString(v):
		return tagTimestamp
	case v == "=":
		return tagValue
	}
	return tagStr
}

// errNotJSON marks a value Salt reads fine but JSON cannot hold (inf, nan): the import
// must refuse it rather than change it.
var errNotJSON = errors.New("not representable in JSON")

// constructScalar builds the value Salt's SaltYamlSafeLoader builds for a scalar of the
// given tag (resolved or explicit): nil, bool, string or json.Number. Integers keep their
// exact decimal text, of any size; floats are spelled as Python's repr spells them, so
// that "1.0" stays a float and "1e+16" keeps its magnitude when Salt reads the JSON back.
// The error says why Salt (or JSON) cannot take the scalar.
func constructScalar(tag, v string) (any, error) {
	switch tag {
	case tagNull:
		return nil, nil
	case tagBool:
		switch strings.ToLower(v) {
		case "yes", "true", "on":
			return true, nil
		case "no", "false", "off":
			return false, nil
		}
		return nil, fmt.Errorf("%q is not a YAML 1.1 boolean", v)
	case tagInt:
		return constructInt(v)
	case tagFloat:
		return constructFloat(v)
	case tagStr, tagTimestamp, "!!python/unicode":
		// Salt constructs timestamps with construct_scalar, so dates stay strings.
		return v, nil
	case tagMerge, tagValue:
		return nil, fmt.Errorf("plain %q is YAML 1.1's %s indicator, for which Salt's loader has no constructor", v, strings.TrimPrefix(tag, "!!"))
	}
	return nil, fmt.Errorf("tag %s: Salt's loader has no constructor for it", tag)
}

// constructInt is PyYAML's construct_yaml_int behind Salt's construct_scalar, which
// strips the leading zeros of an unsigned "0..." integer that is not 0b/0x: so 010 is 10
// in Salt (8 in plain PyYAML), while -010 and +010 still go through PyYAML's octal branch
// and are -8 and 8.
func constructInt(v string) (any, error) {
	if v != "0" && strings.HasPrefix(v, "0") && !strings.HasPrefix(v, "0b") && !strings.HasPrefix(v, "0x") {
		v = strings.TrimLeft(v, "0")
		if v == "" {
			v = "0"
		}
	}
	v = strings.ReplaceAll(v, "_", "")
	if v == "" {
		return nil, errors.New("an integer of only zeros and underscores: PyYAML fails on it (IndexError)")
	}
	neg := false
	switch v[0] {
	case '-':
		neg = true
		v = v[1:]
	case '+':
		v = v[1:]
	}
	n := new(big.Int)
	ok := true
	switch {
	case v == "0":
	case strings.HasPrefix(v, "0b"):
		_, ok = n.SetString(v[2:], 2)
	case strings.HasPrefix(v, "0x"):
		_, ok = n.SetString(v[2:], 16)
	case strings.HasPrefix(v, "0"):
		_, ok = n.SetString(v, 8)
	case strings.Contains(v, ":"):
		base := big.NewInt(1)
		parts := strings.Split(v, ":")
		for k := len(parts) - 1; k >= 0; k-- {
			d, dok := new(big.Int).SetString(parts[k], 10)
			if !dok {
				ok = false
				break
			}
			n.Add(n, d.Mul(d, base))
			base.Mul(base, big.NewInt(60))
		}
	default:
		_, ok = n.SetString(v, 10)
	}
	if !ok {
		return nil, fmt.Errorf("%q is not an integer Python's int() accepts", v)
	}
	if neg {
		n.Neg(n)
	}
	return json.Number(n.String()), nil
}

// constructFloat is PyYAML's construct_yaml_float. The sexagesimal form sums its parts in
// PyYAML's order so that rounding is the same.
func constructFloat(v string) (any, error) {
	v = strings.ToLower(strings.ReplaceAll(v, "_", ""))
	if v == "" {
		return nil, errors.New("an empty float")
	}
	sign := 1.0
	switch v[0] {
	case '-':
		sign = -1
		v = v[1:]
	case '+':
		v = v[1:]
	}
	var f float64
	switch {
	case v == ".inf":
		return nil, fmt.Errorf("infinity is %w", errNotJSON)
	case v == ".nan":
		return nil, fmt.Errorf("nan is %w", errNotJSON)
	case strings.Contains(v, ":"):
		parts := strings.Split(v, ":")
		base := 1.0
		for k := len(parts) - 1; k >= 0; k-- {
			d, err := pyFloat(parts[k])
			if err != nil {
				return nil, err
			}
			f += d * base
			base *= 60
		}
		f *= sign
	default:
		d, err := pyFloat(v)
		if err != nil {
			return nil, err
		}
		f = sign * d
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("%q is %v in Python, which is %w", v, f, errNotJSON)
	}
	return json.Number(pyRepr(f)), nil
}

// pyFloat is Python's float() for the lower-cased strings the float resolver (or an
// explicit !!float tag) lets through: digits, one '.', an optional signed exponent, or an
// inf/nan spelling, which the caller refuses. strconv.ParseFloat rounds exactly as Python
// does; its extras (hex floats, underscores) are refused first, as Python refuses them.
func pyFloat(s string) (float64, error) {
	switch s {
	case "inf", "infinity":
		return math.Inf(1), nil
	case "nan":
		return math.NaN(), nil
	}
	if s == "" || strings.ContainsAny(s, "xpXP_in") {
		return 0, fmt.Errorf("%q is not a float Python's float() accepts", s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return f, nil // ±Inf or 0 as Python gives; the caller refuses Inf
		}
		return 0, fmt.Errorf("%q is not a float Python's float() accepts", s)
	}
	return f, nil
}

// pyRepr spells a finite float as Python's repr does: the shortest digits that round
// trip, in positional notation when the decimal exponent is in (-4, 16] and always with a
// ".0" when there is no fraction, otherwise in scientific notation with at least two
// exponent digits ("1e-05", "1.5e+16").
func pyRepr(f float64) string {
	e := strconv.FormatFloat(f, 'e', -1, 64) // "-d.ddde±XX"
	neg := strings.HasPrefix(e, "-")
	e = strings.TrimPrefix(e, "-")
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	decpt := exp + 1 // value = 0.digits × 10^decpt
	var out string
	switch {
	case decpt > -4 && decpt <= 16:
		switch {
		case decpt <= 0:
			out = "0." + strings.Repeat("0", -decpt) + digits
		case decpt >= len(digits):
			out = digits + strings.Repeat("0", decpt-len(digits)) + ".0"
		default:
			out = digits[:decpt] + "." + digits[decpt:]
		}
	default:
		out = digits[:1]
		if len(digits) > 1 {
			out += "." + digits[1:]
		}
		x := decpt - 1
		sign := "+"
		if x < 0 {
			sign = "-"
			x = -x
		}
		out += "e" + sign + fmt.Sprintf("%02d", x)
	}
	if neg {
		out = "-" + out
	}
	return out
}
