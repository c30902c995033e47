package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/resource"
)

// selectorSyncInterval is how often a replica parses pending group selectors.
const selectorSyncInterval = time.Minute

// selectorSyncLoop parses the group selectors that are pending in group_selectors (migration
// 0009: groups from before it, or written by the previous release during a staged rollout)
// once now and then every selectorSyncInterval, until ctx ends. Until a row is parsed,
// node_pillars answers the nodes of its org with a NULL row (Salt's _errors), never with a
// guess. Every replica runs it; they cannot conflict (see resource.SyncGroupSelectors).
func selectorSyncLoop(ctx context.Context, d *db.DB, logger *slog.Logger) {
	for {
		n, err := resource.SyncGroupSelectors(ctx, d)
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Warn("group selectors: parse pending", "err", err, "parsed", n)
		case n > 0:
			logger.Info("group selectors: parsed pending selectors", "groups", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(selectorSyncInterval):
		}
	}
}
