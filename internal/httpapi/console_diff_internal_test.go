package httpapi

import (
	"runtime"
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
