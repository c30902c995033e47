package merge

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// writer encodes decoded JSON the ways stored text differs from json.Marshal's: keys in
// jsonb's order (shorter first) or shuffled, spaces after separators, strings with escapes
// Go would not write (\/, \u00e9) and characters Go would escape (<, &, U+2028) written
// plainly, and now and then an earlier duplicate of a key the object sets again (the last
// one wins, as when decoding). The raw merge must see through all of it.
type writer struct {
	r *rand.Rand
}

func (w writer) value(b *strings.Builder, v any) {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		if w.r.IntN(2) == 0 {
			slices.SortFunc(keys, func(a, b string) int { // jsonb's order
				if len(a) != len(b) {
					return len(a) - len(b)
				}
				return strings.Compare(a, b)
			})
		} else {
			w.r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		}
		b.WriteString("{")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			if w.r.IntN(6) == 0 {
				w.str(b, k)
				b.WriteString(`: ["a duplicate the next one replaces", {"x": 1}], `)
			}
			w.str(b, k)
			b.WriteString(": ")
			w.value(b, t[k])
		}
		b.WriteString("}")
	case []any:
		b.WriteString("[")
		for i, c := range t {
			if i > 0 {
				b.WriteString(",\n ")
			}
			w.value(b, c)
		}
		b.WriteString("]")
	case string:
		w.str(b, t)
	default:
		raw, _ := json.Marshal(t)
		b.Write(raw)
	}
}

// str writes s as a JSON string, some characters escaped where Go would not and some
// written plainly where Go would escape them.
func (w writer) str(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		case w.r.IntN(4) == 0 && r < 0x10000:
			fmt.Fprintf(b, `\u%04x`, r)
		case r == '/' && w.r.IntN(2) == 0:
			b.WriteString(`\/`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

func (w writer) layers(layers []Layer) []RawLayer {
	out := make([]RawLayer, len(layers))
	for i, l := range layers {
		var b strings.Builder
		w.value(&b, l.Data)
		out[i] = RawLayer{Target: l.Target, Category: l.Category, Data: []byte(b.String())}
	}
	return out
}

// testMemo is shared by every checkRaw of the package's tests, as one replica's memo is
// shared by all its renders: texts meet it both new and remembered, beside other stacks'.
// Small, so that it also starts over now and then.
var testMemo = NewMemo(64 << 10)

// checkRaw merges layers both ways and requires the same bytes json.Marshal gives for the
// decoded merge; the raw merge also through testMemo, twice (the second time every text not
// Shared is remembered, unless the memo started over), with some layers not Shared.
func checkRaw(t *testing.T, layers []Layer, opts Options, seed uint64) {
	t.Helper()
	want, err := json.Marshal(Merge(layers, opts))
	require.NoError(t, err)
	raw := writer{rand.New(rand.NewPCG(seed, 31))}.layers(layers)
	got, err := MergeJSON(context.Background(), raw, opts)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "layers as text: %q", raw)
	for i := range raw {
		raw[i].Shared = (uint64(i)+seed)%3 != 0
	}
	for pass := range 2 {
		got, err = MergeJSONMemo(context.Background(), raw, opts, testMemo)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "through the memo, pass %d; layers as text: %q", pass, raw)
	}
}

// TestMemoRemembersAndBounds: a text is split once and then found; a memo over its bound
// starts over; a text not Shared is never stored; the answer is the same either way.
func TestMemoRemembersAndBounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := NewMemo(1 << 20)
	layers := []RawLayer{
		{Target: "global", Category: "a", Data: []byte(`{"b": {"z": 1, "y": "<"}, "a": [1, 2]}`), Shared: true},
		{Target: "group/o/g", Category: "a", Data: []byte(`{"b": {"x": true}}`), Shared: true},
	}
	want := `{"a":[1,2],"b":{"x":true,"y":"\u003c","z":1}}`
	for range 3 {
		got, err := MergeJSONMemo(ctx, layers, Options{}, m)
		require.NoError(t, err)
		require.Equal(t, want, string(got))
	}
	hits, misses := m.Stats()
	require.Equal(t, int64(2), misses, "each text split once")
	require.Equal(t, int64(4), hits, "then found")

	layers[1].Shared = false
	_, err := MergeJSONMemo(ctx, layers, Options{}, m)
	require.NoError(t, err)
	h2, m2 := m.Stats()
	require.Equal(t, hits+1, h2, "the layer not Shared does not ask the memo")
	require.Equal(t, misses, m2)
	private := []RawLayer{{Target: "node/n", Category: "s", Data: []byte(`{"secret": "plain"}`)}}
	_, err = MergeJSONMemo(ctx, private, Options{}, m)
	require.NoError(t, err)
	m.mu.Lock()
	_, stored := m.rows[`{"secret": "plain"}`]
	m.mu.Unlock()
	require.False(t, stored, "a text not Shared is never remembered")

	small := NewMemo(400) // room for about one of these entries
	for i := range 20 {
		_, err := MergeJSONMemo(ctx, []RawLayer{{Data: []byte(fmt.Sprintf(`{"k%d": "%0100d"}`, i, i)), Shared: true}}, Options{}, small)
		require.NoError(t, err)
	}
	small.mu.Lock()
	defer small.mu.Unlock()
	require.LessOrEqual(t, small.bytes, small.max, "the bound holds")
	require.NotEmpty(t, small.rows)
}

// The Salt-golden vectors, in both list modes, merged from text written in every shape the
// writer knows: the bytes must be json.Marshal's of the decoded merge, and that must be
// Salt's answer.
func TestMergeJSONSaltGolden(t *testing.T) {
	t.Parallel()
	for _, c := range loadGolden(t) {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			layers := layersOf(c.Layers...)
			for seed := range uint64(4) {
				checkRaw(t, layers, Options{MergeLists: false}, seed)
				checkRaw(t, layers, Options{MergeLists: true}, seed)
			}
			for _, mode := range []struct {
				opts Options
				want map[string]any
			}{{Options{}, c.Want}, {Options{MergeLists: true}, c.WantMergeLists}} {
				got, err := MergeJSON(context.Background(), writer{rand.New(rand.NewPCG(7, 7))}.layers(layers), mode.opts)
				require.NoError(t, err)
				require.Equal(t, normalise(t, mode.want), decode(t, string(got)), "Salt's answer")
			}
		})
	}
}

// FuzzMergeJSON compares the raw merge with the decoded one on random layer stacks (the
// fuzz generator of FuzzMerge, plus strings that need escaping) written as random text.
func FuzzMergeJSON(f *testing.F) {
	for _, c := range loadGolden(f)[:40] {
		b, err := json.Marshal(c.Layers)
		require.NoError(f, err)
		f.Add(b, false, uint64(1))
		f.Add(b, true, uint64(2))
	}
	f.Add([]byte(`[{"a<b": "x&y\u2028", "é": [1, 1.0]}, {"a<b": {"\"q\"": "\\"}, "é": [1.00, "\u0001"]}]`), true, uint64(3))
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, false, uint64(4))
	f.Fuzz(func(t *testing.T, data []byte, mergeLists bool, seed uint64) {
		layers := fuzzLayers(data)
		for _, l := range layers {
			if b, _ := json.Marshal(l.Data); !utf8.Valid(b) {
				return
			}
		}
		checkRaw(t, layers, Options{MergeLists: mergeLists}, seed)
	})
}

// The same comparison on many generated stacks, in every run of the tests (the fuzz target
// runs its seeds only).
func TestMergeJSONMatchesMerge(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(31, 3))
	for i := range 3000 {
		data := make([]byte, 64+r.IntN(192))
		for j := range data {
			data[j] = byte(r.UintN(256))
		}
		layers := fuzzLayers(data)
		checkRaw(t, layers, Options{MergeLists: i%2 == 0}, uint64(i))
	}
	checkRaw(t, benchLayersT(t), Options{}, 1)
	checkRaw(t, benchLayersT(t), Options{MergeLists: true}, 2)
}

// Text that is not one JSON object is refused, as DecodeObject refuses it, whichever layer it
// is in and whether or not a later layer would replace it.
func TestMergeJSONRefusesInvalidLayers(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{``, `[]`, `"x"`, `{`, `{"a": 1,}`, `{"a": 01}`, `{"a": 1} {}`, `{"a": tru}`, `{"a": "\x"}`,
		"{\"a\": \"\xff\"}", "{\"a\": \"\x01\"}", `{"a": 1.}`, `{"a": -}`, `{"a" 1}`, `{a: 1}`, `{"a": [1 2]}`, `{"a": "\u12"}`} {
		_, err := MergeJSON(context.Background(), []RawLayer{{Target: "t", Category: "c", Data: []byte(bad)}, {Target: "t", Category: "d", Data: []byte(`{"a": 2}`)}}, Options{})
		require.Error(t, err, "%q", bad)
		if utf8.ValidString(bad) { // encoding/json takes invalid UTF-8; DecodeObject refuses it first
			require.Error(t, json.Unmarshal([]byte(bad), new(map[string]any)), "%q is invalid for encoding/json too", bad)
		}
	}
	deep := strings.Repeat(`{"a":`, maxDepth+2) + "1" + strings.Repeat("}", maxDepth+2)
	_, err := MergeJSON(context.Background(), []RawLayer{{Data: []byte(deep)}}, Options{})
	require.ErrorIs(t, err, errDepth)
}

// A cancelled context stops the raw merge too.
func TestMergeJSONStopsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	big := make([]RawLayer, 2)
	for i := range big {
		var b strings.Builder
		b.WriteString("{")
		for k := range 5000 {
			if k > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"k%d": %d`, k, i)
		}
		b.WriteString("}")
		big[i].Data = []byte(b.String())
	}
	_, err := MergeJSON(ctx, big, Options{})
	require.ErrorIs(t, err, context.Canceled)
}
