package pillar

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMaskedLeafLinear (review of issue 27, "What to build" 4: bounded work per request):
// every PUT of a secret category's row walks it for the mask (maskedLeaf), building each
// leaf's pointer as a new string: one long key above many short leaves costs (key length ×
// leaves) bytes, terabytes of copying for an 8 MiB body (a 4 MB key over 700,000 leaves).
// Here a 16 KB key over 2,000 leaves (a 30 KB row) must not cost more than a small multiple.
func TestMaskedLeafLinear(t *testing.T) {
	leaves := map[string]any{}
	for i := 0; i < 2000; i++ {
		leaves[fmt.Sprintf("l%d", i)] = "v"
	}
	data := map[string]any{strings.Repeat("k", 16<<10): leaves}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	require.Empty(t, maskedLeaf(data, ""))
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	require.Less(t, allocated, uint64(64*(16<<10+2000*8)), "maskedLeaf allocated %d bytes", allocated)
}

// TestMaskedLeafPointer: the pointer built at the end names the first masked leaf in key
// order, escaped (RFC 6901).
func TestMaskedLeafPointer(t *testing.T) {
	t.Parallel()
	data := map[string]any{"a": "x", "b/c": map[string]any{"d~": []any{"plain", "(secret)"}}, "z": "(secret)"}
	require.Equal(t, "/b~1c/d~0/1", maskedLeaf(data, ""))
	require.Equal(t, "", maskedLeaf(map[string]any{"a": []any{"x", map[string]any{"b": "y"}}}, ""))
}
