package db_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pgtest"
)

// TestDeferNotificationsSetsTheTransaction: a transaction that defers its notifications says
// so to the triggers (strata.notify, migration 0036) from its first statement on, whether
// that statement goes alone or in a pipeline, and only for itself: the next transaction on
// the same pooled connection does not inherit it.
func TestDeferNotificationsSetsTheTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := pgtest.NewDB(t)
	setting := &db.Query{Name: "setting", Text: `SELECT coalesce(current_setting('strata.notify', true), '')`}
	read := func(deferred, pipelined bool) string {
		var got string
		require.NoError(t, d.InTx(ctx, func(tx *db.Tx) error {
			if deferred {
				tx.DeferNotifications(d.Schema() + ".changes")
			}
			if pipelined {
				return tx.Pipeline(ctx, db.Step{Query: setting, Scan: func(r db.Row) error { return r.Scan(&got) }})
			}
			return tx.QueryRow(ctx, setting).Scan(&got)
		}))
		return got
	}
	for _, pipelined := range []bool{false, true} {
		require.Equal(t, "deferred", read(true, pipelined), "pipelined: %v", pipelined)
		require.Equal(t, "", read(false, pipelined), "pipelined: %v", pipelined)
	}
}
