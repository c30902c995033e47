package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/resource"
)

// DefaultChangesRetention keeps a week of the changes log: long enough for a watcher that
// was away over a weekend to resume instead of listing again.
const DefaultChangesRetention = 7 * 24 * time.Hour

// DefaultAuditRetention keeps 90 days of audit log, a common minimum for reviewing who
// changed what (raise it, or set 0, where policy asks for more).
const DefaultAuditRetention = 90 * 24 * time.Hour

// retentionInterval is how often a replica sweeps; retentionBatch bounds the rows one
// statement deletes, so a sweep never becomes one long transaction.
const (
	retentionInterval = 10 * time.Minute
	retentionBatch    = 5000
)

// retentionLoop deletes changes and audit entries older than their retention, once soon
// after start and then every retentionInterval, until ctx ends. Every replica sweeps; they
// cannot conflict (see resource.PruneChanges), and a replica that dies mid-sweep leaves only
// whole batches deleted.
func retentionLoop(ctx context.Context, d *db.DB, cfg Config, logger *slog.Logger) {
	if cfg.ChangesRetention <= 0 && cfg.AuditRetention <= 0 {
		return
	}
	timer := time.NewTimer(time.Minute)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		sweep(ctx, d, cfg, logger, time.Now())
		timer.Reset(retentionInterval)
	}
}

// sweep runs one retention pass as of now.
func sweep(ctx context.Context, d *db.DB, cfg Config, logger *slog.Logger, now time.Time) {
	if cfg.ChangesRetention > 0 {
		n, err := resource.PruneChanges(ctx, d, now.Add(-cfg.ChangesRetention), retentionBatch)
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Warn("retention: prune changes", "err", err)
		case n > 0:
			logger.Info("retention: pruned changes", "rows", n, "retention", cfg.ChangesRetention)
		}
	}
	if cfg.AuditRetention > 0 {
		n, err := auth.PruneAudit(ctx, d, now.Add(-cfg.AuditRetention), retentionBatch)
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Warn("retention: prune audit log", "err", err)
		case n > 0:
			logger.Info("retention: pruned audit entries", "rows", n, "retention", cfg.AuditRetention)
		}
	}
}
