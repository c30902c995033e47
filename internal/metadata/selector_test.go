package metadata

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// golden is testdata/label-selectors-golden.json: selectors run through
// k8s.io/apimachinery/pkg/labels (Parse, then Matches on every label set).
type golden struct {
	LabelSets []map[string]string `json:"labelSets"`
	Selectors []struct {
		Selector string `json:"selector"`
		Valid    bool   `json:"valid"`
		Error    string `json:"error"`
		Matches  []int  `json:"matches"`
		UsesGtLt bool   `json:"usesGtLt"`
	} `json:"selectors"`
}

func loadGolden(tb testing.TB) golden {
	tb.Helper()
	b, err := os.ReadFile("testdata/label-selectors-golden.json")
	require.NoError(tb, err)
	var g golden
	require.NoError(tb, json.Unmarshal(b, &g))
	require.NotEmpty(tb, g.Selectors)
	require.NotEmpty(tb, g.LabelSets)
	return g
}

// requireSelectorError asserts err is a *SelectorError and returns it.
func requireSelectorError(t *testing.T, err error) *SelectorError {
	t.Helper()
	var se *SelectorError
	require.True(t, errors.As(err, &se), "error %v (%T) is not a *SelectorError", err, err)
	return se
}

// TestParseSelectorGolden holds the parser to apimachinery's answers: the same selectors
// are valid and they match the same label sets. The > and < selectors are the deliberate
// exception and must be refused with a message naming the operator.
func TestParseSelectorGolden(t *testing.T) {
	t.Parallel()
	g := loadGolden(t)
	for _, c := range g.Selectors {
		sel, err := ParseSelector(c.Selector)
		if c.UsesGtLt {
			require.True(t, c.Valid, "golden file: %q", c.Selector)
			se := requireSelectorError(t, err)
			op := ">"
			if !strings.Contains(c.Selector, ">") {
				op = "<"
			}
			require.Contains(t, se.Msg, "operator "+op, c.Selector)
			require.Equal(t, strings.Index(c.Selector, op), se.Pos, c.Selector)
			continue
		}
		if !c.Valid {
			require.Error(t, err, "%q: apimachinery says %s", c.Selector, c.Error)
			se := requireSelectorError(t, err)
			require.GreaterOrEqual(t, se.Pos, 0, c.Selector)
			require.LessOrEqual(t, se.Pos, len(c.Selector), c.Selector)
			continue
		}
		require.NoError(t, err, c.Selector)
		got := []int{}
		for i, ls := range g.LabelSets {
			if sel.Matches(ls) {
				got = append(got, i)
			}
		}
		want := c.Matches
		if want == nil {
			want = []int{}
		}
		require.Equal(t, want, got, "%q matches", c.Selector)

		again, err := ParseSelector(sel.String())
		require.NoError(t, err, "%q re-parsing %q", c.Selector, sel.String())
		require.Equal(t, sel, again, "%q re-parsing %q", c.Selector, sel.String())
	}
}

func TestParseSelectorNormalises(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want []Requirement
		str  string
	}{
		{"", nil, ""},
		{" \t\r\n", nil, ""},
		{"env", []Requirement{{Key: "env", Name: "env", Op: OpExists}}, "env"},
		{"!example.com/team", []Requirement{{Key: "example.com/team", Prefix: "example.com", Name: "team", Op: OpNotExists}}, "!example.com/team"},
		{"env==prod", []Requirement{{Key: "env", Name: "env", Op: OpIn, Values: []string{"prod"}}}, "env=prod"},
		{"env in (b, a, b)", []Requirement{{Key: "env", Name: "env", Op: OpIn, Values: []string{"a", "b"}}}, "env in (a,b)"},
		{"env notin (a)", []Requirement{{Key: "env", Name: "env", Op: OpNotIn, Values: []string{"a"}}}, "env!=a"},
		{"env=", []Requirement{{Key: "env", Name: "env", Op: OpIn, Values: []string{""}}}, "env="},
		{"env in ()", []Requirement{{Key: "env", Name: "env", Op: OpIn, Values: []string{""}}}, "env="},
		{"env in (,)", []Requirement{{Key: "env", Name: "env", Op: OpIn, Values: []string{""}}}, "env="},
		{"env notin (a,)", []Requirement{{Key: "env", Name: "env", Op: OpNotIn, Values: []string{"", "a"}}}, "env notin (,a)"},
		{"env in (a,,)", []Requirement{{Key: "env", Name: "env", Op: OpIn, Values: []string{"", "a"}}}, "env in (,a)"},
		{"in", []Requirement{{Key: "in", Name: "in", Op: OpExists}}, "in"},
		{"in in (in,notin)", []Requirement{{Key: "in", Name: "in", Op: OpIn, Values: []string{"in", "notin"}}}, "in in (in,notin)"},
		{"z,!a,a=2,a=1,a", []Requirement{
			{Key: "a", Name: "a", Op: OpNotExists},
			{Key: "a", Name: "a", Op: OpExists},
			{Key: "a", Name: "a", Op: OpIn, Values: []string{"1"}},
			{Key: "a", Name: "a", Op: OpIn, Values: []string{"2"}},
			{Key: "z", Name: "z", Op: OpExists},
		}, "!a,a,a=1,a=2,z"},
	}
	for _, c := range cases {
		sel, err := ParseSelector(c.in)
		require.NoError(t, err, c.in)
		require.Equal(t, c.want, sel.Requirements, c.in)
		require.Equal(t, c.str, sel.String(), c.in)
	}
}

func TestSelectorMatches(t *testing.T) {
	t.Parallel()
	cases := []struct {
		sel    string
		labels map[string]string
		want   bool
	}{
		{"", nil, true},
		{"env=prod", nil, false},
		{"env!=prod", nil, true}, // notin matches an absent key
		{"env notin (prod)", map[string]string{"env": ""}, true},
		{"env=", map[string]string{"env": ""}, true},
		{"env=", map[string]string{}, false}, // in needs the key
		{"env in (a,b)", map[string]string{"env": "b"}, true},
		{"env,!tier", map[string]string{"env": "x", "tier": ""}, false},
		{"example.com/team=a", map[string]string{"team": "a"}, false}, // the prefix is part of the key
	}
	for _, c := range cases {
		sel, err := ParseSelector(c.sel)
		require.NoError(t, err, c.sel)
		require.Equal(t, c.want, sel.Matches(c.labels), "%q on %v", c.sel, c.labels)
	}
}

// TestParseSelectorErrors pins where an error points and what it says, since the position
// is what a client uses to find its mistake.
func TestParseSelectorErrors(t *testing.T) {
	t.Parallel()
	many := strings.TrimSuffix(strings.Repeat("k,", MaxRequirements), ",")
	cases := []struct {
		in  string
		pos int
		msg string
	}{
		{"env in (prod", 12, `found end of string, expected ',' or ')'`},
		{"env=pr od", 7, `found "od", expected ',' or end of string`},
		{"a=b,", 4, `found end of string, expected a key or '!' after ','`},
		{",a", 0, `found ",", expected a key or '!'`},
		{"env in prod", 7, `found "prod", expected '('`},
		{"env in (a b)", 10, `found "b", expected ',' or ')'`},
		{"env===prod", 5, `found "=", expected a value, ',' or end of string`},
		{"env!", 3, `found "!", expected an operator (in, notin, =, ==, !=), ',' or end of string`},
		{"!env=prod", 4, `found "=", expected ',' or end of string`},
		{"!=x", 0, `found "!=", expected a key or '!'`},
		{"! ,", 2, `found ",", expected a key after '!'`},
		{"x>1", 1, "operator > is not supported"},
		{"a=b, x < 10", 7, "operator < is not supported"},
		{"a,Example.com/team=a", 2, `invalid key "Example.com/team": prefix part must be a lowercase DNS subdomain`},
		{"env in (a, -b)", 11, `invalid value "-b": value must consist of`},
		{"env=" + strings.Repeat("v", 64), 4, `invalid value "` + strings.Repeat("v", 64) + `": value must be at most 63 characters`},
		{"env=" + strings.Repeat("v", 65), 4, `invalid value "` + strings.Repeat("v", 64) + `"…: value must be at most 63 characters`},
		{"env \x00garbage", 4, `found "\x00garbage", expected an operator`}, // Kubernetes stops at the NUL
		{"env=a\x00", 4, `invalid value "a\x00"`},
		{"env=" + strings.Repeat("é", 40), 4, `invalid value "` + strings.Repeat("é", 32) + `"…`},
		{many, 0, ""}, // exactly MaxRequirements is fine
		{many + ",k", len(many) + 1, "a selector may have at most 50 requirements"},
	}
	for _, c := range cases {
		_, err := ParseSelector(c.in)
		if c.msg == "" {
			require.NoError(t, err, c.in)
			continue
		}
		se := requireSelectorError(t, err)
		require.Equal(t, c.pos, se.Pos, "%q: %v", c.in, err)
		require.Contains(t, se.Msg, c.msg, c.in)
		require.True(t, strings.HasPrefix(err.Error(), "position "), err.Error())
	}
}

// FuzzParseSelector: the parser never panics; what it accepts obeys the Selector invariants
// and survives a round trip through String; what it refuses it refuses with a
// *SelectorError inside the input.
func FuzzParseSelector(f *testing.F) {
	for _, c := range loadGolden(f).Selectors {
		f.Add(c.Selector)
	}
	for _, s := range []string{"env in (a,,)", "(,,,)", "!!x", "x in (", "a\x00b", "ä=1", "k=v\n,\tj"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		sel, err := ParseSelector(in)
		if err != nil {
			var se *SelectorError
			if !errors.As(err, &se) {
				t.Fatalf("ParseSelector(%q) error %T %v, want *SelectorError", in, err, err)
			}
			if se.Pos < 0 || se.Pos > len(in) {
				t.Fatalf("ParseSelector(%q) error position %d outside [0,%d]", in, se.Pos, len(in))
			}
			return
		}
		if len(sel.Requirements) > MaxRequirements {
			t.Fatalf("ParseSelector(%q) kept %d requirements", in, len(sel.Requirements))
		}
		for _, r := range sel.Requirements {
			p, n, err := SplitKey(r.Key)
			if err != nil || p != r.Prefix || n != r.Name {
				t.Fatalf("ParseSelector(%q) requirement %+v: key does not split to its parts", in, r)
			}
			switch r.Op {
			case OpExists, OpNotExists:
				if r.Values != nil {
					t.Fatalf("ParseSelector(%q) requirement %+v has values", in, r)
				}
			case OpIn, OpNotIn:
				if len(r.Values) == 0 {
					t.Fatalf("ParseSelector(%q) requirement %+v has no values", in, r)
				}
				for i, v := range r.Values {
					if ValidateLabelValue(v) != nil || (i > 0 && r.Values[i-1] >= v) {
						t.Fatalf("ParseSelector(%q) requirement %+v: values invalid or not sorted and unique", in, r)
					}
				}
			default:
				t.Fatalf("ParseSelector(%q) requirement %+v: unknown op", in, r)
			}
		}
		out := sel.String()
		again, err := ParseSelector(out)
		if err != nil {
			t.Fatalf("ParseSelector(%q).String() = %q does not parse: %v", in, out, err)
		}
		require.Equal(t, sel, again, "ParseSelector(%q).String() = %q", in, out)
		_ = sel.Matches(map[string]string{"env": "", "in": "x"})
	})
}
