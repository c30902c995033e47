package auth

import (
	"context"
	"embed"
	"time"

	"github.com/stratahq/strata/internal/db"
)

//go:embed retention.sql
var retentionFS embed.FS

var retentionQ = db.MustParseQueries(retentionFS, "retention.sql")

// PruneAudit deletes the audit entries recorded before cutoff, batch rows per statement, so
// a large backlog never becomes one long transaction. It returns how many rows it deleted.
// Replicas sweeping at once waste work at worst: each statement deletes whole rows or waits
// for the other's row locks and skips what is gone.
func PruneAudit(ctx context.Context, d *db.DB, cutoff time.Time, batch int) (int64, error) {
	return d.DeleteInBatches(ctx, retentionQ.Get("AuditPrune"), batch, cutoff)
}
