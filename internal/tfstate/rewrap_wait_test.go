package tfstate

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
)

// errWriterGaveUp is what the held writer of TestRewrapZeroMeansNoneLeft returns to roll its
// transaction back.
var errWriterGaveUp = errors.New("the writer gave up")

// TestRewrapZeroMeansNoneLeft: RewrapBatch's 0 is what a rotation loop (`strata keys rotate`)
// stops on, meaning "no state or version is left under another key", so a value a writer's
// transaction holds must not be skipped into a 0: the batch waits for it. A transaction of
// the service's own database holds the last old-key value for a moment while the rotation
// loop runs, as a write does:
//
//   - the workspace's states row, read FOR UPDATE (StateGetForUpdate, as every write reads
//     it) by a writer that then commits without changing it (an unchanged write, or one the
//     write rules refuse), so the row is still under the old key;
//   - a version that the write's retention (VersionPrune) deletes, in a transaction that then
//     rolls back (the write failed), so the version is still there, under the old key.
//
// Afterwards nothing may be sealed under the old key. Before, the loop ended at once with the
// held value still under the old key (the batch's SKIP LOCKED skipped it and answered 0);
// seen failing that way, in both cases, before the fix.
func TestRewrapZeroMeansNoneLeft(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// hold runs in the writer's transaction and takes the old-key value.
		hold func(ctx context.Context, tx *db.Tx) error
		// outcome is what the writer's transaction returns once released.
		outcome error
	}{
		{name: "states row, writer commits", outcome: nil, hold: func(ctx context.Context, tx *db.Tx) error {
			var id int64
			var data string
			var placeholder bool
			return tx.QueryRow(ctx, pq("StateGetForUpdate", "enc"), "w").Scan(&id, &data, &placeholder)
		}},
		{name: "version pruned, writer rolls back", outcome: errWriterGaveUp, hold: func(ctx context.Context, tx *db.Tx) error {
			n, err := tx.Exec(ctx, pq("VersionPrune", "enc"), "w", 1)
			if err == nil && n != 1 {
				err = errors.New("the prune deleted no version")
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			k1, k2 := testKey(t), testKey(t)
			old := setup(t, setupOpts{noKeeper: true, opts: Options{Keys: testKeyring(t, k1)}})
			_, _, err := old.svc.ProjectCreate(ctx, old.actor, "enc", ProjectOptions{Encryption: true})
			require.NoError(t, err)
			_, err = old.svc.StateWrite(ctx, old.actor, "enc", "w", WriteRequest{Body: secretState(1, "l", "v1")})
			require.NoError(t, err)
			both := setupOn(t, old.url, setupOpts{noKeeper: true, opts: Options{Keys: testKeyring(t, k2, k1)}})
			if tc.outcome != nil {
				// The states row and version 2 under the new key; version 1 is the last
				// value under the old one.
				_, err = both.svc.StateWrite(ctx, both.actor, "enc", "w", WriteRequest{Body: secretState(2, "l", "v2")})
				require.NoError(t, err)
			}

			locked, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			go func() {
				held <- both.db.InTx(context.Background(), func(tx *db.Tx) error {
					err := tc.hold(context.Background(), tx)
					close(locked)
					if err != nil {
						return err
					}
					<-release
					return tc.outcome
				})
			}()
			<-locked
			time.AfterFunc(300*time.Millisecond, func() { close(release) })
			for i := 0; ; i++ {
				require.Less(t, i, 100, "the rotation ends")
				n, err := both.svc.RewrapBatch(ctx, 5)
				require.NoError(t, err)
				if n == 0 {
					break
				}
			}
			counts, err := both.svc.SealedByKey(ctx)
			require.NoError(t, err)
			require.Equal(t, []string{k2.ID}, slices.Collect(maps.Keys(counts)), "a rotation that answered 0 left nothing under the old key: %v", counts)
			require.ErrorIs(t, <-held, tc.outcome)
		})
	}
}
