package tfstate

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
)

// TestUnlockForwardedToOwner: an UNLOCK served by another replica deletes the row and
// NOTIFYs the owner, whose keeper lets the key go before the UNLOCK returns.
func TestUnlockForwardedToOwner(t *testing.T) {
	t.Parallel()
	a := setup(t, setupOpts{opts: Options{ReplicaID: "replica-a"}})
	bb := setupOn(t, a.url, setupOpts{opts: Options{ReplicaID: "replica-b"}})
	ctx := context.Background()
	a.project(t, "p")
	_, err := a.svc.StateWrite(ctx, a.actor, "p", "default", WriteRequest{Body: stateJSON(1, "l", 1)})
	require.NoError(t, err)
	_, err = a.svc.Lock(ctx, a.actor, "p", "default", lockBody("L"))
	require.NoError(t, err)
	pg := rawSession(t, a.url)
	key := stateID(t, pg, "p", "default")
	require.False(t, pgClientTry(t, pg, key))

	// Replica B sees A's lock and refuses another; its own keeper never touches A's key.
	_, err = bb.svc.Lock(ctx, bb.actor, "p", "default", lockBody("M"))
	requireLocked(t, err)

	start := time.Now()
	require.NoError(t, bb.svc.Unlock(ctx, bb.actor, "p", "default", UnlockRequest{ID: "L"}))
	t.Logf("forwarded unlock took %v", time.Since(start))
	// Usually released before Unlock answers (it waits up to 3 s for the owner); on a loaded
	// machine it may take the owner a little longer, so wait for it rather than race it.
	require.Eventually(t, func() bool { return pgClientTry(t, pg, key) }, 15*time.Second, 50*time.Millisecond, "the owner released the key")
	rawBool(t, pg, `SELECT pg_advisory_unlock($1)`, key)

	// And B may now lock it, its own keeper holding the key.
	_, err = bb.svc.Lock(ctx, bb.actor, "p", "default", lockBody("M"))
	require.NoError(t, err)
	require.False(t, pgClientTry(t, pg, key))
}

// TestKeeperRetakesKeysAfterReconnect: when the keeper's backend is killed (a failover, a
// dropped connection), the keeper reconnects and takes its keys again; a key a pg client
// grabbed meanwhile is reported unprotected, not silently lost, and taken back once free.
func TestKeeperRetakesKeysAfterReconnect(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	b.project(t, "p")
	for _, ws := range []string{"one", "two"} {
		_, err := b.svc.Lock(ctx, b.actor, "p", ws, lockBody("L-"+ws))
		require.NoError(t, err)
	}
	pg := rawSession(t, b.url)
	keyOne, keyTwo := stateID(t, pg, "p", "one"), stateID(t, pg, "p", "two")
	old := b.svc.Readiness(ctx).KeeperPID
	require.NotZero(t, old)

	// Kill the keeper and have a "pg client" wait for key two: it gets it the moment the
	// keeper's backend is gone, before the keeper can come back.
	rawBool(t, pg, `SELECT pg_terminate_backend($1::int)`, int32(old))
	rawBool(t, pg, `SELECT pg_advisory_lock($1) IS NULL`, keyTwo)

	require.Eventually(t, func() bool {
		r := b.svc.Readiness(ctx)
		return r.PGClientsExcluded && r.KeeperPID != old && r.UnprotectedLocks == 1
	}, 10*time.Second, 50*time.Millisecond)
	st, err := b.svc.LockStatus(ctx, "p", "two")
	require.NoError(t, err)
	require.True(t, st.Locked)
	require.False(t, st.Protected, "key two is held by the pg client")
	st, err = b.svc.LockStatus(ctx, "p", "one")
	require.NoError(t, err)
	require.True(t, st.Protected)
	probe := rawSession(t, b.url)
	require.False(t, pgClientTry(t, probe, keyOne), "key one was taken back")

	// While the pg client holds key two, even the lock's own holder may not write: the lock
	// no longer excludes the pg client, and two writers would race.
	_, err = b.svc.StateWrite(ctx, b.actor, "p", "two", WriteRequest{LockID: "L-two", Body: stateJSON(1, "l", 1)})
	requireLocked(t, err)
	_, err = b.svc.StateWrite(ctx, b.actor, "p", "one", WriteRequest{LockID: "L-one", Body: stateJSON(1, "l", 1)})
	require.NoError(t, err, "a protected lock's holder writes as usual")

	rawBool(t, pg, `SELECT pg_advisory_unlock($1)`, keyTwo)
	require.Eventually(t, func() bool {
		st, err := b.svc.LockStatus(ctx, "p", "two")
		return err == nil && st.Protected
	}, 10*time.Second, 50*time.Millisecond)
	require.False(t, pgClientTry(t, probe, keyTwo))
	// Readiness is the keeper's snapshot, published after the reconcile that marked the lock
	// protected again: wait for it rather than read it at once (it was read at once, and
	// failed now and then: seen failing every run with the publish delayed by hand).
	require.Eventually(t, func() bool {
		r := b.svc.Readiness(ctx)
		return r.PGClientsExcluded && r.UnprotectedLocks == 0
	}, 10*time.Second, 20*time.Millisecond, "readiness counts no unprotected lock once the keeper has the key back")
}

// TestLocksOutliveRestart: a lock is a row; after its replica stops, the next keeper takes
// it over and holds its key again, and the lock's holder can still write and unlock.
func TestLocksOutliveRestart(t *testing.T) {
	t.Parallel()
	a := setup(t, setupOpts{opts: Options{ReplicaID: "before"}})
	ctx := context.Background()
	a.project(t, "p")
	_, err := a.svc.Lock(ctx, a.actor, "p", "default", lockBody("L"))
	require.NoError(t, err)
	pg := rawSession(t, a.url)
	key := stateID(t, pg, "p", "default")
	require.NoError(t, a.svc.Close())

	c := setupOn(t, a.url, setupOpts{opts: Options{ReplicaID: "after"}})
	require.False(t, pgClientTry(t, pg, key), "the new keeper holds the key again")
	_, err = c.svc.Lock(ctx, c.actor, "p", "default", lockBody("other"))
	requireLocked(t, err)
	_, err = c.svc.StateWrite(ctx, c.actor, "p", "default", WriteRequest{LockID: "L", Body: stateJSON(1, "l", 1)})
	require.NoError(t, err)
	require.NoError(t, c.svc.Unlock(ctx, c.actor, "p", "default", UnlockRequest{ID: "L"}))
	require.True(t, pgClientTry(t, pg, key))
}

// TestUnlockTerminatesGoneOwner: when the owner replica stopped heart-beating but its
// keeper backend lingers (a hung process, a half-open connection), the unlocking replica
// terminates that backend so the key is freed.
func TestUnlockTerminatesGoneOwner(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	b.project(t, "p")
	_, err := b.svc.StateWrite(ctx, b.actor, "p", "default", WriteRequest{Body: stateJSON(1, "l", 1)})
	require.NoError(t, err)
	ghost := rawSession(t, b.url)
	key := stateID(t, ghost, "p", "default")
	// A replica "ghost" whose keeper session holds the key and whose heartbeat stopped.
	rawExec(t, ghost, `INSERT INTO strata.tf_keepers (replica, backend_pid, backend_start, heartbeat_at)
		SELECT 'ghost', pid, backend_start, now() - interval '1 hour' FROM pg_stat_activity WHERE pid = pg_backend_pid()`)
	rawBool(t, ghost, `SELECT pg_advisory_lock($1) IS NULL`, key)
	rawExec(t, ghost, `INSERT INTO strata.tf_locks (project, workspace, lock_id, info, state_id, owner, created_by)
		VALUES ('p', 'default', 'G', '{"ID":"G"}', $1, 'ghost', 'x')`, key)

	require.NoError(t, b.svc.Unlock(ctx, b.actor, "p", "default", UnlockRequest{ID: "G"}))
	require.Eventually(t, func() bool {
		_, err := ghost.Exec(ctx, &db.Query{Name: "test", Text: "SELECT 1"})
		return err != nil
	}, 5*time.Second, 20*time.Millisecond, "the gone owner's keeper backend was terminated")
	// The client sees the FATAL message before the terminated backend has finished exiting
	// and released its locks: poll briefly rather than race that exit.
	probe := rawSession(t, b.url)
	require.Eventually(t, func() bool { return pgClientTry(t, probe, key) }, 5*time.Second, 20*time.Millisecond,
		"the terminated owner's advisory key is free")
}

// TestForwardedUnlockByNotify: with the periodic reconcile off and the heartbeat an hour
// away, only the NOTIFY that a forwarded UNLOCK sends can make the owner let the key go;
// it does so well under a second. Without the NOTIFY (or its listener) the key stays held
// and the test fails its bound.
func TestForwardedUnlockByNotify(t *testing.T) {
	t.Parallel()
	off := Options{HeartbeatInterval: time.Hour, ReconcileInterval: -1}
	off.ReplicaID = "owner"
	a := setup(t, setupOpts{opts: off})
	off.ReplicaID = "other"
	bb := setupOn(t, a.url, setupOpts{opts: off})
	ctx := context.Background()
	a.project(t, "p")
	_, err := a.svc.StateWrite(ctx, a.actor, "p", "default", WriteRequest{Body: stateJSON(1, "l", 1)})
	require.NoError(t, err)
	_, err = a.svc.Lock(ctx, a.actor, "p", "default", lockBody("L"))
	require.NoError(t, err)
	pg := rawSession(t, a.url)
	key := stateID(t, pg, "p", "default")
	require.False(t, pgClientTry(t, pg, key))

	// Unlock directly in the database through B's path, but measure the owner's release
	// from the commit: B's Unlock waits for the owner up to 3 s, so time it apart.
	start := time.Now()
	require.NoError(t, bb.svc.Unlock(ctx, bb.actor, "p", "default", UnlockRequest{ID: "L"}))
	require.Eventually(t, func() bool { return pgClientTry(t, pg, key) }, 2*time.Second, 10*time.Millisecond, "the owner released the key on NOTIFY")
	require.Less(t, time.Since(start), 2*time.Second)
}

// TestConcurrentWriters: writers that all start from serial 1 and write serial 2 race; the
// row lock (FOR UPDATE) makes each wait for the one before and then judge its write against
// what that one stored, so exactly one succeeds and the others are refused as stale. The
// control reads without the row lock, with every writer held after its read until all have
// read: then all of them succeed and each overwrites the last (acknowledged writes lost).
func TestConcurrentWriters(t *testing.T) {
	t.Parallel()
	for _, rowLock := range []bool{true, false} {
		t.Run(fmt.Sprintf("rowLock=%v", rowLock), func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{noKeeper: true})
			ctx := context.Background()
			b.project(t, "p")
			_, err := b.svc.StateWrite(ctx, b.actor, "p", "default", WriteRequest{Body: stateJSON(1, "l", 1)})
			require.NoError(t, err)
			const writers = 4
			var arrived sync.WaitGroup
			arrived.Add(writers)
			all := make(chan struct{})
			go func() { arrived.Wait(); close(all) }()
			b.svc.noRowLock = !rowLock
			b.svc.afterRead = func() {
				arrived.Done()
				select { // with the row lock the others cannot arrive: go on after a while
				case <-all:
				case <-time.After(300 * time.Millisecond):
				}
			}
			errs := make(chan error, writers)
			for i := range writers {
				go func() {
					// Serial 2, different content each.
					body := bytes.Replace(stateJSON(2, "l", 1), []byte(`"outputs": {}`), fmt.Appendf(nil, `"outputs": {"w": {"value": %d, "type": "number"}}`, i), 1)
					_, err := b.svc.StateWrite(ctx, b.actor, "p", "default", WriteRequest{Body: body})
					errs <- err
				}()
			}
			ok := 0
			for range writers {
				select {
				case err := <-errs:
					if err == nil {
						ok++
					} else {
						requireKind(t, err, fault.KindConflict)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("a writer did not answer")
				}
			}
			if rowLock {
				require.Equal(t, 1, ok, "exactly one writer of serial 2 wins")
			} else {
				require.Equal(t, writers, ok, "control: without the row lock every writer succeeds")
			}
		})
	}
}

// TestKeeperUnlockDuringReconcile: an UNLOCK that commits while a reconcile has read the
// keys to hold (this one still lacking the lock's key, after its session was lost) but not
// yet taken them still leaves the key free when it answers: the reconcile takes the key
// with the slot held, and the unlock's release waits for the slot and, finding no row that
// wants the key, lets it go. (Written to check the suspected cause of a failure of
// TestLocksOutliveRestart; it passes without a change: the cause was the old replica's
// backend still holding the key, see TestCloseReleasesKeysBeforeReturning.)
func TestKeeperUnlockDuringReconcile(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	b.project(t, "p")
	_, err := b.svc.Lock(ctx, b.actor, "p", "default", lockBody("L"))
	require.NoError(t, err)
	pg := rawSession(t, b.url)
	key := stateID(t, pg, "p", "default")
	old := b.svc.Readiness(ctx).KeeperPID
	require.NotZero(t, old)

	reached, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hook := func() {
		if b.svc.Readiness(ctx).KeeperPID == old {
			return
		}
		once.Do(func() {
			close(reached)
			<-resume
		})
	}
	b.svc.keeper.afterWantRead.Store(&hook)
	rawBool(t, pg, `SELECT pg_terminate_backend($1::int)`, int32(old))
	select {
	case <-reached:
	case <-time.After(15 * time.Second):
		t.Fatal("the reconnected keeper did not reconcile")
	}

	unlocked := make(chan error, 1)
	go func() { unlocked <- b.svc.Unlock(ctx, b.actor, "p", "default", UnlockRequest{ID: "L"}) }()
	require.Eventually(t, func() bool {
		return rawBool(t, pg, `SELECT NOT EXISTS (SELECT 1 FROM strata.tf_locks WHERE project = 'p' AND workspace = 'default')`)
	}, 10*time.Second, 10*time.Millisecond, "the unlock committed")
	close(resume)
	require.NoError(t, <-unlocked)
	require.True(t, pgClientTry(t, pg, key), "a pg client takes the key as soon as the UNLOCK has answered")
}
