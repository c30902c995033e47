package server

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGCPercentFor: 200 while the live heap is small, Go's default above smallHeap, and
// between the two thresholds whatever it was, so a heap around one of them does not flap.
func TestGCPercentFor(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		live          uint64
		current, want int
	}{
		{0, 200, 200},
		{100 << 20, 100, 200},
		{smallHeap + 1, 200, 100},
		{2 << 30, 200, 100},
		{(smallHeap + largeHeapAgain) / 2, 200, 200},
		{(smallHeap + largeHeapAgain) / 2, 100, 100},
		{largeHeapAgain - 1, 100, 200},
	} {
		require.Equal(t, c.want, gcPercentFor(c.live, c.current), "live %d, current %d", c.live, c.current)
	}
}

// TestTuneGCLeavesGOGCAlone: with GOGC in the environment strata never changes the target;
// without it, the target is smallHeapGCPercent from the start (the test's heap is small).
// Not parallel: it sets the process's environment and collector target.
func TestTuneGCLeavesGOGCAlone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)

	t.Setenv("GOGC", "50")
	debug.SetGCPercent(50)
	tuneGC(ctx, slog.Default())
	require.Equal(t, 50, debug.SetGCPercent(50), "GOGC set: the target is the operator's")

	require.NoError(t, os.Unsetenv("GOGC"))
	tuneGC(ctx, slog.Default())
	require.Equal(t, smallHeapGCPercent, debug.SetGCPercent(100), "GOGC unset: strata's target for a small heap")
}
