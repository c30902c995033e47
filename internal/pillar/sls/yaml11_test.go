package sls

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestScalarsMatchPyYAML compares every plain scalar of testdata/scalars.json (hand-picked
// edge cases and 4000 random strings of digits, signs, dots, colons, underscores and
// prefix letters) with what PyYAML plus Salt's loader built for it (gen_golden.py).
func TestScalarsMatchPyYAML(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/scalars.json")
	require.NoError(t, err)
	var cases []struct {
		In   string `json:"in"`
		Want struct {
			Null    bool    `json:"null"`
			Bool    *bool   `json:"bool"`
			Int     *string `json:"int"`
			Float   *string `json:"float"`
			Str     *string `json:"str"`
			NotJSON bool    `json:"notjson"`
			Error   string  `json:"error"`
		} `json:"want"`
	}
	require.NoError(t, json.Unmarshal(raw, &cases))
	require.Greater(t, len(cases), 1000)
	for _, c := range cases {
		got, err := constructScalar(resolvePlain(c.In), c.In)
		w := c.Want
		switch {
		case w.Null:
			require.NoError(t, err, "%q", c.In)
			require.Nil(t, got, "%q", c.In)
		case w.Bool != nil:
			require.NoError(t, err, "%q", c.In)
			require.Equal(t, *w.Bool, got, "%q", c.In)
		case w.Int != nil:
			require.NoError(t, err, "%q", c.In)
			require.Equal(t, json.Number(*w.Int), got, "%q", c.In)
		case w.Float != nil:
			require.NoError(t, err, "%q", c.In)
			require.Equal(t, json.Number(*w.Float), got, "%q", c.In)
		case w.Str != nil:
			require.NoError(t, err, "%q", c.In)
			require.Equal(t, *w.Str, got, "%q", c.In)
		case w.NotJSON:
			require.ErrorIs(t, err, errNotJSON, "%q", c.In)
		case w.Error != "":
			require.Error(t, err, "%q: Salt fails with %s", c.In, w.Error)
			require.NotErrorIs(t, err, errNotJSON, "%q", c.In)
		default:
			t.Fatalf("%q: golden case without an expectation", c.In)
		}
	}
}

// TestPyReprMatchesPython checks pyRepr against Python's repr for random doubles.
func TestPyReprMatchesPython(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/floats.json")
	require.NoError(t, err)
	var cases []struct {
		Bits string `json:"bits"`
		Repr string `json:"repr"`
	}
	require.NoError(t, json.Unmarshal(raw, &cases))
	require.Greater(t, len(cases), 1000)
	for _, c := range cases {
		bits, err := strconv.ParseUint(c.Bits, 10, 64)
		require.NoError(t, err)
		require.Equal(t, c.Repr, pyRepr(math.Float64frombits(bits)), "bits %s", c.Bits)
	}
}

// TestLoadTyping reads the YAML 1.1 cases of the brief through the whole loader, so that
// quoting and block styles are covered too.
func TestLoadTyping(t *testing.T) {
	t.Parallel()
	src := `
bools: [yes, no, on, off, Yes, NO, True, OFF]
strings: ['yes', "no", y, n, yEs, 0o17, 08, 1e3, "010", 2001-12-14, 2001-12-14 21:59:43.10 -5]
nulls: [~, null, Null, NULL, ]
octal: 010
signed_octal: -010
thousand: 1_000
sexagesimal: 1:30
big: 123456789012345678901234567890
hex: 0x_ff
float: 1:30.5
float_exp: 6.02e+23
float_whole: 3.
tagged: [!!str 010, !!int "010", !!float "1", !!bool "on", !!null "x", !!timestamp 2001-12-14, !!python/unicode u]
block: |
  yes
anchors:
  a: &a {k: 1, j: 2}
  b: {<<: *a, j: 3}
  c: [*a, *a]
"=": value key
`
	var problems []string
	v, _, ok := loadDocument([]byte(src), func(line int, reason string) { problems = append(problems, reason) })
	require.True(t, ok, "%v", problems)
	require.Equal(t, map[string]any{
		"bools":        []any{true, false, true, false, true, false, true, false},
		"strings":      []any{"yes", "no", "y", "n", "yEs", "0o17", "08", "1e3", "010", "2001-12-14", "2001-12-14 21:59:43.10 -5"},
		"nulls":        []any{nil, nil, nil, nil}, // a trailing comma adds no item
		"octal":        json.Number("10"),
		"signed_octal": json.Number("-8"),
		"thousand":     json.Number("1000"),
		"sexagesimal":  json.Number("90"),
		"big":          json.Number("123456789012345678901234567890"),
		"hex":          json.Number("255"),
		"float":        json.Number("90.5"),
		"float_exp":    json.Number("6.02e+23"),
		"float_whole":  json.Number("3.0"),
		"tagged":       []any{"010", json.Number("10"), json.Number("1.0"), true, nil, "2001-12-14", "u"},
		"block":        "yes\n",
		"anchors": map[string]any{
			"a": map[string]any{"k": json.Number("1"), "j": json.Number("2")},
			"b": map[string]any{"k": json.Number("1"), "j": json.Number("3")},
			"c": []any{
				map[string]any{"k": json.Number("1"), "j": json.Number("2")},
				map[string]any{"k": json.Number("1"), "j": json.Number("2")},
			},
		},
		"=": "value key",
	}, v)
}

// TestLoadRefusals lists what Salt's loader refuses or JSON cannot hold, each at its line.
func TestLoadRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src string
		line      int
		reason    string
	}{
		{"inf", "a:\n  b: .inf\n", 2, `value ".inf": infinity is not representable in JSON`},
		{"negative inf", "a: -.Inf\n", 1, `value "-.Inf": infinity is not representable in JSON`},
		{"nan", "a: .NaN\n", 1, `value ".NaN": nan is not representable in JSON`},
		{"overflow", "a: 1.0e+400\n", 1, `value "1.0e+400": "1.0e+400" is +Inf in Python, which is not representable in JSON`},
		{"int key", "ports:\n  80: http\n", 2, `key "80" is the number 80 in Salt; a JSON key is a string: quote it`},
		{"bool key", "on: x\n", 1, `key "on" is the boolean True in Salt (YAML 1.1); a JSON key is a string: quote it`},
		{"null key", "~: x\n", 1, `key "~" is None in Salt; a JSON key is a string: quote it`},
		{"float key", "1.5: x\n", 1, `key "1.5" is the number 1.5 in Salt; a JSON key is a string: quote it`},
		{"sequence key", "? [a]\n: x\n", 1, `a mapping or sequence used as a key: Salt refuses it (unhashable key)`},
		{"duplicate key", "a: 1\nb: 2\na: 3\n", 3, `key "a" appears twice in one mapping: Salt's loader refuses the file (found conflicting ID)`},
		{"merged duplicate", "x: &a {k: 1}\ny: &b {k: 2}\nz: {<<: [*a, *b]}\n", 1, `key "k" appears twice in one mapping: Salt's loader refuses the file (found conflicting ID)`},
		{"duplicate anchor", "a: &x 1\nb: &x 2\n", 2, `anchor &x is defined again (first on line 1): PyYAML refuses duplicate anchors`},
		{"second document", "a: 1\n---\nb: 2\n", 2, `a second YAML document: Salt's loader reads exactly one document per file`},
		{"value indicator", "a: =\n", 1, `value "=": Salt fails to load it (plain "=" is YAML 1.1's value indicator, for which Salt's loader has no constructor)`},
		{"merge as value", "a: <<\n", 1, `value "<<": Salt fails to load it (plain "<<" is YAML 1.1's merge indicator, for which Salt's loader has no constructor)`},
		{"bad int", "a: 0b_\n", 1, `value "0b_": Salt fails to load it ("0b" is not an integer Python's int() accepts)`},
		{"binary", "a: !!binary aGk=\n", 1, `a !!binary scalar is bytes in Salt, which JSON cannot hold`},
		{"set", "a: !!set {x, y}\n", 1, `a mapping tagged !!set: Salt builds a set, which JSON cannot hold faithfully`},
		{"omap", "a: !!omap [x: 1]\n", 1, `a sequence tagged !!omap: Salt builds a list of tuples, which JSON cannot hold faithfully`},
		{"custom tag", "a: !vault secret\n", 1, `value "secret": Salt fails to load it (tag !vault: Salt's loader has no constructor for it)`},
		{"recursive alias", "a: &x\n  b: *x\n", 2, `alias *x makes a recursive structure, which JSON cannot hold`},
		{"merge scalar", "a: {<<: 1}\n", 1, `a merge key (<<) needs a mapping or a list of mappings: Salt's loader refuses anything else`},
		{"syntax", "a: [1,\n", 1, "YAML syntax error: did not find expected node content"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			type problem struct {
				line   int
				reason string
			}
			var got []problem
			_, _, ok := loadDocument([]byte(c.src), func(line int, reason string) { got = append(got, problem{line, reason}) })
			require.False(t, ok)
			require.Contains(t, got, problem{c.line, c.reason})
		})
	}
}

// TestAliasBomb: a "billion laughs" document is refused instead of expanded.
func TestAliasBomb(t *testing.T) {
	t.Parallel()
	src := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h"} {
		src += n + ": &" + n + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n"
		prev = n
	}
	var reasons []string
	_, _, ok := loadDocument([]byte(src), func(_ int, reason string) { reasons = append(reasons, reason) })
	require.False(t, ok)
	require.Contains(t, reasons, "the document expands to more than 1048576 values through aliases")
}

func TestConstructScalarErrors(t *testing.T) {
	t.Parallel()
	_, err := constructScalar(tagBool, "maybe")
	require.Error(t, err)
	_, err = constructScalar(tagFloat, "inf")
	require.True(t, errors.Is(err, errNotJSON))
	v, err := constructScalar(tagInt, "0_7")
	require.NoError(t, err)
	require.Equal(t, json.Number("7"), v)
}

// TestMergeKeyBomb: mappings merging mappings that merge mappings double their entries at
// each level; the loader stops at its budget instead of building 2^40 entries.
func TestMergeKeyBomb(t *testing.T) {
	t.Parallel()
	src := "l0: &l0 {a: 1, b: 2}\n"
	for i := 1; i <= 40; i++ {
		p := "*l" + strconv.Itoa(i-1)
		src += "l" + strconv.Itoa(i) + ": &l" + strconv.Itoa(i) + " {<<: [" + p + ", " + p + "]}\n"
	}
	var reasons []string
	_, _, ok := loadDocument([]byte(src), func(_ int, reason string) { reasons = append(reasons, reason) })
	require.False(t, ok)
	require.Contains(t, reasons, "the document expands to more than 1048576 values through aliases")
}
