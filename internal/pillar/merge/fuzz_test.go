package merge

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxFuzzLayers keeps fuzz inputs cheap and their categories one letter ('a' + index), which
// checkExplanations reads back.
const maxFuzzLayers = 8

// FuzzMerge feeds random layers: a JSON array of objects, or any other bytes driving a small
// generator (so every input is a valid stack and the fuzzer need not learn JSON first). Merge
// must not panic, must equal Explain's result, must leave its inputs alone, and merging the
// last layer a second time must change nothing — in both list modes: with MergeLists every
// item of the repeated list is already present after the first merge.
func FuzzMerge(f *testing.F) {
	for _, c := range loadGolden(f) {
		b, err := json.Marshal(c.Layers)
		require.NoError(f, err)
		f.Add(b, false)
		f.Add(b, true)
	}
	f.Add([]byte(`[{"a": [1, 1.0, 1e400, 12345678901234567890123]}, {"a": [1.00, true, null, {"x": []}]}]`), true)
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, false)
	f.Add([]byte("\xff\x80\x40\x20\x10\x08\x04\x02\x01"), true)

	f.Fuzz(func(t *testing.T, data []byte, mergeLists bool) {
		layers := fuzzLayers(data)
		opts := Options{MergeLists: mergeLists}
		before, err := json.Marshal(layers)
		require.NoError(t, err)

		merged := Merge(layers, opts)
		explained, expl := Explain(layers, opts)
		require.Equal(t, merged, explained, "Merge and Explain agree")
		checkExplanations(t, layers, opts, explained, expl)

		if len(layers) > 0 {
			again := append(append([]Layer(nil), layers...), layers[len(layers)-1])
			require.Equal(t, merged, Merge(again, opts), "merging the last layer twice equals merging it once")
			last := layers[len(layers)-1:]
			require.Equal(t, Merge(last, opts), Merge([]Layer{last[0], last[0]}, opts), "a layer onto itself")
		}

		// The hash set of the list merge answers what comparing every pair answered.
		var lists [][]any
		for _, l := range layers {
			collectLists(l.Data, &lists)
		}
		for i := 0; i < len(lists) && i < 8; i++ {
			for j := 0; j < len(lists) && j < 8; j++ {
				m := &merger{mergeLists: true, ctx: t.Context()}
				require.Equal(t, appendNewPairwise(lists[i], lists[j]), m.appendNew(lists[i], lists[j]), "lists %d onto %d", j, i)
			}
		}

		after, err := json.Marshal(layers)
		require.NoError(t, err)
		require.Equal(t, string(before), string(after), "inputs unchanged")
	})
}

// appendNewPairwise is the list merge as the package did it before its hash set: every item
// of the higher list compared with every item of the lower one.
func appendNewPairwise(lower, higher []any) []any {
	out := append([]any{}, lower...)
	for _, x := range higher {
		found := false
		for _, y := range lower {
			found = found || equal(x, y)
		}
		if !found {
			out = append(out, deepCopy(x))
		}
	}
	return out
}

// collectLists gathers every list inside v, nested ones included.
func collectLists(v any, out *[][]any) {
	switch t := v.(type) {
	case []any:
		*out = append(*out, t)
		for _, c := range t {
			collectLists(c, out)
		}
	case map[string]any:
		for _, c := range t {
			collectLists(c, out)
		}
	}
}

func fuzzLayers(data []byte) []Layer {
	var objs []map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var arr []any
	if err := dec.Decode(&arr); err == nil {
		for _, v := range arr {
			if m, ok := v.(map[string]any); ok {
				objs = append(objs, m)
			}
		}
	} else {
		g := gen{data: data}
		for n := g.next() % (maxFuzzLayers + 1); n > 0; n-- {
			objs = append(objs, g.object(0))
		}
	}
	if len(objs) > maxFuzzLayers {
		objs = objs[:maxFuzzLayers]
	}
	layers := make([]Layer, len(objs))
	for i, o := range objs {
		layers[i] = Layer{Target: "layer", Category: string(rune('a' + i)), Data: o}
	}
	return layers
}

// gen turns bytes into JSON values over a small alphabet of keys and values, so that layers
// collide often: the same keys at the same depths, numbers equal in value but not in text.
type gen struct {
	data []byte
	pos  int
}

func (g *gen) next() byte {
	if g.pos >= len(g.data) {
		return 0
	}
	b := g.data[g.pos]
	g.pos++
	return b
}

var (
	fuzzKeys    = []string{"a", "b", "c", "ntp", "users", "a/b", "~"}
	fuzzNumbers = []json.Number{"0", "1", "1.0", "-0", "1e0", "2", "12345678901234567890123", "1e400", "0.5"}
	fuzzStrings = []string{"", "x", "1", "a"}
)

func (g *gen) object(depth int) map[string]any {
	m := map[string]any{}
	for n := g.next() % 4; n > 0; n-- {
		m[fuzzKeys[int(g.next())%len(fuzzKeys)]] = g.value(depth + 1)
	}
	return m
}

func (g *gen) value(depth int) any {
	kind := g.next() % 8
	if depth >= 4 && kind >= 6 {
		kind %= 6
	}
	switch kind {
	case 0:
		return nil
	case 1:
		return g.next()%2 == 0
	case 2:
		return fuzzNumbers[int(g.next())%len(fuzzNumbers)]
	case 3:
		return fuzzStrings[int(g.next())%len(fuzzStrings)]
	case 4:
		return map[string]any{}
	case 5:
		return []any{}
	case 6:
		return g.object(depth)
	default:
		l := []any{}
		for n := g.next() % 4; n > 0; n-- {
			l = append(l, g.value(depth+1))
		}
		return l
	}
}
