package resource

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFindNULLinear (review of issue 27, "What to build" 4: bounded work per request): every
// write of an object's spec (create, replace, patch, bulk line) walks it for NUL characters
// (findNUL), building each member's pointer as a new string: one long key above many short
// members costs (key length × members) bytes, terabytes of copying for an 8 MiB body.
// Here a 16 KB key over 2,000 members must not cost more than a small multiple of the spec.
func TestFindNULLinear(t *testing.T) {
	members := map[string]any{}
	for i := 0; i < 2000; i++ {
		members[fmt.Sprintf("m%d", i)] = "v"
	}
	spec := map[string]any{strings.Repeat("k", 16<<10): members}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, found := findNUL(spec, "/spec")
	runtime.ReadMemStats(&after)
	require.False(t, found)
	allocated := after.TotalAlloc - before.TotalAlloc
	require.Less(t, allocated, uint64(64*(16<<10+2000*8)), "findNUL allocated %d bytes", allocated)
}

// TestFindNULPointer: the pointer built at the end names the member found, escaped (RFC 6901),
// whether the NUL is in a value or in a key.
func TestFindNULPointer(t *testing.T) {
	t.Parallel()
	at, found := findNUL(map[string]any{"a/b": map[string]any{"x~": []any{"v", "w\x00"}}}, "/spec")
	require.True(t, found)
	require.Equal(t, "/spec/a~1b/x~0/1", at)
	at, found = findNUL(map[string]any{"ok": "v", "k": map[string]any{"bad\x00key": 1}}, "/spec")
	require.True(t, found)
	require.Equal(t, "/spec/k/bad\x00key", at)
	_, found = findNUL(map[string]any{"a": []any{"b", map[string]any{"c": "d"}}}, "/spec")
	require.False(t, found)
}
