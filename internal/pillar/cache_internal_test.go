package pillar

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCacheDropsRendersThatRacedAnInvalidation: a render that started before an invalidation
// (it read generation g, then a change committed and its notification arrived while the
// render was still reading the old snapshot) is not stored, so it cannot outlive the
// invalidation; a render that started after it is.
func TestCacheDropsRendersThatRacedAnInvalidation(t *testing.T) {
	t.Parallel()
	c := NewCache(0)
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

// rendered is a render of about size bytes of JSON: keys of 100-byte strings.
func rendered(size int) Rendered {
	p := map[string]any{}
	for i := 0; i*110 < size; i++ {
		p[fmt.Sprintf("k%05d", i)] = strings.Repeat("v", 100)
	}
	b, _ := json.Marshal(p)
	return Rendered{Pillar: p, ETag: `"x"`, size: int64(len(b))}
}

// TestCacheIsBoundedLRU (issue 17): the cache held one entry per minion ever rendered. It is
// bounded by the cost of its renders: the least recently used go first, a render larger than
// the whole bound is not stored, and evictions are counted.
func TestCacheIsBoundedLRU(t *testing.T) {
	t.Parallel()
	r := rendered(1000)
	cost := entryCost("n0", r)
	c := NewCache(3 * cost)
	c.setSubscribed(true)
	put := func(node string) {
		_, _, gen := c.get(node)
		c.put(node, gen, r)
	}
	for _, n := range []string{"n0", "n1", "n2"} {
		put(n)
	}
	bytes, entries := c.Size()
	require.Equal(t, 3, entries)
	require.Equal(t, 3*cost, bytes)
	_, ok, _ := c.get("n0") // n0 is now the most recently used; n1 the least
	require.True(t, ok)
	put("n3")
	_, ok, _ = c.get("n1")
	require.False(t, ok, "the least recently used render is evicted")
	for _, n := range []string{"n0", "n2", "n3"} {
		_, ok, _ := c.get(n)
		require.True(t, ok, n)
	}
	require.Equal(t, int64(1), c.Evictions())
	put("n3") // replacing an entry does not count twice
	bytes, entries = c.Size()
	require.Equal(t, 3, entries)
	require.Equal(t, 3*cost, bytes)

	big := rendered(4000)
	_, _, gen := c.get("huge")
	c.put("huge", gen, big)
	_, ok, _ = c.get("huge")
	require.False(t, ok, "a render larger than the bound is not stored")
	_, entries = c.Size()
	require.Equal(t, 3, entries, "and evicts nothing")

	c.Invalidate()
	bytes, entries = c.Size()
	require.Zero(t, bytes)
	require.Zero(t, entries)
}

// BenchmarkCache100kMinions renders (here: stores ready renders of) 100,000 minions with
// 10 KB pillars into a cache with the default bound, accessed with a Zipf distribution (a
// few minions rendered often, most rarely, as highstates across a fleet). It reports the
// heap the cache holds, the bound's own count, the entries kept, and the hit ratio.
func BenchmarkCache100kMinions(b *testing.B) {
	const minions = 100_000
	r := rendered(10_000)
	for b.Loop() {
		c := NewCache(0)
		c.setSubscribed(true)
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		rng := rand.New(rand.NewPCG(1, 2))
		z := rand.NewZipf(rng, 1.1, 1, minions-1)
		hits, total := 0, 0
		for i := 0; i < 4*minions; i++ {
			node := fmt.Sprintf("minion-%06d", z.Uint64())
			total++
			if _, ok, gen := c.get(node); ok {
				hits++
			} else {
				// A fresh render: a copy of the map, as each render decodes its own.
				cp := make(map[string]any, len(r.Pillar))
				for k, v := range r.Pillar {
					cp[k] = strings.Clone(v.(string))
				}
				c.put(node, gen, Rendered{Pillar: cp, ETag: r.ETag, size: r.size})
			}
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		bytes, entries := c.Size()
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(bytes)/(1<<20), "counted-MiB")
		b.ReportMetric(float64(entries), "entries")
		b.ReportMetric(float64(hits)/float64(total), "hit-ratio")
		runtime.KeepAlive(c)
	}
}
