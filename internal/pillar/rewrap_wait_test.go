package pillar_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
	"github.com/stratahq/strata/internal/secret"
)

var rewrapWaitQueries = db.MustParseQueries(fstest.MapFS{"rewrap_wait.sql": {Data: []byte(`
-- name: TestLockSealedRows
SELECT id FROM {{schema}}.pillars WHERE sealed IS NOT NULL FOR UPDATE;
`)}}, "rewrap_wait.sql")

// TestRewrapZeroMeansNoneLeft: RewrapBatch's 0 is what a rotation stops on ("none is left
// under another key"), so a row a writer holds must not be skipped into a 0: the batch waits
// for it. Here a transaction holds the only sealed row for a moment while the rotation loop
// runs; afterwards nothing may reference the old key. Before, the loop ended at once with
// the row still under the old key (TestRotationUnderLoad failed so, now and then, in CI);
// seen failing that way before the fix.
func TestRewrapZeroMeansNoneLeft(t *testing.T) {
	t.Parallel()
	ctx := as(t, context.Background(), "admin")
	oldRing, oldKeys := newKeys(t, 1)
	b := secretWorld(t, oldRing)
	_, _, err := b.svc.SetCategory(ctx, "creds", api.PillarCategoryRequest{Secret: true}, "alice")
	require.NoError(t, err)
	b.mk(t, resource.Ref{Kind: resource.KindNode, Name: "n1"}, node("acme", nil))
	_, _, err = b.svc.Put(ctx, pillar.Target{Kind: "node", Node: "n1"}, "creds", obj(t, `{"pw":"one"}`), "", "alice")
	require.NoError(t, err)

	_, newKey := newKeys(t, 1)
	both, err := secret.NewKeyring(newKey[0], oldKeys[0])
	require.NoError(t, err)
	svc := pillar.NewService(b.db)
	svc.UseKeys(both)

	locked, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		held <- b.db.InTx(context.Background(), func(tx *db.Tx) error {
			rows, err := tx.Query(context.Background(), rewrapWaitQueries.Get("TestLockSealedRows"))
			if err != nil {
				return err
			}
			rows.Close()
			close(locked)
			<-release
			return nil
		})
	}()
	<-locked
	time.AfterFunc(300*time.Millisecond, func() { close(release) })
	for i := 0; ; i++ {
		require.Less(t, i, 100, "the rotation ends")
		n, err := svc.RewrapBatch(ctx, 5)
		require.NoError(t, err)
		if n == 0 {
			break
		}
	}
	counts, err := svc.SealedByKey(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{newKey[0].ID}, slices.Collect(maps.Keys(counts)), "a rotation that answered 0 left nothing under the old key")
	require.NoError(t, <-held)
}
