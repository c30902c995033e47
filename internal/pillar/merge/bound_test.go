package merge

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// distinctItems is n list items no two of which are equal: objects, strings and numbers, so
// that every kind of item goes through the list merge's membership test.
func distinctItems(n, offset int) []any {
	out := make([]any, n)
	for i := range out {
		switch k := i + offset; k % 3 {
		case 0:
			out[i] = fmt.Sprintf("item-%d", k)
		case 1:
			out[i] = json.Number(fmt.Sprint(k))
		default:
			out[i] = map[string]any{"host": fmt.Sprintf("h%d", k), "port": json.Number("22")}
		}
	}
	return out
}

// listMergeComparisons is how many equality tests merging two n-item lists (half of the
// higher list's items already in the lower one) costs.
func listMergeComparisons(n int) int {
	m := &merger{mergeLists: true, ctx: context.Background()}
	lower := distinctItems(n, 0)
	higher := distinctItems(n, n/2)
	m.appendNew(lower, higher)
	return m.comparisons
}

// The list merge is linear: four times the items cost about four times the comparisons, not
// sixteen (the finding: slices.ContainsFunc per item, 5–12 s for two 10,000-item lists). The
// work is counted, never timed.
func TestListMergeIsNotQuadratic(t *testing.T) {
	t.Parallel()
	small, large := listMergeComparisons(1000), listMergeComparisons(4000)
	require.Positive(t, small)
	require.LessOrEqual(t, large, 5*small, "n=1000: %d comparisons, n=4000: %d", small, large)
	require.LessOrEqual(t, large, 2*4000, "at most a couple of comparisons per item")
}

// Items equal under Python's == (1 and 1.0, objects by content whatever their key order, -0
// and 0) are found in the lower list; duplicates inside the higher list are all appended
// (membership is tested against the lower list only, Salt's rule).
func TestListMergeSetKeepsEquality(t *testing.T) {
	t.Parallel()
	lower := decode(t, `[1, "a", {"x": [1, 2.0], "y": null}, 0, true, 12345678901234567890123, 0.5, [], {}]`).([]any)
	higher := decode(t, `[1.0, "a", {"y": null, "x": [1.0, 2]}, -0, 1e0, true, 1, 12345678901234567890123.0, 0.50, "b", "b", 3, 3, false, 1.5, [[]], {"z": 1}]`).([]any)
	m := &merger{mergeLists: true, ctx: context.Background()}
	got := m.appendNew(lower, higher)
	// 12345678901234567890123.0 is a float that rounds, so Python finds it unequal to the
	// integer, and so does the merge.
	want := decode(t, `[1, "a", {"x": [1, 2.0], "y": null}, 0, true, 12345678901234567890123, 0.5, [], {},
		12345678901234567890123.0, "b", "b", 3, 3, false, 1.5, [[]], {"z": 1}]`)
	require.Equal(t, normalise(t, want), normalise(t, got))
	// The hash set agrees with the pairwise rule it replaces, item by item.
	for _, x := range higher {
		pairwise := false
		for _, y := range lower {
			pairwise = pairwise || equal(x, y)
		}
		require.Equal(t, pairwise, newItemSet(lower).contains(x), "item %v", x)
	}
}

// stopAfter is a context whose Err turns to Canceled after n looks, so a test cancels a merge
// in its middle, deterministically.
type stopAfter struct {
	context.Context
	looks atomic.Int64
	n     int64
}

func (c *stopAfter) Err() error {
	if c.looks.Add(1) > c.n {
		return context.Canceled
	}
	return nil
}

func (c *stopAfter) Done() <-chan struct{} { return nil }

func (c *stopAfter) Deadline() (time.Time, bool) { return time.Time{}, false }

func bigListLayers(n int) []Layer {
	return []Layer{
		{Target: "global", Category: "c", Data: map[string]any{"l": distinctItems(n, 0), "o": map[string]any{"k": "v"}}},
		{Target: "node/n", Category: "c", Data: map[string]any{"l": distinctItems(n, n/2)}},
	}
}

// A cancelled request stops its render: Merge and Explain look at the context while they
// work, in both list modes, and answer its error instead of a pillar.
func TestMergeStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	layers := bigListLayers(10000)
	for _, mergeLists := range []bool{true, false} {
		opts := Options{MergeLists: mergeLists}
		ctx := &stopAfter{Context: context.Background(), n: 2}
		out, err := MergeContext(ctx, layers, opts)
		if mergeLists {
			require.ErrorIs(t, err, context.Canceled, "Merge, mergeLists")
			require.Nil(t, out)
		} else {
			// Without list merging two layers of two keys are a few steps: nothing to stop.
			require.NoError(t, err)
		}

		ctx = &stopAfter{Context: context.Background(), n: 2}
		out, expl, err := ExplainContext(ctx, layers, opts)
		if mergeLists {
			require.ErrorIs(t, err, context.Canceled, "Explain, mergeLists")
			require.Nil(t, out)
			require.Nil(t, expl)
		} else {
			require.NoError(t, err)
		}
	}

	// Many keys stop too, without any list: a cancelled context stops a wide object.
	wide := map[string]any{}
	for i := range 5000 {
		wide[fmt.Sprint("k", i)] = map[string]any{"v": json.Number(fmt.Sprint(i))}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := MergeContext(ctx, []Layer{{Data: wide}, {Data: wide}}, Options{})
	require.ErrorIs(t, err, context.Canceled)
	_, _, err = ExplainContext(ctx, []Layer{{Data: wide}, {Data: wide}}, Options{})
	require.ErrorIs(t, err, context.Canceled)

	// A live context merges as Merge does.
	got, err := MergeContext(context.Background(), layers, Options{MergeLists: true})
	require.NoError(t, err)
	require.True(t, equal(Merge(layers, Options{MergeLists: true}), got), "MergeContext equals Merge")
	require.Equal(t, 15000, len(got["l"].([]any)), "the lower 10,000 items and the higher list's 5,000 new ones")
}
