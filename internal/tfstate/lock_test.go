package tfstate

import (
	"context"
	"fmt"
	"log/slog"
	neturl "net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
)

func stateID(t *testing.T, s *db.Session, project, workspace string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, s.QueryRow(context.Background(), &db.Query{Name: "test", Text: fmt.Sprintf(`SELECT id FROM %s.states WHERE name = $1`, db.QuoteIdent(project))}, workspace).Scan(&id))
	return id
}

// pgClientTry is what a pg backend client does to lock an existing workspace.
func pgClientTry(t *testing.T, s *db.Session, key int64) bool {
	t.Helper()
	return rawBool(t, s, `SELECT pg_try_advisory_lock($1)`, key)
}

func TestLockProtocol(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	b.project(t, "p")
	ws := "default"

	info, err := b.svc.Lock(ctx, b.actor, "p", ws, lockBody("L1"))
	require.NoError(t, err)
	require.Equal(t, "L1", info.ID)
	// Clients retry a LOCK whose answer they lost: the same ID succeeds again.
	_, err = b.svc.Lock(ctx, b.actor, "p", ws, lockBody("L1"))
	require.NoError(t, err)
	// Another ID: 423 with the holder's LockInfo, Go field names.
	holder := requireLocked(t, func() error { _, err := b.svc.Lock(ctx, b.actor, "p", ws, lockBody("L2")); return err }())
	require.Equal(t, "L1", holder.ID)
	require.Equal(t, "OperationTypeApply", holder.Operation)
	require.Equal(t, "alice@host", holder.Who)

	// A lock on a workspace without a row made a placeholder: no state to read yet.
	_, err = b.svc.StateGet(ctx, "p", ws)
	requireKind(t, err, fault.KindNotFound)
	wss, _, err := b.svc.WorkspaceList(ctx, "p", WorkspaceListOptions{})
	require.NoError(t, err)
	require.Len(t, wss, 1)
	require.True(t, wss[0].Placeholder)
	require.Equal(t, "L1", wss[0].Lock.Info.ID)
	require.True(t, wss[0].Lock.Protected)

	// Writes while locked must carry the lock's ID.
	requireLocked(t, func() error {
		_, err := b.svc.StateWrite(ctx, b.actor, "p", ws, WriteRequest{Body: stateJSON(1, "l", 1)})
		return err
	}())
	requireLocked(t, func() error {
		_, err := b.svc.StateWrite(ctx, b.actor, "p", ws, WriteRequest{LockID: "L2", Body: stateJSON(1, "l", 1)})
		return err
	}())
	res, err := b.svc.StateWrite(ctx, b.actor, "p", ws, WriteRequest{LockID: "L1", Body: stateJSON(1, "l", 1)})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.Version, "the placeholder is not a version")

	st, err := b.svc.LockStatus(ctx, "p", ws)
	require.NoError(t, err)
	require.True(t, st.Locked)
	require.Equal(t, "http", st.Kind)
	require.Equal(t, "L1", st.Info.ID)

	// Unlock with another ID: 423 with the holder; with the right one (OpenTofu's {"ID"} body
	// or Terraform's full LockInfo): done; again: still fine (retries).
	req, err := ParseUnlockBody([]byte(`{"ID":"L2"}`))
	require.NoError(t, err)
	requireLocked(t, b.svc.Unlock(ctx, b.actor, "p", ws, req))
	req, err = ParseUnlockBody(lockBody("L1"))
	require.NoError(t, err)
	require.NoError(t, b.svc.Unlock(ctx, b.actor, "p", ws, req))
	require.NoError(t, b.svc.Unlock(ctx, b.actor, "p", ws, req))

	// A write naming a lock that is gone is refused: its writer lost its exclusion.
	_, err = b.svc.StateWrite(ctx, b.actor, "p", ws, WriteRequest{LockID: "L1", Body: stateJSON(2, "l", 1)})
	requireKind(t, err, fault.KindConflict)
	// Without a lock, a write without ID goes through (terraform -lock=false).
	_, err = b.svc.StateWrite(ctx, b.actor, "p", ws, WriteRequest{Body: stateJSON(2, "l", 1)})
	require.NoError(t, err)

	st, err = b.svc.LockStatus(ctx, "p", ws)
	require.NoError(t, err)
	require.False(t, st.Locked)
	_, err = ParseLockInfo([]byte(`{"Operation":"x"}`))
	requireKind(t, err, fault.KindInvalid)
}

func TestUnlockWithoutWriteRemovesPlaceholder(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	b.project(t, "p")
	_, err := b.svc.Lock(ctx, b.actor, "p", "plan-only", lockBody("L"))
	require.NoError(t, err)
	pg := rawSession(t, b.url)
	require.True(t, rawBool(t, pg, `SELECT EXISTS (SELECT 1 FROM p.states WHERE name = 'plan-only')`))
	require.NoError(t, b.svc.Unlock(ctx, b.actor, "p", "plan-only", UnlockRequest{ID: "L"}))
	require.False(t, rawBool(t, pg, `SELECT EXISTS (SELECT 1 FROM p.states WHERE name = 'plan-only')`))
	wss, _, err := b.svc.WorkspaceList(ctx, "p", WorkspaceListOptions{})
	require.NoError(t, err)
	require.Empty(t, wss)
}

// TestHTTPLockExcludesPgClients: while an HTTP lock is held, the keeper holds the row's
// advisory key, so a pg client's pg_try_advisory_lock(states.id) fails, for an existing
// workspace and for one the lock created. The control runs the same steps on a service
// without a keeper and shows the pg client getting in: the test can fail.
func TestHTTPLockExcludesPgClients(t *testing.T) {
	t.Parallel()
	for _, keeper := range []bool{true, false} {
		t.Run(fmt.Sprintf("keeper=%v", keeper), func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{noKeeper: !keeper})
			ctx := context.Background()
			b.project(t, "p")
			_, err := b.svc.StateWrite(ctx, b.actor, "p", "existing", WriteRequest{Body: stateJSON(1, "l", 1)})
			require.NoError(t, err)
			pg := rawSession(t, b.url)
			for _, ws := range []string{"existing", "fresh"} {
				_, err := b.svc.Lock(ctx, b.actor, "p", ws, lockBody("L-"+ws))
				require.NoError(t, err)
				key := stateID(t, pg, "p", ws)
				got := pgClientTry(t, pg, key)
				require.Equal(t, !keeper, got, "pg client got the key of %s", ws)
				if got {
					rawBool(t, pg, `SELECT pg_advisory_unlock($1)`, key)
				}
				require.NoError(t, b.svc.Unlock(ctx, b.actor, "p", ws, UnlockRequest{ID: "L-" + ws}))
				if ws == "existing" {
					require.True(t, pgClientTry(t, pg, key), "after UNLOCK the key is free")
					rawBool(t, pg, `SELECT pg_advisory_unlock($1)`, key)
				}
			}
			r := b.svc.Readiness(ctx)
			require.Equal(t, keeper, r.PGClientsExcluded, r.Detail)
		})
	}
}

// TestLockRefusedWhilePgClientHoldsKey: a pg client holding the workspace's key (as
// Terraform does for a whole apply) makes LOCK and unlocked writes answer 423 at once, with a
// LockInfo naming the holding backend; LockStatus shows it; force-unlock terminates it.
func TestLockRefusedWhilePgClientHoldsKey(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	b.project(t, "p")
	_, err := b.svc.StateWrite(ctx, b.actor, "p", "default", WriteRequest{Body: stateJSON(1, "l", 1)})
	require.NoError(t, err)
	pg := rawSession(t, b.url)
	key := stateID(t, pg, "p", "default")
	rawBool(t, pg, `SELECT pg_advisory_lock($1) IS NULL`, key)

	// A 423 at once, never a wait: a LOCK that waited for the pg client would run into this
	// deadline and fail with a context error instead.
	quick, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = b.svc.Lock(quick, b.actor, "p", "default", lockBody("L"))
	holder := requireLocked(t, err)
	require.Equal(t, fmt.Sprintf("pg-backend-pid-%d", pg.PID()), holder.ID)
	require.Equal(t, "p/default", holder.Path)
	require.Contains(t, holder.Info, "pg-client-test")

	_, err = b.svc.StateWrite(ctx, b.actor, "p", "default", WriteRequest{Body: stateJSON(2, "l", 1)})
	requireLocked(t, err)

	st, err := b.svc.LockStatus(ctx, "p", "default")
	require.NoError(t, err)
	require.Equal(t, "pg", st.Kind)
	require.Equal(t, int(pg.PID()), st.PG.PID)
	require.Equal(t, "pg-client-test", st.PG.ApplicationName)
	require.Equal(t, key, st.PG.Key)
	wss, _, err := b.svc.WorkspaceList(ctx, "p", WorkspaceListOptions{})
	require.NoError(t, err)
	require.Equal(t, "pg", wss[0].Lock.Kind)

	// Force-unlock needs the right, and then ends the holding backend.
	requireKind(t, b.svc.Unlock(ctx, Actor{Name: "bob"}, "p", "default", UnlockRequest{Force: true}), fault.KindForbidden)
	require.NoError(t, b.svc.Unlock(ctx, b.actor, "p", "default", UnlockRequest{Force: true}))
	require.Eventually(t, func() bool {
		_, err := pg.Exec(ctx, &db.Query{Name: "test", Text: "SELECT 1"})
		return err != nil
	}, 5*time.Second, 20*time.Millisecond, "the pg client's backend was terminated")
	// The client sees its connection end before the terminated backend has exited and let go
	// of the key: wait for the backend to be gone (flaked in CI under load otherwise).
	pid := pg.PID()
	require.Eventually(t, func() bool {
		var n int
		err := b.db.QueryRow(ctx, &db.Query{Name: "gone", Text: `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`}, int32(pid)).Scan(&n)
		return err == nil && n == 0
	}, 10*time.Second, 10*time.Millisecond)
	_, err = b.svc.Lock(ctx, b.actor, "p", "default", lockBody("L"))
	require.NoError(t, err)
	requireAudit(t, b, "state.force-unlock", "p/default")

	// Forcing an HTTP lock ends it whatever its ID (Terraform's empty UNLOCK body).
	req, err := ParseUnlockBody(nil)
	require.NoError(t, err)
	require.True(t, req.Force)
	require.NoError(t, b.svc.Unlock(ctx, b.actor, "p", "default", req))
	st, err = b.svc.LockStatus(ctx, "p", "default")
	require.NoError(t, err)
	require.False(t, st.Locked)
}

func requireAudit(t *testing.T, b *testBundle, action, target string) {
	t.Helper()
	var n int64
	require.NoError(t, b.db.QueryRow(context.Background(), &db.Query{Name: "test", Text: `SELECT count(*) FROM {{schema}}.audit_log WHERE action = $1 AND target = $2`}, action, target).Scan(&n))
	require.Positive(t, n, "audit %s %s", action, target)
}

// TestCreationKeys: holding OpenTofu's creation key of project A (as psql or a tofu client
// creating a workspace would) makes creating a workspace in A answer 423 at once, while 30
// other projects create workspaces in parallel, and while writes to A's existing
// workspaces go on. Holding Terraform's -1 refuses creations everywhere (that key is
// global by Terraform's design), but not writes to existing workspaces.
func TestCreationKeys(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{opts: Options{}})
	ctx := context.Background()
	b.project(t, "proj_a")
	const others = 30
	for i := range others {
		b.project(t, fmt.Sprintf("other_%02d", i))
	}
	_, err := b.svc.StateWrite(ctx, b.actor, "proj_a", "existing", WriteRequest{Body: stateJSON(1, "l", 1)})
	require.NoError(t, err)

	pg := rawSession(t, b.url)
	rawBool(t, pg, `SELECT pg_advisory_lock($1) IS NULL`, int64(-3564375542))

	// 423s at once (a wait would end in this deadline's context error instead).
	quick, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = b.svc.StateWrite(quick, b.actor, "proj_a", "new", WriteRequest{Body: stateJSON(1, "l", 1)})
	holder := requireLocked(t, err)
	require.Equal(t, "pg backend workspace creation", holder.Operation)
	_, err = b.svc.Lock(quick, b.actor, "proj_a", "new2", lockBody("L"))
	requireLocked(t, err)
	_, err = b.svc.StateWrite(ctx, b.actor, "proj_a", "existing", WriteRequest{Body: stateJSON(2, "l", 1)})
	require.NoError(t, err, "writes to existing workspaces take no creation key")

	var wg sync.WaitGroup
	errs := make([]error, others)
	start := time.Now()
	for i := range others {
		wg.Go(func() {
			p := fmt.Sprintf("other_%02d", i)
			_, errs[i] = b.svc.StateWrite(ctx, b.actor, p, "default", WriteRequest{Body: stateJSON(1, "l", 0)})
			if errs[i] == nil {
				_, errs[i] = b.svc.Lock(ctx, b.actor, p, "locked", lockBody("L"))
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "project other_%02d", i)
	}
	t.Logf("%d projects created 2 workspaces each in parallel in %v while proj_a's creation key was held", others, time.Since(start))

	rawBool(t, pg, `SELECT pg_advisory_unlock($1)`, int64(-3564375542))
	_, err = b.svc.StateWrite(ctx, b.actor, "proj_a", "new", WriteRequest{Body: stateJSON(1, "l", 1)})
	require.NoError(t, err)

	rawBool(t, pg, `SELECT pg_advisory_lock(-1) IS NULL`)
	_, err = b.svc.StateWrite(ctx, b.actor, "other_00", "brand-new", WriteRequest{Body: stateJSON(1, "l", 1)})
	requireLocked(t, err)
	_, err = b.svc.StateWrite(ctx, b.actor, "other_00", "default", WriteRequest{Body: stateJSON(2, "l", 0)})
	require.NoError(t, err)
}

// TestStrataCreationsNeverRefuseEachOther: the creation keys are taken shared, so 50
// projects making their first workspace at the same moment all succeed (taken exclusive, some
// would answer 423: this test catches that). That a pg client's exclusive probe fails while a
// creation holds the keys is TestCreationKeys' part. Timing of 50 against one is only logged;
// the measurement is BenchmarkFirstWrites (docs/benchmarks.md).
func TestStrataCreationsNeverRefuseEachOther(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{noKeeper: true})
	ctx := context.Background()
	const n = 50
	for i := range n {
		b.project(t, fmt.Sprintf("p%02d", i))
	}
	start := time.Now()
	_, err := b.svc.StateWrite(ctx, b.actor, "p00", "solo", WriteRequest{Body: stateJSON(1, "l", 0)})
	require.NoError(t, err)
	one := time.Since(start)
	var wg sync.WaitGroup
	errs := make([]error, n)
	start = time.Now()
	for i := range n {
		wg.Go(func() {
			_, errs[i] = b.svc.StateWrite(ctx, b.actor, fmt.Sprintf("p%02d", i), "default", WriteRequest{Body: stateJSON(1, "l", 0)})
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	t.Logf("one first write: %v; %d parallel first writes in %d projects: %v", one, n, n, time.Since(start))
}

// TestLockStorm: many LOCK/write/UNLOCK cycles at once on a small pool while the keeper
// reconciles every few milliseconds. The keeper never takes a pool connection while LOCK
// transactions (which hold one) wait for it, so this finishes; and every key ends released.
func TestLockStorm(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{maxConns: 2, opts: Options{HeartbeatInterval: 2 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b.project(t, "p")
	const workers, rounds = 12, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			ws := fmt.Sprintf("w%d", w%4) // contention: 3 workers per workspace
			for r := range rounds {
				id := fmt.Sprintf("L-%d-%d", w, r)
				if _, err := b.svc.Lock(ctx, b.actor, "p", ws, lockBody(id)); err != nil {
					if fault.KindOf(err) != fault.KindLocked {
						errs <- err
					}
					continue
				}
				st, err := b.svc.StateGet(ctx, "p", ws)
				serial := int64(1)
				if err == nil {
					serial = parseState(st.Data).Serial + 1
				}
				if _, err := b.svc.StateWrite(ctx, b.actor, "p", ws, WriteRequest{LockID: id, Body: stateJSON(serial, "l", 1)}); err != nil {
					errs <- err
				}
				if err := b.svc.Unlock(ctx, b.actor, "p", ws, UnlockRequest{ID: id}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("%d lock/write/unlock attempts in %v", workers*rounds, time.Since(start))
	pg := rawSession(t, b.url)
	for i := range 4 {
		ws := fmt.Sprintf("w%d", i)
		key := stateID(t, pg, "p", ws)
		require.True(t, pgClientTry(t, pg, key), "key of %s released", ws)
		vs, err := b.svc.VersionList(ctx, "p", ws)
		require.NoError(t, err)
		require.NotEmpty(t, vs)
		for j := 1; j < len(vs); j++ {
			require.Greater(t, *vs[j-1].Serial, *vs[j].Serial, "serials only increase: every write held the lock")
		}
	}
}

// TestCancelledRequestKeepsKeys: a client that hangs up in the middle of a LOCK must not cost
// the other locks of this replica their advisory keys (a cancelled query makes pgx close its
// connection; the keeper's session must never run a request's context).
func TestCancelledRequestKeepsKeys(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	b.project(t, "p")
	_, err := b.svc.StateWrite(ctx, b.actor, "p", "held", WriteRequest{Body: stateJSON(1, "l", 1)})
	require.NoError(t, err)
	_, err = b.svc.StateWrite(ctx, b.actor, "p", "other", WriteRequest{Body: stateJSON(1, "l", 1)})
	require.NoError(t, err)
	_, err = b.svc.Lock(ctx, b.actor, "p", "held", lockBody("H"))
	require.NoError(t, err)
	keeperPID := b.svc.Readiness(ctx).KeeperPID
	require.NotZero(t, keeperPID)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, _ = b.svc.Lock(cancelled, b.actor, "p", "other", lockBody("O"))
	for i := 0; i < 20; i++ { // and requests cancelled while the keeper works
		c, cancel := context.WithTimeout(ctx, time.Duration(i)*100*time.Microsecond)
		_, _ = b.svc.Lock(c, b.actor, "p", "other", lockBody(fmt.Sprintf("O%d", i)))
		cancel()
		_ = b.svc.Unlock(ctx, b.actor, "p", "other", UnlockRequest{ID: fmt.Sprintf("O%d", i)})
	}

	// The keeper's session is the one it had: had a cancelled request closed it, the keeper
	// would have reconnected (and the key would have been free in between).
	require.Equal(t, keeperPID, b.svc.Readiness(ctx).KeeperPID, "the keeper session survived the cancelled requests")
	pg := rawSession(t, b.url)
	require.False(t, pgClientTry(t, pg, stateID(t, pg, "p", "held")), "the held lock's key survived the cancelled requests")
	st, err := b.svc.LockStatus(ctx, "p", "held")
	require.NoError(t, err)
	require.True(t, st.Protected)
}

// TestDeleteAndRestoreRespectLocks: deleting a state and restoring a version are writes: while
// the workspace is locked they need the lock's ID (423 without it or with another), and a pg
// client holding the workspace refuses them.
func TestDeleteAndRestoreRespectLocks(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	b.project(t, "p")
	for serial := int64(1); serial <= 2; serial++ {
		_, err := b.svc.StateWrite(ctx, b.actor, "p", "w", WriteRequest{Body: stateJSON(serial, "l", 1)})
		require.NoError(t, err)
	}
	_, err := b.svc.Lock(ctx, b.actor, "p", "w", lockBody("L"))
	require.NoError(t, err)

	requireLocked(t, b.svc.StateDelete(ctx, b.actor, "p", "w", ""))
	requireLocked(t, b.svc.StateDelete(ctx, b.actor, "p", "w", "other"))
	_, err = b.svc.VersionRestore(ctx, b.actor, "p", "w", 1, "")
	requireLocked(t, err)
	_, err = b.svc.VersionRestore(ctx, b.actor, "p", "w", 1, "other")
	requireLocked(t, err)
	_, err = b.svc.StateGet(ctx, "p", "w")
	require.NoError(t, err, "nothing was deleted")

	res, err := b.svc.VersionRestore(ctx, b.actor, "p", "w", 1, "L")
	require.NoError(t, err)
	require.Equal(t, int64(3), res.Version)
	require.NoError(t, b.svc.StateDelete(ctx, b.actor, "p", "w", "L"))
	_, err = b.svc.StateGet(ctx, "p", "w")
	requireKind(t, err, fault.KindNotFound)
	st, err := b.svc.LockStatus(ctx, "p", "w")
	require.NoError(t, err)
	require.False(t, st.Locked, "the lock goes with the state")
	requireAudit(t, b, "state.delete", "p/w")

	// A pg client holding an (unlocked) workspace refuses a delete.
	_, err = b.svc.StateWrite(ctx, b.actor, "p", "x", WriteRequest{Body: stateJSON(1, "l", 1)})
	require.NoError(t, err)
	pg := rawSession(t, b.url)
	key := stateID(t, pg, "p", "x")
	rawBool(t, pg, `SELECT pg_advisory_lock($1) IS NULL`, key)
	requireLocked(t, b.svc.StateDelete(ctx, b.actor, "p", "x", ""))
	rawBool(t, pg, `SELECT pg_advisory_unlock($1)`, key)
	require.NoError(t, b.svc.StateDelete(ctx, b.actor, "p", "x", ""))
}

// TestProtectionWitness (issue 17, item 7): protection is read from the keeper's witness key
// (migration 0017), one lock-table probe instead of a pg_locks scan, and is still a fact:
//   - a lock this replica's keeper took reads protected (the witness is held);
//   - a lock held the way a release-15 keeper holds it (the key, no witness) still reads
//     protected, through the pg_locks fallback;
//   - when that keeper's backend, still alive, no longer holds the key and a pg client has
//     taken it, the lock reads unprotected. The control: probing the key itself (anyone
//     holding it) would have called that protected.
func TestProtectionWitness(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	b.project(t, "p")
	_, err := b.svc.Lock(ctx, b.actor, "p", "w", lockBody("L-w"))
	require.NoError(t, err)
	st, err := b.svc.LockStatus(ctx, "p", "w")
	require.NoError(t, err)
	require.True(t, st.Protected, "the keeper's own lock: the witness is held")

	// A keeper of release 15: its own session, registered, holding the key without a witness.
	_, err = b.svc.StateWrite(ctx, b.actor, "p", "v", WriteRequest{Body: stateJSON(1, "l", 1)})
	require.NoError(t, err)
	old := rawSession(t, b.url)
	key := stateID(t, old, "p", "v")
	rawExec(t, old, `INSERT INTO strata.tf_keepers (replica, backend_pid, backend_start) VALUES ('old15', $1, $2)`, int32(old.PID()), old.BackendStart())
	require.True(t, rawBool(t, old, `SELECT pg_try_advisory_lock($1)`, key))
	rawExec(t, old, `INSERT INTO strata.tf_locks (project, workspace, lock_id, info, state_id, owner, created_by)
		VALUES ('p', 'v', 'L-v', '{}', $1, 'old15', 'test')`, key)
	st, err = b.svc.LockStatus(ctx, "p", "v")
	require.NoError(t, err)
	require.True(t, st.Protected, "a release-15 keeper's lock: the pg_locks fallback")

	// Its backend lives on but has let the key go, and a pg client has it.
	require.True(t, rawBool(t, old, `SELECT pg_advisory_unlock($1)`, key))
	pg := rawSession(t, b.url)
	require.True(t, pgClientTry(t, pg, key))
	st, err = b.svc.LockStatus(ctx, "p", "v")
	require.NoError(t, err)
	require.False(t, st.Protected, "a pg client holds the key: not protected")
	probe := rawSession(t, b.url)
	require.False(t, rawBool(t, probe, `SELECT pg_try_advisory_lock_shared($1)`, key),
		"control: a probe of the key itself finds it held, and would have said protected")
}

// TestHolderDetailsNeedReadAllStats (issue 18, item 6): without pg_read_all_stats, PostgreSQL
// hides other roles' client address and application, and a pg client connected over TCP was
// shown "from local socket". Now a holder's hidden details read "unknown (needs
// pg_read_all_stats)"; with the privilege (the control, as a superuser) they are the real
// ones.
func TestHolderDetailsNeedReadAllStats(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	b.project(t, "p")
	_, err := b.svc.StateWrite(ctx, b.actor, "p", "default", WriteRequest{Body: stateJSON(1, "l", 1)})
	require.NoError(t, err)
	pg := rawSession(t, b.url)
	key := stateID(t, pg, "p", "default")
	require.True(t, pgClientTry(t, pg, key))

	st, err := b.svc.LockStatus(ctx, "p", "default")
	require.NoError(t, err)
	require.NotNil(t, st.PG)
	// Control: with the privilege, the real address ("local socket" over a Unix socket, the
	// client's IP over TCP, as when the suite runs against STRATA_TEST_DATABASE_URL).
	require.NotEmpty(t, st.PG.ClientAddr)
	require.NotContains(t, st.PG.ClientAddr, "unknown", "control: with the privilege the real address")

	// The same service as a role without pg_read_all_stats, reading the same tables.
	role := fmt.Sprintf("plain_holder_%d", time.Now().UnixNano()%1_000_000_000)
	for _, stmt := range []string{
		`CREATE ROLE ` + role + ` LOGIN`,
		`GRANT USAGE ON SCHEMA strata, p TO ` + role,
		`GRANT SELECT ON ALL TABLES IN SCHEMA strata, p TO ` + role,
	} {
		rawExec(t, pg, stmt)
	}
	t.Cleanup(func() {
		s := rawSession(t, b.url)
		_, _ = s.Exec(context.Background(), &db.Query{Name: "drop", Text: `DROP OWNED BY ` + role + `; DROP ROLE ` + role})
	})
	plainURL := withUser(t, b.url, role)
	d, err := db.Open(ctx, db.Options{URL: plainURL, MaxConns: 2, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(d.Close)
	plain, err := New(d, Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	st, err = plain.LockStatus(ctx, "p", "default")
	require.NoError(t, err)
	require.NotNil(t, st.PG)
	require.Equal(t, "unknown (needs pg_read_all_stats)", st.PG.ClientAddr)
	require.Equal(t, "unknown (needs pg_read_all_stats)", st.PG.ApplicationName)
}

// withUser is url for another role (the test clusters trust local connections).
func withUser(t *testing.T, url, role string) string {
	t.Helper()
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		u, err := neturl.Parse(url)
		require.NoError(t, err)
		u.User = neturl.User(role)
		return u.String()
	}
	var out []string
	for _, f := range strings.Fields(url) {
		if strings.HasPrefix(f, "user=") {
			f = "user=" + role
		}
		out = append(out, f)
	}
	return strings.Join(out, " ")
}
