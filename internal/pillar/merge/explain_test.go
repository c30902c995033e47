package merge

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	global = Source{Target: "global", Category: "general"}
	org    = Source{Target: "org/acme", Category: "general"}
	group  = Source{Target: "group/acme/web", Category: "formula-apache"}
	nodeS  = Source{Target: "node/web01", Category: "general"}
)

// fourLayers is a realistic global → org → group → node stack with a subtree replaced by a
// scalar (sudo), a subtree replaced by a scalar and then rebuilt (ntp), null overrides of a
// leaf (apache.user) and of a subtree (users.alice, dns), an empty object that is a leaf
// (apache.vhosts, extra), keys that need escaping, and a list each mode treats differently.
func fourLayers(t *testing.T) []Layer {
	t.Helper()
	return []Layer{
		{Target: global.Target, Category: global.Category, Data: object(t, `{
			"apache": {"port": 80, "user": "www-data", "modules": ["ssl"]},
			"motd": "hello",
			"ntp": {"servers": ["0.pool", "1.pool"], "iburst": true},
			"sudo": {"rules": ["alice ALL"], "timeout": 5},
			"users": {"alice": {"uid": 1000, "groups": ["wheel"]}},
			"dns": {"search": ["corp"]},
			"pkgs": ["vim"]}`)},
		{Target: org.Target, Category: org.Category, Data: object(t, `{
			"apache": {"port": 8080},
			"ntp": "ntp.acme",
			"users": {"bob": {"uid": 1001}},
			"pkgs": ["git"]}`)},
		{Target: group.Target, Category: group.Category, Data: object(t, `{
			"apache": {"modules": ["rewrite", "ssl"], "vhosts": {}},
			"ntp": {"servers": ["ntp1.acme"]},
			"motd": {"text": "web"},
			"sudo": false,
			"users": {"alice": {"groups": ["docker"], "shell": "/bin/zsh"}}}`)},
		{Target: nodeS.Target, Category: nodeS.Category, Data: object(t, `{
			"apache": {"user": null, "vhosts": {}},
			"dns": null,
			"users": {"alice": null},
			"paths": {"/var/www": "x", "a~b": 1},
			"extra": {},
			"pkgs": ["vim", "git"]}`)},
	}
}

func TestExplainFourLayers(t *testing.T) {
	t.Parallel()
	layers := fourLayers(t)
	merged, got := Explain(layers, Options{})
	require.Equal(t, Merge(layers, Options{}), merged)
	require.Equal(t, object(t, `{
		"apache": {"port": 8080, "user": null, "modules": ["rewrite", "ssl"], "vhosts": {}},
		"motd": {"text": "web"},
		"ntp": {"servers": ["ntp1.acme"]},
		"sudo": false,
		"users": {"alice": null, "bob": {"uid": 1001}},
		"dns": null,
		"paths": {"/var/www": "x", "a~b": 1},
		"extra": {},
		"pkgs": ["vim", "git"]}`), merged)
	require.Equal(t, []Explanation{
		{Path: ptr("/apache/modules"), SetBy: group, Overridden: []Source{global}},
		{Path: ptr("/apache/port"), SetBy: org, Overridden: []Source{global}},
		{Path: ptr("/apache/user"), SetBy: nodeS, Overridden: []Source{global}},      // null overrides a leaf
		{Path: ptr("/apache/vhosts"), SetBy: group},                                  // the node's {} changed nothing
		{Path: ptr("/dns"), SetBy: nodeS, Overridden: []Source{global}},              // null overrides a subtree
		{Path: ptr("/extra"), SetBy: nodeS},                                          // an empty object is a leaf
		{Path: ptr("/motd/text"), SetBy: group, Overridden: []Source{global}},        // the scalar above it was replaced
		{Path: ptr("/ntp/servers"), SetBy: group, Overridden: []Source{global, org}}, // subtree → scalar → subtree
		{Path: ptr("/paths/a~0b"), SetBy: nodeS},
		{Path: ptr("/paths/~1var~1www"), SetBy: nodeS},
		{Path: ptr("/pkgs"), SetBy: nodeS, Overridden: []Source{global, org}},
		{Path: ptr("/sudo"), SetBy: group, Overridden: []Source{global}},               // subtree replaced by a scalar
		{Path: ptr("/users/alice"), SetBy: nodeS, Overridden: []Source{global, group}}, // both maps it merged are gone
		{Path: ptr("/users/bob/uid"), SetBy: org},
	}, got)
}

func TestExplainFourLayersMergeLists(t *testing.T) {
	t.Parallel()
	layers := fourLayers(t)
	merged, got := Explain(layers, Options{MergeLists: true})
	require.Equal(t, Merge(layers, Options{MergeLists: true}), merged)
	require.Equal(t, decode(t, `["ssl", "rewrite"]`), merged["apache"].(map[string]any)["modules"])
	require.Equal(t, decode(t, `["vim", "git"]`), merged["pkgs"])
	byPath := map[string]Explanation{}
	for _, e := range got {
		byPath[e.Path.String()] = e
	}
	// The group appended "rewrite" to the global list: both are in it, nobody was overridden.
	require.Equal(t, Explanation{Path: ptr("/apache/modules"), SetBy: group, MergedFrom: []Source{global}}, byPath["/apache/modules"])
	// The node's list added nothing, so it is not named, like an empty object onto an object.
	require.Equal(t, Explanation{Path: ptr("/pkgs"), SetBy: org, MergedFrom: []Source{global}}, byPath["/pkgs"])
	// A list replaced by a scalar is gone even when lists merge.
	require.Equal(t, Explanation{Path: ptr("/ntp/servers"), SetBy: group, Overridden: []Source{global, org}}, byPath["/ntp/servers"])
	require.Len(t, got, 14)
}

// A list merged into and then replaced: all its contributors are overridden.
func TestExplainMergedListReplaced(t *testing.T) {
	t.Parallel()
	var layers []Layer
	for i, d := range []string{`{"l": [1]}`, `{"l": [2]}`, `{"l": "x"}`, `{"l": [3]}`, `{"l": [4]}`} {
		layers = append(layers, Layer{Target: "t" + string(rune('0'+i)), Category: "c", Data: object(t, d)})
	}
	src := func(i int) Source { return Source{Target: layers[i].Target, Category: "c"} }
	merged, got := Explain(layers, Options{MergeLists: true})
	require.Equal(t, object(t, `{"l": [3, 4]}`), merged)
	require.Equal(t, []Explanation{{Path: ptr("/l"), SetBy: src(4), Overridden: []Source{src(0), src(1), src(2)}, MergedFrom: []Source{src(3)}}}, got)
}

func TestExplainEmpty(t *testing.T) {
	t.Parallel()
	merged, got := Explain(nil, Options{})
	require.Empty(t, merged)
	require.Empty(t, got)
	merged, got = Explain([]Layer{{Target: "global"}, {Target: "node/a", Data: map[string]any{}}}, Options{})
	require.Empty(t, merged)
	require.Empty(t, got)
}

// The JSON shape other code and the API rely on.
func TestExplanationJSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal([]Explanation{
		{Path: ptr("/a"), SetBy: global},
		{Path: ptr("/b"), SetBy: nodeS, Overridden: []Source{global}, MergedFrom: []Source{org}},
	})
	require.NoError(t, err)
	require.JSONEq(t, `[
		{"path": "/a", "setBy": {"target": "global", "category": "general"}},
		{"path": "/b", "setBy": {"target": "node/web01", "category": "general"},
		 "overridden": [{"target": "global", "category": "general"}],
		 "mergedFrom": [{"target": "org/acme", "category": "general"}]}]`, string(b))
}

// Every golden case, both modes: the explanations cover the leaves of the result exactly and
// agree with what the layers hold.
func TestExplainGoldenInvariants(t *testing.T) {
	t.Parallel()
	for _, c := range loadGolden(t) {
		layers := make([]Layer, len(c.Layers))
		for i, d := range c.Layers {
			layers[i] = Layer{Target: "layer", Category: string(rune('a' + i)), Data: d}
		}
		for _, opts := range []Options{{MergeLists: false}, {MergeLists: true}} {
			merged, expl := Explain(layers, opts)
			require.Equal(t, Merge(layers, opts), merged, c.Name)
			checkExplanations(t, layers, opts, merged, expl)
		}
	}
}

// checkExplanations asserts what any explanation must satisfy: one per leaf, sorted by path;
// SetBy, MergedFrom and Overridden name layers that hold a value there, in merge order; and
// without MergeLists, a leaf that is not an empty object was set by the last layer with a
// value at its path.
func checkExplanations(t testing.TB, layers []Layer, opts Options, merged map[string]any, expl []Explanation) {
	t.Helper()
	var leaves []string
	collectLeaves(merged, "", &leaves)
	slices.Sort(leaves)
	var paths []string
	for _, e := range expl {
		paths = append(paths, e.Path.String())
	}
	require.Equal(t, leaves, paths, "one explanation per leaf, sorted by path")

	index := func(s Source) int {
		i := int(s.Category[0] - 'a')
		require.Equal(t, layers[i].Category, s.Category)
		return i
	}
	for _, e := range expl {
		tokens := splitPointer(e.Path.String())
		setBy := index(e.SetBy)
		v, ok := lookup(layers[setBy].Data, tokens)
		require.True(t, ok, "%s: SetBy has no value there", e.Path)
		last := setBy
		for i := range layers {
			if _, ok := lookup(layers[i].Data, tokens); ok {
				last = i
			}
		}
		if _, isObject := v.(map[string]any); !isObject && !opts.MergeLists {
			require.Equal(t, last, setBy, "%s: the last layer with a value there set it", e.Path)
		}
		prev := -1
		for _, s := range e.MergedFrom {
			i := index(s)
			require.Less(t, prev, i, "%s: MergedFrom in merge order", e.Path)
			prev = i
			l, ok := lookup(layers[i].Data, tokens)
			require.True(t, ok, "%s: a MergedFrom layer has no value there", e.Path)
			require.IsType(t, []any{}, l)
		}
		require.Less(t, prev, setBy)
		prev = -1
		for _, s := range e.Overridden {
			i := index(s)
			require.Less(t, prev, i, "%s: Overridden in merge order", e.Path)
			prev = i
			found := false
			for n := 1; n <= len(tokens); n++ {
				if _, ok := lookup(layers[i].Data, tokens[:n]); ok {
					found = true
				}
			}
			require.True(t, found, "%s: an overridden layer has no value at or above it", e.Path)
			require.NotContains(t, e.MergedFrom, s)
		}
		require.Less(t, prev, setBy, "%s: only earlier layers are overridden", e.Path)
	}
}

func collectLeaves(v any, path string, out *[]string) {
	m, ok := v.(map[string]any)
	if !ok || (len(m) == 0 && path != "") {
		*out = append(*out, path)
		return
	}
	for k, c := range m {
		collectLeaves(c, path+"/"+escapeToken(k), out)
	}
}

func splitPointer(p string) []string {
	tokens := strings.Split(p, "/")[1:]
	for i, tok := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
	}
	return tokens
}

func lookup(data map[string]any, tokens []string) (any, bool) {
	var v any = data
	for _, tok := range tokens {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[tok]; !ok {
			return nil, false
		}
	}
	return v, true
}

// ptr builds the Pointer of an escaped JSON pointer, as Explain links it.
func ptr(s string) Pointer {
	var n *pointerNode
	for _, tok := range strings.Split(s, "/")[1:] {
		n = n.child(tok)
	}
	return Pointer{n}
}
