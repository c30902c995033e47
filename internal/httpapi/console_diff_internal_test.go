package httpapi

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHistoryDiffLinear (issue 27, finding 7 / "What to build" 4: the console writes any row
// in time and space linear in its size): the row page's history diff (sideBySide) must not
// allocate an n×m table. Two revisions of a row holding a list of n items are n lines each
// once indented; a quadratic alignment of 4,000 lines allocates 4,001×4,001 ints (128 MB),
// and a list of 100,000 items (a 200 KB body) would take 80 GB: any pillars:write holder can
// store two such revisions and then open the row's page in the console.
func TestHistoryDiffLinear(t *testing.T) {
	const n = 4000
	var a, b strings.Builder
	a.WriteString("[\n")
	b.WriteString("[\n")
	for i := 0; i < n; i++ {
		a.WriteString("  0,\n")
		b.WriteString("  1,\n")
	}
	a.WriteString("]")
	b.WriteString("]")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rows := sideBySide(a.String(), b.String())
	runtime.ReadMemStats(&after)
	require.NotEmpty(t, rows)
	allocated := after.TotalAlloc - before.TotalAlloc
	size := uint64(a.Len() + b.Len())
	require.Less(t, allocated, 200*size, "sideBySide allocated %d bytes for %d bytes of text", allocated, size)
}

// TestHistoryDiffAligns: the linear diff still shows each text whole in its column, pairs only
// equal lines as unchanged, aligns small texts exactly (as many unchanged rows as their
// longest common subsequence), and marks only what an edit touched in a long text.
func TestHistoryDiffAligns(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(27, 4))
	text := func(n, alphabet int) []string {
		lines := make([]string, n)
		for i := range lines {
			lines[i] = fmt.Sprintf("l%d", rng.IntN(alphabet))
		}
		return lines
	}
	lcs := func(x, y []string) int {
		t := make([][]int, len(x)+1)
		for i := range t {
			t[i] = make([]int, len(y)+1)
		}
		for i := len(x) - 1; i >= 0; i-- {
			for j := len(y) - 1; j >= 0; j-- {
				if x[i] == y[j] {
					t[i][j] = t[i+1][j+1] + 1
				} else {
					t[i][j] = max(t[i+1][j], t[i][j+1])
				}
			}
		}
		return t[0][0]
	}
	check := func(x, y []string) (unchanged int) {
		t.Helper()
		rows := sideBySide(strings.Join(x, "\n"), strings.Join(y, "\n"))
		var old, new []string
		for _, r := range rows {
			if r.Old != "" {
				old = append(old, r.Old)
			}
			if r.New != "" {
				new = append(new, r.New)
			}
			if !r.Changed {
				require.Equal(t, r.Old, r.New, "an unchanged row shows one line twice")
				unchanged++
			}
		}
		require.True(t, slices.Equal(x, old), "the old text, whole and in order: %q / %q", x, old)
		require.True(t, slices.Equal(y, new), "the new text, whole and in order: %q / %q", y, new)
		return unchanged
	}
	for i := 0; i < 300; i++ {
		x, y := text(rng.IntN(12), 4), text(rng.IntN(12), 4)
		require.Equal(t, lcs(x, y), check(x, y), "small texts align exactly: %q / %q", x, y)
		x, y = text(rng.IntN(120), 8), text(rng.IntN(120), 8)
		require.Equal(t, lcsSideBySide(x, y), sideBySide(strings.Join(x, "\n"), strings.Join(y, "\n")), "small revisions show as they always did")
		x, y = text(rng.IntN(400), 50), text(rng.IntN(400), 50)
		check(x, y)
	}

	// One item edited, one inserted and one removed in a 3,000-line text: only they change.
	x := make([]string, 3000)
	for i := range x {
		x[i] = fmt.Sprintf("  item-%d,", i)
	}
	y := slices.Clone(x)
	y[100] = "  edited,"
	y = slices.Insert(slices.Delete(y, 2000, 2001), 1000, "  inserted,")
	require.Equal(t, 2998, check(x, y), "all but the edited and the removed line are unchanged")
}

// lcsSideBySide is the console's diff before it was bounded (a whole LCS table), which small
// revisions must still get row for row.
func lcsSideBySide(x, y []string) []diffLine {
	n, m := len(x), len(y)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []diffLine
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && x[i] == y[j]:
			out = append(out, diffLine{Old: x[i], New: y[j]})
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			out = append(out, diffLine{New: y[j], Changed: true})
			j++
		default:
			out = append(out, diffLine{Old: x[i], Changed: true})
			i++
		}
	}
	return out
}
