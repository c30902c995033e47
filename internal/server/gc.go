package server

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The garbage collector's target while the live heap is small. Go's default (GOGC=100)
// collects when the heap has grown by its live size; strata's requests allocate a lot for
// little live data (a label PATCH decodes and encodes its object several times), so on a
// small heap the collector ran often: 12 % of strata's CPU under 16 writing clients. At 200
// it runs half as often — measured 17 % less strata CPU per label PATCH (docs/benchmarks.md)
// — for a heap of up to three times the live data instead of two. Above smallHeap of live
// data (a list index of a few hundred thousand objects) that would cost real memory, so the
// target goes back to Go's default there (with hysteresis, so it does not flap). An operator
// who sets GOGC keeps it: strata then never changes the target.
const (
	smallHeapGCPercent = 200
	smallHeap          = 256 << 20
	largeHeapAgain     = 192 << 20 // back to smallHeapGCPercent below this
	gcCheckEvery       = 10 * time.Second
)

// gcPercentFor is the target for a live heap of live bytes when the current one is current.
func gcPercentFor(live uint64, current int) int {
	switch {
	case live > smallHeap:
		return 100
	case live < largeHeapAgain:
		return smallHeapGCPercent
	}
	return current
}

// tuneGC sets the collector's target from the live heap, now and every gcCheckEvery until
// ctx ends, unless GOGC is set.
func tuneGC(ctx context.Context, logger *slog.Logger) {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	current := smallHeapGCPercent
	debug.SetGCPercent(current)
	go func() {
		t := time.NewTicker(gcCheckEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			metrics.Read(sample)
			if sample[0].Value.Kind() != metrics.KindUint64 {
				return
			}
			live := sample[0].Value.Uint64()
			if next := gcPercentFor(live, current); next != current {
				debug.SetGCPercent(next)
				logger.Info("garbage collector target changed", "gogc", next, "live_heap_bytes", live)
				current = next
			}
		}
	}()
}
