package pillar

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCacheDropsRendersThatRacedAnInvalidation: a render that started before an invalidation
// (it read generation g, then a change committed and its notification arrived while the
// render was still reading the old snapshot) is not stored, so it cannot outlive the
// invalidation; a render that started after it is.
func TestCacheDropsRendersThatRacedAnInvalidation(t *testing.T) {
	t.Parallel()
	c := NewCache()
	c.setSubscribed(true)
	_, ok, gen := c.get("web01")
	require.False(t, ok)
	c.Invalidate() // the change's notification arrives during the render
	c.put("web01", gen, Rendered{ETag: `"old"`})
	_, ok, gen2 := c.get("web01")
	require.False(t, ok, "a render older than an invalidation is never served")
	c.put("web01", gen2, Rendered{ETag: `"new"`})
	r, ok, _ := c.get("web01")
	require.True(t, ok)
	require.Equal(t, `"new"`, r.ETag)

	c.setSubscribed(false)
	_, ok, _ = c.get("web01")
	require.False(t, ok, "an unsubscribed cache serves nothing")
	require.Error(t, c.Ready())
}
