package pillar_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/keyref"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
	"github.com/stratahq/strata/internal/secret"
)

// derivedKeyIDs are the key ids derived from the sealed values themselves (the migration's
// sealed_key_ids), to compare with the record.
func derivedKeyIDs(t *testing.T, d *db.DB) []string {
	t.Helper()
	rows, err := d.Query(context.Background(), &db.Query{Name: "derived", Text: "SELECT k FROM {{schema}}.sealed_key_ids() k ORDER BY k"})
	require.NoError(t, err)
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		out = append(out, id)
	}
	require.NoError(t, rows.Err())
	return out
}

func referenced(t *testing.T, d *db.DB) []string {
	t.Helper()
	refs, err := keyref.Referenced(context.Background(), d)
	require.NoError(t, err)
	return refs
}

// TestSealedPillarKeysRecorded (issue 28): every path that seals a pillar value records its
// key in key_refs in the same transaction — a category made secret (rows and history), a
// rename's re-seal, a rotation batch — and a prune drops a key only once no value references
// it.
func TestSealedPillarKeysRecorded(t *testing.T) {
	t.Parallel()
	ctx := as(t, context.Background(), "admin")
	ringA, keysA := newKeys(t, 1)
	b := secretWorld(t, ringA)
	b.res.OnRename(b.svc.Renamed)
	require.Empty(t, referenced(t, b.db), "plain rows reference no key")
	_, _, err := b.svc.SetCategory(ctx, "creds", api.PillarCategoryRequest{Secret: true}, "alice")
	require.NoError(t, err)
	require.Equal(t, []string{keysA[0].ID}, referenced(t, b.db))

	// The record is what the triggers write: emptied, a rename's re-seal records the key again.
	_, err = b.db.Exec(context.Background(), &db.Query{Name: "empty", Text: "DELETE FROM {{schema}}.key_refs"})
	require.NoError(t, err)
	_, err = b.res.Rename(ctx, resource.Ref{Kind: resource.KindNode, Name: "web01"}, "web99")
	require.NoError(t, err)
	require.Equal(t, []string{keysA[0].ID}, referenced(t, b.db))

	// A rotation: the new key is recorded with the first batch; the old one stays until no
	// value references it, and then a prune drops it.
	_, keysB := newKeys(t, 1)
	both, err := secret.NewKeyring(keysB[0], keysA[0])
	require.NoError(t, err)
	b.svc.UseKeys(both)
	n, err := b.svc.RewrapBatch(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.ElementsMatch(t, []string{keysA[0].ID, keysB[0].ID}, referenced(t, b.db))
	removed, err := keyref.Prune(context.Background(), b.db)
	require.NoError(t, err)
	require.Empty(t, removed, "values under the old key remain")
	for {
		n, err := b.svc.RewrapBatch(ctx, 100)
		require.NoError(t, err)
		if n == 0 {
			break
		}
	}
	require.ElementsMatch(t, []string{keysA[0].ID, keysB[0].ID}, referenced(t, b.db), "recorded until pruned")
	removed, err = keyref.Prune(context.Background(), b.db)
	require.NoError(t, err)
	require.Equal(t, []string{keysA[0].ID}, removed)
	require.Equal(t, []string{keysB[0].ID}, referenced(t, b.db))
	require.Equal(t, derivedKeyIDs(t, b.db), referenced(t, b.db))
}

// TestPruneNeverDropsAKeyInUse (issue 28): while a replica still on the old key writes secret
// values and another rotates them to the new key and prunes the record, every key a committed
// value is sealed under stays recorded.
func TestPruneNeverDropsAKeyInUse(t *testing.T) {
	t.Parallel()
	ctx := as(t, context.Background(), "admin")
	ringA, keysA := newKeys(t, 1)
	b := secretWorld(t, ringA)
	_, _, err := b.svc.SetCategory(ctx, "creds", api.PillarCategoryRequest{Secret: true}, "alice")
	require.NoError(t, err)
	_, keysB := newKeys(t, 1)
	both, err := secret.NewKeyring(keysB[0], keysA[0])
	require.NoError(t, err)
	rotator := pillar.NewService(b.db)
	rotator.UseKeys(both)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var pruned atomic.Int64
	errs := make(chan error, 10)
	wg.Add(2)
	go func() { // the replica still on key A
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, _, err := b.svc.Put(ctx, pillar.Target{Kind: "node", Node: "web01"}, "creds", obj(t, fmt.Sprintf(`{"pw":"v%d"}`, i)), "", "old"); err != nil {
				errs <- err
				return
			}
			time.Sleep(time.Duration(i%5) * time.Millisecond)
		}
	}()
	go func() { // rotate and prune, over and over
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := rotator.RewrapBatch(ctx, 1000); err != nil {
				errs <- err
				return
			}
			removed, err := keyref.Prune(context.Background(), b.db)
			if err != nil && err != keyref.ErrPruneBusy {
				errs <- err
				return
			}
			pruned.Add(int64(len(removed)))
		}
	}()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		require.Empty(t, unrecorded(t, b.db), "every key a committed value references is recorded")
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Empty(t, unrecorded(t, b.db))
	require.Contains(t, referenced(t, b.db), keysB[0].ID)
	require.Positive(t, pruned.Load(), "the old key was dropped (and recorded again) while the old replica wrote")
}

// unrecorded are the key ids committed values reference that key_refs lacks, read in one
// statement (one snapshot: the record may hold more, never less).
func unrecorded(t *testing.T, d *db.DB) []string {
	t.Helper()
	rows, err := d.Query(context.Background(), &db.Query{Name: "unrecorded", Text: `SELECT k FROM {{schema}}.sealed_key_ids() k
		WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.key_refs r WHERE r.key_id = k) ORDER BY k`})
	require.NoError(t, err)
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		out = append(out, id)
	}
	require.NoError(t, rows.Err())
	return out
}
