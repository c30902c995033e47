package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/httpapi"
)

// Readiness hysteresis (docs/operations.md, "Readiness"). Under connection exhaustion some
// checks find a pooled connection and pass while others need a new one and fail, so a plain
// check flaps 200/503 — draining and re-adding the replica at a balancer, and resetting
// every `for:` of the alert rules. A transient failure (no connection to spare, or the check
// timing out) therefore turns the replica not ready only once no check has passed for
// readyFailAfter, answering 200 with a warning meanwhile; and a replica it turned not ready is
// ready again only once checks have passed for readyRecoverAfter with no failure between.
// Other reasons (the database unreachable, a schema it cannot run on, …) count at once, as
// before: they do not flap, and a balancer must see them.
const (
	readyFailAfter    = 30 * time.Second
	readyRecoverAfter = 10 * time.Second
)

// readinessGate applies that hysteresis to a readiness check. Every caller (/readyz, the
// strata_ready metrics) goes through the one gate, so they agree.
type readinessGate struct {
	check                   func(context.Context) ([]string, error)
	logger                  *slog.Logger
	now                     func() time.Time
	failAfter, recoverAfter time.Duration

	mu      sync.Mutex
	failing time.Time // first transient failure since the last pass; zero when the last check passed
	passing time.Time // first pass since the gate tripped; zero otherwise
	tripped error     // the transient failure that made the replica not ready, nil when ready
}

func newReadinessGate(check func(context.Context) ([]string, error), logger *slog.Logger) *readinessGate {
	return &readinessGate{check: check, logger: logger, now: time.Now, failAfter: readyFailAfter, recoverAfter: readyRecoverAfter}
}

// transient reports whether a readiness failure is one that comes and goes with load.
func transient(err error) bool {
	return httpapi.ReadyReason(err) == fault.ReasonConnections || errors.Is(err, context.DeadlineExceeded)
}

// Check runs the check and applies the hysteresis to its answer.
func (g *readinessGate) Check(ctx context.Context) ([]string, error) {
	warnings, err := g.check(ctx)
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	switch {
	case err != nil && transient(err):
		g.passing = time.Time{}
		if g.tripped != nil {
			g.tripped = err
			return warnings, err
		}
		if g.failing.IsZero() {
			g.failing = now
			g.logger.Warn("readiness check failed; not ready if no check passes within the grace period", "grace", g.failAfter.String(), "err", err)
		}
		if now.Sub(g.failing) >= g.failAfter {
			g.tripped = err
			g.logger.Warn("not ready: no readiness check passed within the grace period", "since", g.failing.UTC().Format(time.RFC3339), "err", err)
			return warnings, err
		}
		return append(warnings, fmt.Sprintf("readiness checks failing since %s (%s); not ready if none passes within %s",
			g.failing.UTC().Format(time.RFC3339), httpapi.ReadyReason(err), g.failAfter)), nil
	case err != nil:
		// Reported at once; a transient run before it is over.
		g.failing, g.passing, g.tripped = time.Time{}, time.Time{}, nil
		return warnings, err
	}
	g.failing = time.Time{}
	if g.tripped != nil {
		if g.passing.IsZero() {
			g.passing = now
		}
		if now.Sub(g.passing) < g.recoverAfter {
			return warnings, fmt.Errorf("recovering: readiness checks pass since %s, ready once they have for %s: %w",
				g.passing.UTC().Format(time.RFC3339), g.recoverAfter, g.tripped)
		}
		g.logger.Info("ready again: readiness checks passed throughout the recovery period", "period", g.recoverAfter.String())
		g.tripped, g.passing = nil, time.Time{}
	}
	return warnings, nil
}
