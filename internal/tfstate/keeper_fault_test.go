package tfstate

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
)

// freeze stops a PostgreSQL backend (SIGSTOP): it keeps its connection and its locks but
// answers nothing, like a backend stuck on I/O or a peer behind a dead link. The test
// cluster runs on this machine (pgtest); a server elsewhere cannot be signalled, and the
// test fails saying so. The backend is always continued when the test ends.
func freeze(t *testing.T, pid uint32) (thaw func()) {
	t.Helper()
	require.NotZero(t, pid)
	require.NoError(t, syscall.Kill(int(pid), syscall.SIGSTOP), "freezing backend %d needs the test cluster on this machine (pgtest's own, or STRATA_TEST_DATABASE_URL to a local server run by this user or root)", pid)
	var once sync.Once
	thaw = func() { once.Do(func() { _ = syscall.Kill(int(pid), syscall.SIGCONT) }) }
	t.Cleanup(thaw)
	return thaw
}

// within runs f and fails the test when it has not returned after d; it never hangs the
// test (f is left running; the frozen backend is thawed by the cleanup).
func within[T any](t *testing.T, d time.Duration, f func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("no answer within %v", d)
	}
	var zero T
	return zero
}

// lockStatus is LockStatus that must succeed.
func lockStatus(t *testing.T, b *testBundle, workspace string) (locked, protected bool) {
	t.Helper()
	st, err := b.svc.LockStatus(context.Background(), "p", workspace)
	require.NoError(t, err)
	return st.Locked, st.Protected
}

// auditActions lists the audit actions recorded for a target, oldest first.
func auditActions(t *testing.T, s *db.Session, target string) []string {
	t.Helper()
	rows, err := s.Query(context.Background(), &db.Query{Name: "test", Text: `SELECT action FROM strata.audit_log WHERE target = $1 ORDER BY id`}, target)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var a string
		require.NoError(t, rows.Scan(&a))
		out = append(out, a)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestFrozenKeeperNeverFreezesLocks: with the keeper's backend frozen (its call hangs and,
// with a long KeeperTimeout, is not replaced during the test), a LOCK with a 5 s deadline
// answers 503 within ~6 s, 25 such LOCKs at once do not starve the pool (a read still
// answers), Readiness reports the keeper not answering at once, and after the backend
// continues everything recovers with no lock lost. Reverting the fix (mutex without
// deadline; LOCK waiting for the keeper inside its transaction) makes the LOCK hang and the
// read starve, so the test fails on its bounds.
func TestFrozenKeeperNeverFreezesLocks(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{maxConns: 4, opts: Options{KeeperTimeout: time.Minute}})
	ctx := context.Background()
	b.project(t, "p")
	_, err := b.svc.Lock(ctx, b.actor, "p", "held", lockBody("H"))
	require.NoError(t, err)
	pg := rawSession(t, b.url)
	key := stateID(t, pg, "p", "held")
	_, err = b.svc.StateWrite(ctx, b.actor, "p", "readable", WriteRequest{Body: stateJSON(1, "l", 1)})
	require.NoError(t, err)

	thaw := freeze(t, b.svc.Readiness(ctx).KeeperPID)
	require.Eventually(t, func() bool { return !b.svc.Readiness(ctx).PGClientsExcluded }, 5*time.Second, 50*time.Millisecond,
		"Readiness reports the keeper not answering without waiting for it")

	lockErr := func(ws string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := b.svc.Lock(ctx, b.actor, "p", ws, lockBody("F-"+ws))
		return err
	}
	start := time.Now()
	err = within(t, 8*time.Second, func() error { return lockErr("frozen") })
	requireKind(t, err, fault.KindUnavailable)
	require.Less(t, time.Since(start), 7*time.Second)

	// 25 LOCKs waiting for the frozen keeper hold no pool connection (the pool has 4).
	errs := make(chan error, 25)
	for i := range 25 {
		go func() { errs <- lockErr(fmt.Sprintf("w%d", i)) }()
	}
	time.Sleep(500 * time.Millisecond)
	got := within(t, 4*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := b.svc.StateGet(ctx, "p", "readable")
		return err
	})
	require.NoError(t, got, "a read answers while LOCKs wait for the frozen keeper")
	for range 25 {
		err := within(t, 10*time.Second, func() error { return <-errs })
		requireKind(t, err, fault.KindUnavailable)
	}

	thaw()
	require.Eventually(t, func() bool { return b.svc.Readiness(ctx).PGClientsExcluded }, 15*time.Second, 50*time.Millisecond)
	_, err = b.svc.Lock(ctx, b.actor, "p", "after", lockBody("A"))
	require.NoError(t, err)
	locked, protected := lockStatus(t, b, "held")
	require.True(t, locked)
	require.True(t, protected, "the lock taken before the freeze is still held")
	require.False(t, pgClientTry(t, pg, key))
}

// TestLockWithoutDeadlineBoundedByKeeperWait (issue 16): with the keeper idle when its
// backend freezes, a LOCK sent without a client deadline (as Terraform sends it) used to
// wait for its own keeper call, i.e. the keeper's query timeout (10 s by default), not the
// keeper wait (5 s). It now answers 503 within the keeper wait while the call goes on; after
// the backend continues, LOCKs work again, the same workspace included, and the stray key
// the late call took is not left blocking a pg client. Seen failing (answered after the
// minute-long KeeperTimeout) with take instead of takeBy.
func TestLockWithoutDeadlineBoundedByKeeperWait(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{opts: Options{KeeperTimeout: time.Minute, KeeperWait: 2 * time.Second}})
	ctx := context.Background()
	b.project(t, "p")
	_, err := b.svc.Lock(ctx, b.actor, "p", "warm", lockBody("W")) // the keeper's session is open
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.svc.Readiness(ctx).PGClientsExcluded }, 5*time.Second, 20*time.Millisecond)
	thaw := freeze(t, b.svc.Readiness(ctx).KeeperPID)

	start := time.Now()
	err = within(t, 20*time.Second, func() error {
		_, err := b.svc.Lock(context.Background(), b.actor, "p", "frozen", lockBody("F"))
		return err
	})
	requireKind(t, err, fault.KindUnavailable)
	took := time.Since(start)
	require.Less(t, took, 4*time.Second, "answered within the keeper wait (2 s), not the keeper's timeout: %v", took)

	thaw()
	require.Eventually(t, func() bool {
		_, err := b.svc.Lock(ctx, b.actor, "p", "frozen", lockBody("F2"))
		return err == nil
	}, 20*time.Second, 100*time.Millisecond, "the workspace the late LOCK wanted can be locked")
	_, err = b.svc.Lock(ctx, b.actor, "p", "after", lockBody("A"))
	require.NoError(t, err)
}

// TestKeeperTerminatedNeverSilentlyProtected: the keeper's backend is killed and a pg client
// takes the key at once, before the keeper can notice (its heartbeat is an hour away). From
// that instant GET …/lock says protected:false and the lock's own holder may not write;
// when the keeper next uses its session it marks the lock unprotected and audits the gap's
// start; once the pg client lets go the key is taken back, verified, the gap is closed in
// the audit log and shown as lastGap. Reverting to the stored flag (LockStatus and the write
// path trusting unprotected_since) shows protected:true and lets the write through.
func TestKeeperTerminatedNeverSilentlyProtected(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{opts: Options{HeartbeatInterval: time.Hour}})
	ctx := context.Background()
	b.project(t, "p")
	_, err := b.svc.StateWrite(ctx, b.actor, "p", "default", WriteRequest{Body: stateJSON(1, "l", 1)})
	require.NoError(t, err)
	_, err = b.svc.Lock(ctx, b.actor, "p", "default", lockBody("L"))
	require.NoError(t, err)
	pg := rawSession(t, b.url)
	key := stateID(t, pg, "p", "default")
	locked, protected := lockStatus(t, b, "default")
	require.True(t, locked)
	require.True(t, protected)

	rawBool(t, pg, `SELECT pg_terminate_backend($1::int)`, int32(b.svc.Readiness(ctx).KeeperPID))
	require.Eventually(t, func() bool { return pgClientTry(t, pg, key) }, 5*time.Second, 10*time.Millisecond, "the key is free once the keeper's backend is gone")
	_, protected = lockStatus(t, b, "default")
	require.False(t, protected, "a lock whose key a pg client holds is never reported protected")
	_, err = b.svc.StateWrite(ctx, b.actor, "p", "default", WriteRequest{LockID: "L", Body: stateJSON(2, "l", 1)})
	requireLocked(t, err)

	// The keeper notices at its next use of the session (here a LOCK elsewhere), marks and
	// audits the gap, and carries on with a new session.
	_, err = b.svc.Lock(ctx, b.actor, "p", "other", lockBody("O"))
	require.NoError(t, err)
	require.Contains(t, auditActions(t, pg, "p/default"), "state.lock.unprotected")
	st, err := b.svc.LockStatus(ctx, "p", "default")
	require.NoError(t, err)
	require.NotNil(t, st.UnprotectedSince)

	rawBool(t, pg, `SELECT pg_advisory_unlock($1)`, key)
	// Poke on every try: the probe of GET …/lock holds the key's witness shared for an
	// instant, and a reconcile that meets it lets the key go and tries again only at its next
	// run (migration 0017); with an hour-long heartbeat a single poke could be that one run.
	require.Eventually(t, func() bool {
		b.svc.keeper.poke()
		_, p := lockStatus(t, b, "default")
		return p
	}, 10*time.Second, 50*time.Millisecond)
	st, err = b.svc.LockStatus(ctx, "p", "default")
	require.NoError(t, err)
	require.Nil(t, st.UnprotectedSince)
	require.NotNil(t, st.LastGap)
	require.False(t, st.LastGap.To.Before(st.LastGap.From))
	require.Equal(t, []string{"state.lock", "state.lock.unprotected", "state.lock.protected"}, auditActions(t, pg, "p/default"))
	require.False(t, pgClientTry(t, pg, key))
	_, err = b.svc.StateWrite(ctx, b.actor, "p", "default", WriteRequest{LockID: "L", Body: stateJSON(2, "l", 1)})
	require.NoError(t, err)
}

// TestKeeperFrozenPastTimeout: the keeper's backend freezes; its call times out, which
// closes the session (keys stay with the frozen backend until it continues). The keeper
// marks its locks unprotected through the pool, reconnects and keeps serving LOCK; a pg
// client is excluded throughout (the frozen backend holds the key) and the lock reads
// protected:false until the key is verified again after the backend continues. Without
// the fix the heartbeat hangs forever and the lock reads protected:true.
func TestKeeperFrozenPastTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{opts: Options{KeeperTimeout: time.Second}})
	ctx := context.Background()
	b.project(t, "p")
	_, err := b.svc.Lock(ctx, b.actor, "p", "default", lockBody("L"))
	require.NoError(t, err)
	pg := rawSession(t, b.url)
	key := stateID(t, pg, "p", "default")
	old := b.svc.Readiness(ctx).KeeperPID

	thaw := freeze(t, old)
	require.Eventually(t, func() bool {
		r := b.svc.Readiness(ctx)
		return r.PGClientsExcluded && r.KeeperPID != old
	}, 10*time.Second, 50*time.Millisecond, "the keeper replaced its frozen session")
	require.Contains(t, auditActions(t, pg, "p/default"), "state.lock.unprotected")
	for range 5 {
		require.False(t, pgClientTry(t, pg, key), "the frozen backend still holds the key")
		_, protected := lockStatus(t, b, "default")
		require.False(t, protected, "the keeper cannot verify the key: not protected")
		time.Sleep(100 * time.Millisecond)
	}
	_, err = b.svc.Lock(ctx, b.actor, "p", "during", lockBody("D"))
	require.NoError(t, err, "LOCK works on the new session")

	thaw()
	require.Eventually(t, func() bool { _, p := lockStatus(t, b, "default"); return p }, 15*time.Second, 50*time.Millisecond)
	require.False(t, pgClientTry(t, pg, key))
	require.Contains(t, auditActions(t, pg, "p/default"), "state.lock.protected")
}

// TestDeadReplicaLocksTakenOver: replica A holds two locks and dies without unregistering
// (its loops stop, its keeper backend is killed: what kill -9 leaves behind). A pg client
// takes one key at once. Replica B shows both locks protected:false at once (their owner's
// keeper backend is gone), takes them over, verifies the free key (protected again) and
// refuses to call protected the key the pg client holds, until it lets go. Reverting to
// the stored flag shows both as protected:true while a pg client holds one.
func TestDeadReplicaLocksTakenOver(t *testing.T) {
	t.Parallel()
	a := setup(t, setupOpts{opts: Options{ReplicaID: "replica-a"}})
	bb := setupOn(t, a.url, setupOpts{opts: Options{ReplicaID: "replica-b"}})
	ctx := context.Background()
	a.project(t, "p")
	for _, ws := range []string{"one", "two"} {
		_, err := a.svc.StateWrite(ctx, a.actor, "p", ws, WriteRequest{Body: stateJSON(1, "l", 1)})
		require.NoError(t, err)
		_, err = a.svc.Lock(ctx, a.actor, "p", ws, lockBody("L-"+ws))
		require.NoError(t, err)
	}
	pg := rawSession(t, a.url)
	keyOne, keyTwo := stateID(t, pg, "p", "one"), stateID(t, pg, "p", "two")
	_, protected := lockStatus(t, bb, "one")
	require.True(t, protected)

	// kill -9 of replica A.
	pid := a.svc.Readiness(ctx).KeeperPID
	a.svc.cancel()
	a.svc.wg.Wait()
	rawBool(t, pg, `SELECT pg_terminate_backend($1::int)`, int32(pid))
	require.Eventually(t, func() bool { return pgClientTry(t, pg, keyOne) }, 5*time.Second, 10*time.Millisecond)

	// "one": its key is held by a pg client, so it can never be protected again. "two": B may
	// already have taken its free key over and verified it (that takes about 0.1 s, and a
	// loaded machine can spend that long between the kill and this look), so only "locked"
	// is certain here; that it becomes protected is checked below.
	locked, protected := lockStatus(t, bb, "one")
	require.True(t, locked)
	require.False(t, protected, "one: its owner's keeper is gone and a pg client holds its key")
	locked, _ = lockStatus(t, bb, "two")
	require.True(t, locked)
	_, err := bb.svc.StateWrite(ctx, bb.actor, "p", "one", WriteRequest{LockID: "L-one", Body: stateJSON(2, "l", 1)})
	requireLocked(t, err)

	require.Eventually(t, func() bool { _, p := lockStatus(t, bb, "two"); return p }, 10*time.Second, 50*time.Millisecond, "B took over and verified the free key")
	probe := rawSession(t, a.url)
	require.False(t, pgClientTry(t, probe, keyTwo))
	for range 5 {
		_, protected := lockStatus(t, bb, "one")
		require.False(t, protected, "B never calls protected a key a pg client holds")
		time.Sleep(100 * time.Millisecond)
	}
	require.Contains(t, auditActions(t, pg, "p/one"), "state.lock.adopted")

	rawBool(t, pg, `SELECT pg_advisory_unlock($1)`, keyOne)
	require.Eventually(t, func() bool { _, p := lockStatus(t, bb, "one"); return p }, 10*time.Second, 50*time.Millisecond)
	require.False(t, pgClientTry(t, probe, keyOne))
	require.Contains(t, auditActions(t, pg, "p/one"), "state.lock.protected")
	_, err = bb.svc.StateWrite(ctx, bb.actor, "p", "one", WriteRequest{LockID: "L-one", Body: stateJSON(2, "l", 1)})
	require.NoError(t, err)
}

// TestDeadReplicaGapStartsAtLoss (issue 28, item 7): the lock-gap audit record of a dead
// replica's lock starts when its key was lost, not when a survivor noticed. Replica A holds
// a lock and dies (its keeper backend killed); replica B starts only 1.5 s later, takes the
// lock over and verifies its key. The gap B records ("state.lock.protected", from) begins at
// A's keeper's last heartbeat — the last moment the key is known held, at most one heartbeat
// before the loss — never after the loss. Seen failing before the fix: it began at B's
// takeover, 1.5 s after the key was free.
func TestDeadReplicaGapStartsAtLoss(t *testing.T) {
	t.Parallel()
	a := setup(t, setupOpts{opts: Options{ReplicaID: "replica-a"}})
	ctx := context.Background()
	a.project(t, "p")
	_, err := a.svc.StateWrite(ctx, a.actor, "p", "one", WriteRequest{Body: stateJSON(1, "l", 1)})
	require.NoError(t, err)
	_, err = a.svc.Lock(ctx, a.actor, "p", "one", lockBody("L-one"))
	require.NoError(t, err)
	pg := rawSession(t, a.url)

	pid := a.svc.Readiness(ctx).KeeperPID
	a.svc.cancel()
	a.svc.wg.Wait()
	var lostAt time.Time
	require.NoError(t, pg.QueryRow(ctx, &db.Query{Name: "test", Text: `SELECT clock_timestamp()`}).Scan(&lostAt))
	rawBool(t, pg, `SELECT pg_terminate_backend($1::int)`, int32(pid))
	time.Sleep(1500 * time.Millisecond)

	bb := setupOn(t, a.url, setupOpts{opts: Options{ReplicaID: "replica-b"}})
	require.Eventually(t, func() bool { _, p := lockStatus(t, bb, "one"); return p }, 10*time.Second, 50*time.Millisecond, "B took over and verified the key")
	var from time.Time
	require.NoError(t, pg.QueryRow(ctx, &db.Query{Name: "test", Text: `SELECT (detail->>'from')::timestamptz FROM strata.audit_log
		WHERE target = 'p/one' AND action = 'state.lock.protected' ORDER BY id DESC LIMIT 1`}).Scan(&from))
	require.False(t, from.After(lostAt), "the gap starts no later than the key was lost (%v), not when B noticed: %v", lostAt, from)
	require.True(t, from.After(lostAt.Add(-3*a.svc.opts.HeartbeatInterval)), "the gap starts at A's last heartbeat before the loss (%v): %v", lostAt, from)
}

// TestKeeperHeldKeyVerifiedBeforeALock: a key the keeper holds in memory (an UNLOCK of the
// workspace committed and has not let it go yet) is verified on the server before a LOCK
// counts on it. Here the keeper's backend is terminated while it holds the key and nothing
// uses the session afterwards (the heartbeat is an hour away), so the session still looks
// open; a pg client takes the key and lets it go again. take must then find the session dead,
// reconnect and really take the key: a pg client can no longer get it. Before the fix take
// answered true from memory and the key stayed free beside a lock that read protected (the
// robustness harness's lock model caught it under cut-connections).
func TestKeeperHeldKeyVerifiedBeforeALock(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{opts: Options{HeartbeatInterval: time.Hour}})
	ctx := context.Background()
	b.project(t, "p")
	_, err := b.svc.StateWrite(ctx, b.actor, "p", "default", WriteRequest{Body: stateJSON(1, "l", 1)})
	require.NoError(t, err)
	_, err = b.svc.Lock(ctx, b.actor, "p", "default", lockBody("A"))
	require.NoError(t, err)
	pg := rawSession(t, b.url)
	key := stateID(t, pg, "p", "default")
	require.False(t, pgClientTry(t, pg, key), "the keeper holds the key")

	rawBool(t, pg, `SELECT pg_terminate_backend($1::int)`, int32(b.svc.Readiness(ctx).KeeperPID))
	require.Eventually(t, func() bool { return pgClientTry(t, pg, key) }, 5*time.Second, 10*time.Millisecond, "the key is free once the keeper's backend is gone")
	rawBool(t, pg, `SELECT pg_advisory_unlock($1)`, key)

	k := b.svc.keeper
	require.NoError(t, k.acquireSlot(ctx))
	ok, err := k.take(ctx, "p", key)
	k.releaseSlot()
	require.NoError(t, err)
	require.True(t, ok, "the key is free: the keeper takes it on a new session")
	require.False(t, pgClientTry(t, pg, key), "a key take reported held is held on the server")
}
