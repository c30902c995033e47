package server

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/httpapi"
)

// TestReadinessDoesNotFlap (issue 28, item 6): under connection exhaustion some readiness
// checks pass and some fail with reason connections; /readyz answered each as it came, so it
// flapped 200/503 and reset StrataNotReady's `for: 2m`. The gate turns such failures into
// not-ready only once none has passed for the grace period, and back to ready only once
// checks have passed for the recovery period. The check here is scripted (its answers are
// what the database gave in the fault drills: a pass, or 53300's "connections" fault) and
// the clock is the test's, so every step is deterministic.
func TestReadinessDoesNotFlap(t *testing.T) {
	t.Parallel()
	exhausted := fault.Unavailable(fault.ReasonConnections, errors.New("FATAL: sorry, too many clients already (SQLSTATE 53300)"), "the database has no connection to spare")
	unreachable := fault.Unavailable(fault.ReasonUnavailable, errors.New("connection refused"), "the database is not reachable")
	var next error
	clock := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	g := newReadinessGate(func(context.Context) ([]string, error) { return nil, next }, slog.New(slog.DiscardHandler))
	g.now = func() time.Time { return clock }
	probe := func(result error, after time.Duration) (ready bool, warnings []string, reason string) {
		clock = clock.Add(after)
		next = result
		w, err := g.Check(context.Background())
		if err != nil {
			return false, w, httpapi.ReadyReason(err)
		}
		return true, w, ""
	}

	// Alternating passes and failures, a probe every 2 s for 5 minutes: always ready (with a
	// warning while the last check failed), never a 503.
	for i := range 150 {
		result := error(nil)
		if i%2 == 1 {
			result = exhausted
		}
		ready, warnings, _ := probe(result, 2*time.Second)
		require.True(t, ready, "probe %d", i)
		if result != nil {
			require.Len(t, warnings, 1)
			require.Contains(t, warnings[0], "connections")
		}
	}

	// Failing throughout: ready with a warning until the grace period has passed, then not
	// ready with reason connections.
	for elapsed := time.Duration(0); elapsed < readyFailAfter; elapsed += 2 * time.Second {
		ready, _, _ := probe(exhausted, 2*time.Second)
		require.Equal(t, elapsed+2*time.Second < readyFailAfter, ready, "after %v of failures", elapsed+2*time.Second)
	}
	ready, _, reason := probe(exhausted, 2*time.Second)
	require.False(t, ready)
	require.Equal(t, fault.ReasonConnections, reason)

	// Now not ready, alternating answers keep it not ready (no flapping back either) …
	for i := range 50 {
		result := error(nil)
		if i%2 == 1 {
			result = exhausted
		}
		ready, _, reason := probe(result, 2*time.Second)
		require.False(t, ready, "probe %d", i)
		require.Equal(t, fault.ReasonConnections, reason)
	}
	// … and passes throughout the recovery period make it ready again.
	for elapsed := time.Duration(0); elapsed < readyRecoverAfter; elapsed += 2 * time.Second {
		ready, _, _ := probe(nil, 2*time.Second)
		require.False(t, ready, "recovering after %v", elapsed)
	}
	ready, _, _ = probe(nil, 2*time.Second)
	require.True(t, ready)

	// Other reasons count at once, both ways, as before.
	ready, _, reason = probe(unreachable, time.Second)
	require.False(t, ready)
	require.Equal(t, fault.ReasonUnavailable, reason)
	ready, _, _ = probe(nil, time.Second)
	require.True(t, ready)
}
