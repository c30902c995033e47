package merge

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// Explain visits members in the byte order of their pointers without building them: a key
// that is a prefix of its sibling's sorts by what follows it in the pointer ("/" for an object
// explained below it, nothing for a leaf), and escaped keys sort as they are spelled.
func TestExplainOrderAndPointers(t *testing.T) {
	t.Parallel()
	data := object(t, `{"a": {"x": 1}, "a!": 2, "a0": {"y": 3, "z": {"w": 7}}, "ab": 4, "": {"": 5}, "b/c": {"d~e": 6}, "e": {}}`)
	_, expl := Explain([]Layer{{Target: "global", Category: "c", Data: data}}, Options{})
	var paths []string
	for _, e := range expl {
		paths = append(paths, e.Path.String())
	}
	require.Equal(t, []string{"//", "/a!", "/a/x", "/a0/y", "/a0/z/w", "/ab", "/b~1c/d~0e", "/e"}, paths)
	require.True(t, slices.IsSorted(paths))

	// Shared and Rest rebuild each pointer from the previous one, which is how an answer
	// writes them compactly.
	prev := Pointer{}
	for i, e := range expl {
		n := prev.Shared(e.Path)
		require.Equal(t, paths[i], prev.String()[:n]+e.Path.Rest(n), "pointer %d", i)
		require.Equal(t, len(paths[i]), e.Path.Len())
		prev = e.Path
	}
	require.Equal(t, len("/a0"), expl[3].Path.Shared(expl[4].Path))
	require.Equal(t, 0, expl[2].Path.Shared(expl[3].Path), "/a/x and /a0/y share bytes, not an object")

	b, err := json.Marshal(expl[2])
	require.NoError(t, err)
	require.JSONEq(t, `{"path": "/a/x", "setBy": {"target": "global", "category": "c"}}`, string(b))
}
