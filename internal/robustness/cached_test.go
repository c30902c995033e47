package robustness

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const rowKey = "node/n1/r"

func put(x *h, replica int, marker string, call, ret int64) {
	x.add(Op{Family: "pillar", Key: rowKey, Kind: "put", Replica: replica, Marker: marker, Call: call, Return: ret, Outcome: OK, Status: 200})
}

func cachedRender(x *h, replica int, marker string, call, ret int64) {
	x.add(Op{Family: "cached", Key: rowKey, Kind: "render", Replica: replica, Exists: marker != "", ReadMarker: marker, Call: call, Return: ret, Outcome: OK, Status: 200})
}

func TestCachedRendersLegal(t *testing.T) {
	t.Parallel()
	var x h
	cachedRender(&x, 0, "", 0, 5) // before any write: an empty render
	put(&x, 0, "m1", 10, 20)
	cachedRender(&x, 0, "m1", 30, 35) // its own replica's write: seen
	put(&x, 1, "m2", 40, 50)
	// Replica 0 has not heard of replica 1's write yet: behind, measured, allowed.
	cachedRender(&x, 0, "m1", 60, 65)
	// A write in flight may or may not be seen.
	put(&x, 1, "m3", 70, 90)
	cachedRender(&x, 1, "m3", 75, 80)
	cachedRender(&x, 0, "m2", 75, 80)
	// A failed render says nothing; a strict render is the pillar model's.
	x.add(Op{Family: "cached", Key: rowKey, Kind: "render", Replica: 0, Call: 100, Return: 105, Outcome: Failed, Status: 503})
	vs, st := CheckCachedRenders(x.ops)
	require.Empty(t, vs)
	require.Equal(t, 5, st.Renders)
	require.Equal(t, 1, st.Stale)
	require.Equal(t, 10*time.Nanosecond, st.MaxBehind)
	// Cached renders are not part of the linearizability check (they may be behind).
	require.Empty(t, linearizable(t, x.ops).Violations)
}

func TestCachedRendersViolations(t *testing.T) {
	t.Parallel()
	for name, build := range map[string]func(x *h){
		// Replica 0 acknowledged m2, then served m1 from its cache.
		"older than its own write": func(x *h) {
			put(x, 0, "m1", 0, 10)
			put(x, 0, "m2", 20, 30)
			cachedRender(x, 0, "m1", 40, 45)
		},
		// Replica 0 acknowledged the first write, then served the row as absent.
		"absent after its own write": func(x *h) {
			put(x, 0, "m1", 0, 10)
			cachedRender(x, 0, "", 20, 25)
		},
		// A value no write stored.
		"invented": func(x *h) {
			put(x, 0, "m1", 0, 10)
			cachedRender(x, 1, "zz", 20, 25)
		},
		// A value whose write was sent only after the render answered.
		"from the future": func(x *h) {
			cachedRender(x, 1, "m1", 0, 5)
			put(x, 0, "m1", 10, 20)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var x h
			build(&x)
			vs, _ := CheckCachedRenders(x.ops)
			requireViolation(t, vs, "cached-render")
		})
	}
}
