package server

import (
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
