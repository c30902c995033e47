package merge

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// decode reads JSON the way strata stores pillars: numbers as json.Number.
func decode(t testing.TB, s string) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	return v
}

func object(t testing.TB, s string) map[string]any {
	t.Helper()
	m, ok := decode(t, s).(map[string]any)
	require.True(t, ok, "not a JSON object: %s", s)
	return m
}

// normalise round-trips v through JSON, so a comparison sees what a client would receive,
// numbers as their json.Number text.
func normalise(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return decode(t, string(b))
}

func layersOf(data ...map[string]any) []Layer {
	out := make([]Layer, len(data))
	for i, d := range data {
		out[i] = Layer{Target: "t", Category: "c", Data: d}
	}
	return out
}

type goldenCase struct {
	Name           string           `json:"name"`
	Layers         []map[string]any `json:"layers"`
	Want           map[string]any   `json:"want"`
	WantMergeLists map[string]any   `json:"want_merge_lists"`
}

func loadGolden(t testing.TB) []goldenCase {
	t.Helper()
	b, err := os.ReadFile("testdata/salt-merge-golden.json")
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var file struct {
		SaltVersion string       `json:"salt_version"`
		Cases       []goldenCase `json:"cases"`
	}
	require.NoError(t, dec.Decode(&file))
	require.Equal(t, "3006.0", file.SaltVersion)
	return file.Cases
}

// The vectors were produced by Salt 3006.0 itself; every one must agree, both list modes.
func TestMergeSaltGolden(t *testing.T) {
	t.Parallel()
	cases := loadGolden(t)
	require.Len(t, cases, 317)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			layers := layersOf(c.Layers...)
			require.Equal(t, normalise(t, c.Want), normalise(t, Merge(layers, Options{MergeLists: false})), "lists replaced")
			require.Equal(t, normalise(t, c.WantMergeLists), normalise(t, Merge(layers, Options{MergeLists: true})), "lists merged")
		})
	}
}

// The worked example of the research report (§2.4), verified there against Salt's code.
func TestMergeWorkedExample(t *testing.T) {
	t.Parallel()
	layers := []Layer{
		{Target: "global", Category: "general", Data: object(t, `{"ntp": {"servers": ["0.pool", "1.pool"], "iburst": true},
			"users": {"alice": {"uid": 1000, "groups": ["wheel"]}},
			"motd": "global", "pkgs": ["vim", "curl"], "dns": {"search": ["corp"]}}`)},
		{Target: "org/acme", Category: "general", Data: object(t, `{"ntp": {"servers": ["ntp.org1"]}, "users": {"bob": {"uid": 1001}},
			"pkgs": ["curl", "git", "git"], "dns": null}`)},
		{Target: "group/acme/web", Category: "general", Data: object(t, `{"users": {"alice": {"groups": ["docker"], "shell": "/bin/zsh"}},
			"motd": {"text": "web"}, "ntp": {}}`)},
		{Target: "node/web01", Category: "general", Data: object(t, `{"users": {"alice": null}, "dns": {"search": ["node"]}}`)},
	}

	require.Equal(t, object(t, `{"users": {"alice": {"uid": 1000, "groups": ["docker"], "shell": "/bin/zsh"}, "bob": {"uid": 1001}},
		"ntp": {"servers": ["ntp.org1"], "iburst": true}, "motd": {"text": "web"}, "pkgs": ["curl", "git", "git"], "dns": null}`),
		Merge(layers[:3], Options{}), "after global, org and group")

	require.Equal(t, object(t, `{
		"dns":   {"search": ["node"]},
		"motd":  {"text": "web"},
		"ntp":   {"iburst": true, "servers": ["ntp.org1"]},
		"pkgs":  ["curl", "git", "git"],
		"users": {"alice": null, "bob": {"uid": 1001}}}`), Merge(layers, Options{}))

	require.Equal(t, object(t, `{
		"dns":   {"search": ["node"]},
		"motd":  {"text": "web"},
		"ntp":   {"iburst": true, "servers": ["0.pool", "1.pool", "ntp.org1"]},
		"pkgs":  ["vim", "curl", "git", "git"],
		"users": {"alice": null, "bob": {"uid": 1001}}}`), Merge(layers, Options{MergeLists: true}))
}

// The edge cases the research lists beside the worked example, and the ones the brief asks
// about ({} onto a scalar).
func TestMergeEdgeCases(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		layers     []string
		mergeLists bool
		want       string
	}{
		{"disjoint keys", []string{`{"a": 1}`, `{"b": {"c": 1}}`}, false, `{"a": 1, "b": {"c": 1}}`},
		{"duplicates of the higher list kept", []string{`{"a": {"k": [1]}}`, `{"a": {"k": [1, 2, 2, 3]}}`}, true, `{"a": {"k": [1, 2, 2, 3]}}`},
		{"duplicates of the lower list kept", []string{`{"k": [1, 1]}`, `{"k": [1, 2]}`}, true, `{"k": [1, 1, 2]}`},
		{"list items compared deeply", []string{`{"a": [{"n": 1}]}`, `{"a": [{"n": 1}, {"n": 2}]}`}, true, `{"a": [{"n": 1}, {"n": 2}]}`},
		{"list replaced by scalar with merge_lists", []string{`{"a": [1]}`, `{"a": "scalar"}`}, true, `{"a": "scalar"}`},
		{"dict replaced by list", []string{`{"a": {"b": 1}}`, `{"a": [1]}`}, false, `{"a": [1]}`},
		{"empty dict onto a dict", []string{`{"x": {"y": 1}}`, `{"x": {}}`}, false, `{"x": {"y": 1}}`},
		{"empty dict onto a scalar replaces it", []string{`{"x": 1}`, `{"x": {}}`}, false, `{"x": {}}`},
		{"empty dict onto null replaces it", []string{`{"x": null}`, `{"x": {}}`}, false, `{"x": {}}`},
		{"empty dict onto a list replaces it", []string{`{"x": [1]}`, `{"x": {}}`}, true, `{"x": {}}`},
		{"empty list replaces", []string{`{"x": [1]}`, `{"x": []}`}, false, `{"x": []}`},
		{"empty list appends nothing", []string{`{"x": [1]}`, `{"x": []}`}, true, `{"x": [1]}`},
		{"null replaces a list", []string{`{"x": [1]}`, `{"x": null}`}, true, `{"x": null}`},
		{"no layers", nil, false, `{}`},
		{"integer equals float", []string{`{"x": [1, 2.5]}`, `{"x": [1.0, 1e0, 25e-1, 3]}`}, true, `{"x": [1, 2.5, 3]}`},
		{"big integers compared exactly", []string{`{"x": [12345678901234567890123]}`, `{"x": [12345678901234567890123, 12345678901234567890124]}`}, true,
			`{"x": [12345678901234567890123, 12345678901234567890124]}`},
		{"int against float exactly, as Python", []string{`{"x": [9007199254740993]}`, `{"x": [9007199254740993.0, 9007199254740992.0]}`}, true,
			`{"x": [9007199254740993, 9007199254740993.0, 9007199254740992.0]}`},
		{"booleans are not numbers", []string{`{"x": [1, 0]}`, `{"x": [true, false]}`}, true, `{"x": [1, 0, true, false]}`},
		{"string is not a number", []string{`{"x": ["1"]}`, `{"x": [1]}`}, true, `{"x": ["1", 1]}`},
		{"object key order is irrelevant", []string{`{"x": [{"a": 1, "b": 2}]}`, `{"x": [{"b": 2, "a": 1}]}`}, true, `{"x": [{"a": 1, "b": 2}]}`},
		{"list order is relevant", []string{`{"x": [[1, 2]]}`, `{"x": [[2, 1]]}`}, true, `{"x": [[1, 2], [2, 1]]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var data []map[string]any
			for _, l := range c.layers {
				data = append(data, object(t, l))
			}
			got := Merge(layersOf(data...), Options{MergeLists: c.mergeLists})
			require.Equal(t, object(t, c.want), got)
		})
	}
}

// Numbers keep their exact text: a pillar may hold integers beyond float64.
func TestMergeKeepsNumberText(t *testing.T) {
	t.Parallel()
	got := Merge(layersOf(object(t, `{"a": 12345678901234567890123, "b": [1.50]}`), object(t, `{"c": 1e400}`)), Options{MergeLists: true})
	b, err := json.Marshal(got)
	require.NoError(t, err)
	require.Equal(t, decode(t, `{"a": 12345678901234567890123, "b": [1.50], "c": 1e400}`), decode(t, string(b)))
	require.Contains(t, string(b), "12345678901234567890123")
	require.Contains(t, string(b), "1.50")
}

// Layers may be cached by the caller: merging must leave them as they were, and the result
// must not alias them (Salt's does), so changing the result cannot reach back into a layer.
func TestMergeDoesNotMutateOrAliasInputs(t *testing.T) {
	t.Parallel()
	for _, opts := range []Options{{MergeLists: false}, {MergeLists: true}} {
		for _, c := range loadGolden(t) {
			layers := layersOf(c.Layers...)
			before := make([]any, len(layers))
			for i, l := range layers {
				before[i] = deepCopy(l.Data)
			}
			results := []map[string]any{Merge(layers, opts)}
			res, _ := Explain(layers, opts)
			results = append(results, res)
			for i, l := range layers {
				require.Equal(t, before[i], l.Data, "%s: layer %d changed by the merge", c.Name, i)
			}
			for _, r := range results {
				scribble(r)
			}
			for i, l := range layers {
				require.Equal(t, before[i], l.Data, "%s: layer %d changed through the result", c.Name, i)
			}
		}
	}
}

// scribble changes every object and list of v in place.
func scribble(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			scribble(c)
			if _, ok := c.(map[string]any); !ok {
				t[k] = "scribbled"
			}
		}
		t["scribbled"] = true
	case []any:
		for i, c := range t {
			scribble(c)
			t[i] = "scribbled"
		}
	}
}

func TestEqualNumbers(t *testing.T) {
	t.Parallel()
	n := func(s string) json.Number { return json.Number(s) }
	require.True(t, equal(n("1"), n("1")))
	require.True(t, equal(n("1"), n("1.0")))
	require.True(t, equal(n("-0"), n("0")))
	require.True(t, equal(n("-0.0"), n("0")))
	require.True(t, equal(n("100"), n("1E2")))
	require.True(t, equal(n("1e400"), n("2e400")), "both are +inf in Python")
	require.True(t, equal(n("1e-400"), n("0")), "0.0 in Python")
	require.False(t, equal(n("1e400"), n("1"+string(bytes.Repeat([]byte("0"), 400)))), "an integer never equals inf")
	require.False(t, equal(n("1"), n("2")))
	require.False(t, equal(n("1.5"), n("1")))
	require.True(t, equal(n("3"), float64(3)))
	require.True(t, equal(3, n("3.0")))
	require.False(t, equal(n("1"), true))
	require.False(t, equal(nil, n("0")))
	require.False(t, equal(n("0"), nil))
	require.False(t, equal(n("0"), "0"))
}
