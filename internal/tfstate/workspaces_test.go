package tfstate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
)

// TestWorkspaceListReadsVersions: the list reports each workspace's serial, lineage and size
// from its latest version, falls back to the state itself where no version of its current
// size exists (a schema adopted with states written before strata), and shows an HTTP lock
// exactly as GET …/lock does.
func TestWorkspaceListReadsVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{})
	b.project(t, "p")
	for serial := int64(1); serial <= 3; serial++ {
		_, err := b.svc.StateWrite(ctx, b.actor, "p", "a", WriteRequest{Body: stateJSON(serial, "la", 1)})
		require.NoError(t, err)
	}
	_, err := b.svc.StateWrite(ctx, b.actor, "p", "b", WriteRequest{Body: stateJSON(7, "lb", 0)})
	require.NoError(t, err)
	// b's history is gone (as for a state adopted from a pg backend schema): the list must
	// read its state instead of reporting nothing.
	_, err = b.db.Exec(ctx, &db.Query{Name: "forget", Text: `DELETE FROM p.tf_state_versions WHERE workspace = 'b'`})
	require.NoError(t, err)
	_, err = b.svc.Lock(ctx, b.actor, "p", "a", lockBody("L1"))
	require.NoError(t, err)

	wss, _, err := b.svc.WorkspaceList(ctx, "p", WorkspaceListOptions{})
	require.NoError(t, err)
	require.Len(t, wss, 2)
	a, bw := wss[0], wss[1]
	require.Equal(t, "a", a.Name)
	require.NotNil(t, a.Serial)
	require.EqualValues(t, 3, *a.Serial)
	require.Equal(t, "la", a.Lineage)
	require.EqualValues(t, len(stateJSON(3, "la", 1)), a.Size)
	require.EqualValues(t, 3, a.Version)
	require.False(t, a.Placeholder)

	require.Equal(t, "b", bw.Name)
	require.NotNil(t, bw.Serial, "read from the state when no version matches")
	require.EqualValues(t, 7, *bw.Serial)
	require.Equal(t, "lb", bw.Lineage)
	require.EqualValues(t, 0, bw.Version)

	st, err := b.svc.LockStatus(ctx, "p", "a")
	require.NoError(t, err)
	require.NotNil(t, a.Lock)
	require.Equal(t, "L1", a.Lock.Info.ID)
	require.True(t, a.Lock.Protected)
	require.Equal(t, st.Protected, a.Lock.Protected)
	require.Nil(t, bw.Lock)

	// The keeper loses the key (its backend is terminated): the list must not say protected.
	pid := b.svc.Readiness(ctx).KeeperPID
	require.NotZero(t, pid)
	_, err = b.db.Exec(ctx, &db.Query{Name: "kill", Text: `SELECT pg_terminate_backend($1::int)`}, int32(pid))
	require.NoError(t, err)
	// pg_terminate_backend only signals: wait until the backend is gone (and its key with
	// it), or the list may still see the old keeper holding the key.
	require.Eventually(t, func() bool {
		var n int
		err := b.db.QueryRow(ctx, &db.Query{Name: "gone", Text: `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`}, int32(pid)).Scan(&n)
		return err == nil && n == 0
	}, 10*time.Second, 10*time.Millisecond)
	wss, _, err = b.svc.WorkspaceList(ctx, "p", WorkspaceListOptions{})
	require.NoError(t, err)
	if wss[0].Lock.Protected {
		// Only possible if the keeper already re-took and verified the key in between.
		st, err := b.svc.LockStatus(ctx, "p", "a")
		require.NoError(t, err)
		require.True(t, st.Protected)
		require.NotEqual(t, pid, b.svc.Readiness(ctx).KeeperPID, "protected only through a new keeper session")
	}
}

// TestProjectListCounts: one list statement counts every project's workspaces in its own
// schema, leaving out placeholders (a LOCK on a workspace that has no state yet), and a
// project whose states table is gone counts 0 instead of failing the list.
func TestProjectListCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{noKeeper: true})
	for _, p := range []string{"one", "three", "zero", "gone"} {
		b.project(t, p)
	}
	_, err := b.svc.StateWrite(ctx, b.actor, "one", "a", WriteRequest{Body: stateJSON(1, "l", 0)})
	require.NoError(t, err)
	for _, ws := range []string{"a", "b", "c"} {
		_, err := b.svc.StateWrite(ctx, b.actor, "three", ws, WriteRequest{Body: stateJSON(1, "l", 0)})
		require.NoError(t, err)
	}
	_, err = b.svc.Lock(ctx, b.actor, "three", "placeholder", lockBody("L1"))
	require.NoError(t, err)
	_, err = b.db.Exec(ctx, &db.Query{Name: "drop", Text: `DROP TABLE gone.states`})
	require.NoError(t, err)

	list, _, err := b.svc.ProjectList(ctx, ProjectListOptions{Filter: auth.Filter{All: true}})
	require.NoError(t, err)
	got := map[string]int{}
	for _, p := range list {
		got[p.Name] = p.Workspaces
	}
	require.Equal(t, map[string]int{"gone": 0, "one": 1, "three": 3, "zero": 0}, got)
}

// TestGoneKeepersForgotten: a reconcile deletes the registration of a replica whose keeper
// backend is gone and that has not heart-beaten for an hour, so tf_keepers does not grow with
// every replica ever started; a registration that heart-beat recently stays.
func TestGoneKeepersForgotten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{})
	_, err := b.db.Exec(ctx, &db.Query{Name: "seed", Text: `INSERT INTO {{schema}}.tf_keepers (replica, backend_pid, backend_start, heartbeat_at)
		VALUES ('gone-long-ago', 2147483000, now() - interval '3 hours', now() - interval '2 hours'),
		       ('gone-just-now', 2147483001, now() - interval '3 hours', now())`})
	require.NoError(t, err)
	registered := func(replica string) bool {
		var ok bool
		require.NoError(t, b.db.QueryRow(ctx, &db.Query{Name: "has", Text: `SELECT EXISTS (SELECT 1 FROM {{schema}}.tf_keepers WHERE replica = $1)`}, replica).Scan(&ok))
		return ok
	}
	require.Eventually(t, func() bool { return !registered("gone-long-ago") }, 15*time.Second, 100*time.Millisecond,
		"the registration of a replica gone for two hours is deleted")
	require.True(t, registered("gone-just-now"), "a recent heartbeat keeps the registration")
	require.True(t, registered(b.svc.ReplicaID()), "the live replica stays registered")
}
