package resource

import (
	"context"
	"embed"
	"time"

	"github.com/stratahq/strata/internal/db"
)

//go:embed retention.sql
var retentionFS embed.FS

var retentionQ = db.MustParseQueries(retentionFS, "retention.sql")

// PruneChanges deletes the leading run of changes recorded before cutoff (in resourceVersion
// order, up to the first change at or after cutoff, so the log keeps no hole), batch rows
// per statement, so a large backlog never holds one long transaction or one huge lock set.
// It returns how many rows it deleted. The changes log is what watch resumes from, so the retention must be
// longer than any watcher's expected absence; a watcher that comes back after it is told its
// resourceVersion is too old and lists again (Kubernetes' 410 Gone). The compaction point
// that 410 is decided by (watch_compaction, migration 0012) is advanced by a trigger in the
// transaction of each deleting statement, so it is never behind what is gone, whoever
// deletes.
//
// Several replicas may sweep at once: they take the same oldest rows, one waits for the
// other's row locks and then finds them gone, so the work is wasted at worst, never wrong.
//
// Versions in flight are never pruned over: before deleting, the sweep settles every version
// missing below the first kept change (versions.go; this waits for writers still holding
// one), so no version below the compaction point can commit afterwards.
func PruneChanges(ctx context.Context, d *db.DB, cutoff time.Time, batch int) (int64, error) {
	for {
		var gaps []int64
		err := d.ReadTx(ctx, func(tx *db.Tx) error {
			var keep int64
			if err := tx.QueryRow(ctx, retentionQ.Get("ChangesFirstKept"), cutoff).Scan(&keep); err != nil {
				return err
			}
			var err error
			gaps, err = versionGaps(ctx, tx, 0, keep-1)
			return err
		})
		if err != nil {
			return 0, err
		}
		if err := fillVersions(ctx, d, gaps); err != nil {
			return 0, err
		}
		if len(gaps) <= maxVersionGaps {
			break
		}
	}
	return d.DeleteInBatches(ctx, retentionQ.Get("ChangesPrune"), batch, cutoff)
}
