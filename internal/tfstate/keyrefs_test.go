package tfstate

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/keyref"
)

// TestSealedStateKeysRecorded (issue 28): an encrypted project's states and versions record
// their key in key_refs in the writing transaction — the states row's trigger too, which a
// rotation batch (recording no version) goes through alone — and a prune keeps a key while a
// state still references it.
func TestSealedStateKeysRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b2 := testKey(t), testKey(t)
	b := setup(t, setupOpts{opts: Options{Keys: testKeyring(t, a)}})
	refs := func() []string {
		t.Helper()
		r, err := keyref.Referenced(ctx, b.db)
		require.NoError(t, err)
		return r
	}
	require.Empty(t, refs())
	_, _, err := b.svc.ProjectCreate(ctx, b.actor, "enc", ProjectOptions{Encryption: true})
	require.NoError(t, err)
	_, err = b.svc.StateWrite(ctx, b.actor, "enc", "a", WriteRequest{Body: secretState(1, "la", "value-a")})
	require.NoError(t, err)
	require.Equal(t, []string{a.ID}, refs())

	// Only the states row holds a sealed value now, and the record is empty: a rotation batch
	// re-seals the row (no version) and its trigger records the new key.
	s := rawSession(t, b.url)
	rawExec(t, s, `DELETE FROM enc.tf_state_versions`)
	rawExec(t, s, `DELETE FROM strata.key_refs`)
	rot := setupOn(t, b.url, setupOpts{noKeeper: true, opts: Options{Keys: testKeyring(t, b2, a)}})
	n, err := rot.svc.RewrapBatch(ctx, 100)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []string{b2.ID}, refs())

	// A recorded key no value references is pruned; one the states row references is kept.
	rawExec(t, s, `INSERT INTO strata.key_refs (key_id) VALUES ($1)`, a.ID)
	removed, err := keyref.Prune(ctx, b.db)
	require.NoError(t, err)
	require.Equal(t, []string{a.ID}, removed)
	require.Equal(t, []string{b2.ID}, refs())

	// A plain project's writes record nothing.
	_, _, err = b.svc.ProjectCreate(ctx, b.actor, "plain", ProjectOptions{})
	require.NoError(t, err)
	_, err = b.svc.StateWrite(ctx, b.actor, "plain", "a", WriteRequest{Body: secretState(1, "lp", "value-p")})
	require.NoError(t, err)
	require.Equal(t, []string{b2.ID}, refs())
}
