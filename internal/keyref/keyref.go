// Package keyref reads and tidies the database's record of the key-encryption keys its sealed
// values are wrapped with (table key_refs, migration 0031; issue 28, "keys as facts"). The
// triggers of that migration record a key id in the transaction that seals a value under it,
// so what a replica must hold to read every value is one read of a small table away; package
// server compares it with the replica's keyring for /readyz, secret requests and start.
//
// The record may name a key no value references any more (after a rotation re-wrapped them
// all): Prune removes such ids, so a key shows retirable, and a replica started without it is
// ready, only once nothing needs it.
package keyref

import (
	"context"
	"embed"
	"errors"
	"slices"
	"time"

	"github.com/stratahq/strata/internal/db"
)

//go:embed queries.sql
var queryFS embed.FS

var q = db.MustParseQueries(queryFS, "queries.sql")

// Referenced returns the key ids the database's sealed values are recorded under, sorted.
func Referenced(ctx context.Context, d *db.DB) ([]string, error) {
	return scanIDs(d.Query(ctx, q.Get("Referenced")))
}

// Missing returns the referenced key ids that held does not contain, sorted.
func Missing(referenced, held []string) []string {
	var out []string
	for _, id := range referenced {
		if !slices.Contains(held, id) {
			out = append(out, id)
		}
	}
	return out
}

// PruneLockTimeout bounds how long Prune waits for the writers of sealed values in flight;
// past it nothing is pruned (ErrPruneBusy), rather than holding every secret write back
// behind a long transaction.
const PruneLockTimeout = 2 * time.Second

// ErrPruneBusy is a prune that could not take its lock within PruneLockTimeout.
var ErrPruneBusy = errors.New("the key record could not be tidied now: writers of secret values held it; run the command again")

// Prune removes the recorded key ids no sealed value references any more and returns them.
// It counts every sealed value first without a lock; only when that finds candidates does it
// take the lock that holds writers of sealed values back (for at most PruneLockTimeout of
// waiting, then for one recount) and remove the candidates still unreferenced.
func Prune(ctx context.Context, d *db.DB) ([]string, error) {
	var removed []string
	err := d.InTx(ctx, func(tx *db.Tx) error {
		candidates, err := scanIDs(tx.Query(ctx, q.Get("Unreferenced")))
		if err != nil || len(candidates) == 0 {
			return err
		}
		if _, err := tx.Exec(ctx, q.Get("LockTimeout"), PruneLockTimeout.String()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, q.Get("LockForPrune")); err != nil {
			if errors.Is(err, db.ErrLockNotAvailable) {
				return ErrPruneBusy
			}
			return err
		}
		removed, err = scanIDs(tx.Query(ctx, q.Get("DeleteUnreferenced"), candidates))
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(removed)
	return removed, nil
}

func scanIDs(rows db.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}
