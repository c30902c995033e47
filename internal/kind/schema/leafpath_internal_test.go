package schema

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUnknownKeysLinear (review of issue 27, "What to build" 4: bounded work per request):
// every object write walks the spec for keys its schema does not define (unknownKeys). Under
// additionalProperties (a map of maps) it built each member's pointer as a new string, so one
// long key above many members cost (key length × members) bytes on every write. Here a 16 KB
// key over 2,000 members must not cost more than a small multiple of the spec.
func TestUnknownKeysLinear(t *testing.T) {
	s, err := Parse([]byte(`{"type": "object", "additionalProperties": {"type": "object", "additionalProperties": {"type": "string"}}}`))
	require.NoError(t, err)
	members := map[string]any{}
	for i := 0; i < 2000; i++ {
		members[fmt.Sprintf("m%d", i)] = "v"
	}
	spec := map[string]any{strings.Repeat("k", 16<<10): members}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out := unknownKeys(s.root, spec, "/spec", nil, nil)
	runtime.ReadMemStats(&after)
	require.Empty(t, out)
	allocated := after.TotalAlloc - before.TotalAlloc
	require.Less(t, allocated, uint64(64*(16<<10+2000*8)), "unknownKeys allocated %d bytes", allocated)
}

// TestUnknownKeysPointers: the pointers built only where a key is reported name it exactly
// (escaped), below maps and lists alike.
func TestUnknownKeysPointers(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(`{"type": "object", "properties": {"list": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}}},
		"additionalProperties": false}`))
	require.NoError(t, err)
	out := unknownKeys(s.root, map[string]any{"list": []any{map[string]any{"a": "x"}, map[string]any{"a": "y", "b/~": "z"}}, "extra": 1}, "/spec", nil, nil)
	var at []string
	for _, v := range out {
		require.Equal(t, "additionalProperties", v.Keyword)
		at = append(at, v.Instance)
	}
	require.Equal(t, []string{"/spec/extra", "/spec/list/1/b~1~0"}, at)
}
