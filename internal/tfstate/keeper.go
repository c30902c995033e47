package tfstate

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
)

// keeper is the replica's lock keeper: one dedicated session (db.Session) that holds the
// advisory keys of all the HTTP locks this replica owns, so that pg backend clients find
// those workspaces locked.
//
// Whoever uses the session holds the keeper's slot (a channel of capacity one, not a mutex,
// so that a request waiting for the keeper gives up when its context ends). Every call on
// the session has its own timeout (Options.KeeperTimeout): a frozen backend or a dead peer
// costs one timeout, after which the driver closes the connection and the keeper starts
// over on a new one. Readiness reads an atomic snapshot and never waits for the slot.
//
// What the keeper should hold is decided by the database, not by memory: the lock rows this
// replica owns (tf_locks.owner). held is what the session holds, as last verified in
// pg_locks. A LOCK holds the slot for its whole transaction (taking the key before the row
// commits), so a reconcile never sees a key whose row is not yet visible.
//
// "Protected" is a fact, not a flag: GET …/lock and writes probe the lock's witness key
// (migration 0017), which only a keeper holds, and only while it holds the lock's key (taken
// after the key, let go before it: tf_keeper_take, tf_keeper_release); a key held without a
// witness (a keeper of release 15) is looked up in pg_locks instead. unprotected_since records the gaps: when the session is lost, every lock
// of this replica is marked (through the pool, before anything else) and the window audited
// (state.lock.unprotected); the mark is cleared only when the key has been taken again and
// seen in pg_locks for this session's pid (state.lock.protected, with the window).
type keeper struct {
	svc *Service
	url string

	slot chan struct{}

	// Guarded by slot.
	sess *db.Session
	held map[int64]bool
	// onWorker are the keys also held on a Citus worker, by project (Options.DistributeProjects):
	// the pg backend takes its keys on the worker holding the project, so the keeper holds
	// them there too (KeeperTakeOnWorker), through its session's connection to that worker.
	onWorker map[int64]string
	lastErr  error
	dirty    bool // (re)connected: reconcile soon
	// pending are gaps that could not be recorded when they began (the database was shutting
	// down, say): recorded, with their true start, as soon as the database answers again.
	pending []pendingGap

	// callStart is when the session call in flight began (unix nanoseconds), 0 when none.
	callStart atomic.Int64
	snap      atomic.Pointer[Readiness]

	pokeCh chan struct{}

	// afterWantRead, for tests, runs in a reconcile between reading the keys to hold and
	// taking those it lacks, with the slot held.
	afterWantRead atomic.Pointer[func()]
}

func newKeeper(s *Service, url string) *keeper {
	k := &keeper{svc: s, url: url, slot: make(chan struct{}, 1), held: map[int64]bool{}, onWorker: map[int64]string{}, pokeCh: make(chan struct{}, 1)}
	k.snap.Store(&Readiness{Detail: "lock keeper session is not connected yet: HTTP state locks do not exclude pg backend clients until it is"})
	return k
}

func (k *keeper) appName() string {
	name := "strata-lock-keeper " + k.svc.replica
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}

// actor names the keeper in the audit log.
func (k *keeper) actor() Actor { return Actor{Name: "strata-lock-keeper/" + k.svc.replica} }

// errKeeperUnavailable answers a request that could not get the keeper in time.
func errKeeperUnavailable(err error) error {
	return fault.Wrap(fault.KindUnavailable, err, "the lock keeper's database session is not answering; retry")
}

// acquireSlot waits for the keeper, at most until ctx ends or for the keeper's wait bound
// (Options.KeeperWait), whichever comes first. A request waiting here holds no pool
// connection.
func (k *keeper) acquireSlot(ctx context.Context) error {
	t := time.NewTimer(k.svc.opts.KeeperWait)
	defer t.Stop()
	select {
	case k.slot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return errKeeperUnavailable(ctx.Err())
	case <-t.C:
		return errKeeperUnavailable(fmt.Errorf("waited %v for the lock keeper", k.svc.opts.KeeperWait))
	}
}

func (k *keeper) releaseSlot() { <-k.slot }

// call runs one round trip on the session with the keeper's own timeout, detached from the
// caller's cancellation: pgx closes a connection whose query is cancelled, and closing the
// keeper's session because one client hung up would release the keys of every lock this
// replica holds. A call that breaks the session (or times out, which breaks it) ends in
// lost. Call with the slot held and a session open.
func (k *keeper) call(ctx context.Context, f func(ctx context.Context, s *db.Session) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.svc.opts.KeeperTimeout)
	defer cancel()
	k.callStart.Store(time.Now().UnixNano())
	err := f(ctx, k.sess)
	k.callStart.Store(0)
	if err != nil && k.sess.Closed() {
		k.lost(ctx, err)
	}
	return err
}

// bounded is a context for keeper work through the pool: detached from the caller, bounded
// by the keeper's timeout.
func (k *keeper) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), k.svc.opts.KeeperTimeout)
}

// lost drops a session that failed. Before anything else it marks every lock of this
// replica unprotected, through the pool: from now until a reconcile has taken and verified
// their keys again, a pg client may hold them. Call with the slot held.
func (k *keeper) lost(ctx context.Context, err error) {
	if k.sess != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = k.sess.Close(cctx)
		cancel()
		k.sess = nil
	}
	k.held = map[int64]bool{}
	k.onWorker = map[int64]string{}
	k.lastErr = err
	k.svc.log.Warn("lock keeper session lost; its locks are unprotected until it has taken their keys again", "err", err)
	k.markUnprotected(ctx, nil, "the lock keeper's session was lost: "+err.Error())
	k.publish(0)
}

// pendingGap is a gap markUnprotected could not record: since when, which keys (nil: all the
// replica's locks), and why.
type pendingGap struct {
	since  time.Time
	keys   []int64
	reason string
}

// markUnprotected marks the replica's locks with keys (all when keys is nil) unprotected
// through the pool, auditing each newly marked one. When the database cannot be written (it
// is shutting down: the very moment a gap opens), the gap is kept and recorded by
// recordPending, with its true start, when the database answers again, so every window is
// audited.
func (k *keeper) markUnprotected(ctx context.Context, keys []int64, reason string) {
	g := pendingGap{since: time.Now(), keys: keys, reason: reason}
	if err := k.markUnprotectedSince(ctx, g); err != nil {
		// The locks still read as unprotected: GET …/lock and writes probe the witness.
		k.svc.log.Error("cannot mark locks unprotected now; the gap is recorded when the database answers again", "err", err)
		k.pending = append(k.pending, g)
	}
}

// recordPending records the gaps markUnprotected could not, oldest first; those that still
// cannot be written stay pending. Call with the slot held, before the keys are verified.
func (k *keeper) recordPending(ctx context.Context) {
	for len(k.pending) > 0 {
		if err := k.markUnprotectedSince(ctx, k.pending[0]); err != nil {
			k.svc.log.Warn("cannot record an earlier lock gap yet", "since", k.pending[0].since, "err", err)
			return
		}
		k.pending = k.pending[1:]
	}
}

func (k *keeper) markUnprotectedSince(ctx context.Context, g pendingGap) error {
	keys, reason := g.keys, g.reason
	ctx, cancel := k.bounded(ctx)
	defer cancel()
	return k.svc.db.InTx(ctx, func(tx *db.Tx) error {
		rows, err := tx.Query(ctx, q.Get("KeeperMarkUnprotected"), k.svc.replica, keys, g.since)
		if err != nil {
			return err
		}
		type mark struct {
			target string
			since  time.Time
		}
		var marks []mark
		for rows.Next() {
			var project, workspace string
			var since time.Time
			if err := rows.Scan(&project, &workspace, &since); err != nil {
				rows.Close()
				return err
			}
			marks = append(marks, mark{project + "/" + workspace, since})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, m := range marks {
			k.svc.log.Error("HTTP lock unprotected: a pg client may hold its workspace", "lock", m.target, "reason", reason)
			if err := audit(ctx, tx, k.actor(), "state.lock.unprotected", m.target, map[string]any{
				"since": m.since.UTC(), "replica": k.svc.replica, "reason": reason,
			}); err != nil {
				return err
			}
		}
		return nil
	})
}

// markProtected clears the mark of locks whose keys were verified held, auditing the gap.
func (k *keeper) markProtected(ctx context.Context, keys []int64) {
	if len(keys) == 0 {
		return
	}
	ctx, cancel := k.bounded(ctx)
	defer cancel()
	err := k.svc.db.InTx(ctx, func(tx *db.Tx) error {
		rows, err := tx.Query(ctx, q.Get("KeeperMarkProtected"), k.svc.replica, keys)
		if err != nil {
			return err
		}
		type gap struct {
			target   string
			from, to time.Time
		}
		var gaps []gap
		for rows.Next() {
			var g gap
			var project, workspace string
			if err := rows.Scan(&project, &workspace, &g.from, &g.to); err != nil {
				rows.Close()
				return err
			}
			g.target = project + "/" + workspace
			gaps = append(gaps, g)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, g := range gaps {
			k.svc.log.Info("HTTP lock protected again", "lock", g.target, "unprotected_from", g.from, "unprotected_to", g.to)
			if err := audit(ctx, tx, k.actor(), "state.lock.protected", g.target, map[string]any{
				"from": g.from.UTC(), "to": g.to.UTC(), "replica": k.svc.replica,
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		k.svc.log.Warn("cannot mark locks protected", "err", err)
	}
}

// ensure connects the session when there is none (or it was lost) and registers it. A
// session found closed is handled as lost first. Call with the slot held.
func (k *keeper) ensure(ctx context.Context) error {
	if k.sess != nil && !k.sess.Closed() {
		return nil
	}
	if k.sess != nil {
		k.lost(ctx, errors.New("connection closed"))
	}
	cctx, cancel := k.bounded(ctx)
	defer cancel()
	sess, err := db.OpenSession(cctx, k.url, k.svc.db.Schema(), k.appName())
	if err != nil {
		k.lastErr = err
		k.publish(0)
		return err
	}
	if k.svc.opts.DistributeProjects {
		var ignored string
		if err := sess.QueryRow(cctx, q.Get("KeeperCitusSession")).Scan(&ignored); err != nil {
			_ = sess.Close(cctx)
			k.lastErr = err
			k.publish(0)
			return err
		}
	}
	if _, err := sess.Exec(cctx, q.Get("KeeperRegister"), k.svc.replica, int32(sess.PID()), sess.BackendStart()); err != nil {
		_ = sess.Close(cctx)
		k.lastErr = err
		k.publish(0)
		return err
	}
	k.sess = sess
	k.lastErr = nil
	k.dirty = true
	k.svc.log.Info("lock keeper session connected", "pid", sess.PID(), "replica", k.svc.replica)
	k.publish(-1)
	return nil
}

// take takes key for a LOCK transaction in flight (the caller holds the slot until its
// transaction has ended). It reports false when another session holds the key. A session
// found broken is replaced once.
//
// A key the keeper already holds (an UNLOCK of the workspace committed and has not let it go
// yet) is verified in pg_locks rather than trusted from memory: a session whose connection
// was cut or whose backend was terminated looks open until it is next used, while its keys
// are free on the server, and a LOCK granted on that memory would read protected while a pg
// client takes the key beside it (the robustness harness found it under cut-connections).
func (k *keeper) take(ctx context.Context, project string, key int64) (bool, error) {
	var err error
	for range 2 {
		if err = k.ensure(ctx); err != nil {
			return false, err
		}
		var got map[int64]bool
		err = k.call(ctx, func(ctx context.Context, s *db.Session) error {
			var err error
			if k.held[key] {
				keys, err := scanKeys(s.Query(ctx, q.Get("KeeperVerify"), []int64{key}))
				if err != nil || len(keys) == 1 {
					got = map[int64]bool{key: len(keys) == 1}
					return err
				}
				delete(k.held, key) // not held after all: take it below
			}
			if got, err = tryKeys(ctx, s, []int64{key}); err != nil || !got[key] {
				return err
			}
			got[key], err = k.takeOnWorker(ctx, s, project, key)
			return err
		})
		if err == nil {
			if got[key] {
				k.held[key] = true
			}
			return got[key], nil
		}
		if k.sess != nil {
			return false, err // a statement error, not a lost session
		}
	}
	return false, err
}

// errKeeperLate: a request stopped waiting for a keeper call that goes on without it; the
// call, not the request, now holds the slot and gives it back when it ends.
var errKeeperLate = errors.New("the lock keeper did not answer within its wait")

// takeBy is take for a request that must answer by deadline (its keeper wait, which started
// when it asked for the slot): when the keeper's call has not ended by then, the request
// gets errKeeperLate and the call goes on, detached, under the keeper's own timeout — the
// keeper's query timeout must not decide how long a client waits, and cancelling the call
// would close the session and so release every lock's key. Call with the slot held; on
// errKeeperLate the slot belongs to the call, which releases it. A key the late call takes
// for a LOCK that has rolled back meanwhile is let go by the next reconcile.
func (k *keeper) takeBy(ctx context.Context, deadline time.Time, project string, key int64) (bool, error) {
	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		ok, err := k.take(ctx, project, key)
		done <- result{ok, err}
	}()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case r := <-done:
		return r.ok, r.err
	case <-t.C:
	case <-ctx.Done():
	}
	go func() {
		<-done
		k.poke() // a key taken for nothing is let go by the reconcile
		k.releaseSlot()
	}()
	return false, errKeeperLate
}

// release lets key go when no lock row of this replica wants it: after this replica
// committed an unlock, or after a LOCK transaction that took it rolled back. Call with the
// slot held.
func (k *keeper) release(ctx context.Context, key int64) {
	if !k.held[key] || k.sess == nil {
		return
	}
	if k.sess.Closed() {
		k.lost(ctx, errors.New("connection closed"))
		return
	}
	_ = k.call(ctx, func(ctx context.Context, s *db.Session) error {
		var wanted bool
		if err := s.QueryRow(ctx, q.Get("KeeperWants"), k.svc.replica, key).Scan(&wanted); err != nil || wanted {
			return err
		}
		if err := k.unlockKeys(ctx, s, []int64{key}); err != nil {
			return err
		}
		delete(k.held, key)
		return nil
	})
}

// releaseAfterUnlock is release for a request whose unlock has committed: it waits for the
// slot as a request does; when it cannot get it, the next reconcile lets the key go.
func (k *keeper) releaseAfterUnlock(ctx context.Context, key int64) {
	if err := k.acquireSlot(ctx); err != nil {
		k.poke()
		return
	}
	defer k.releaseSlot()
	k.release(ctx, key)
}

// takeOnWorker, on Citus, takes key (held by the session already) on the worker holding
// project as well; when a pg client holds it there, it lets the key go here too and reports
// false. Without Citus it reports true at once.
func (k *keeper) takeOnWorker(ctx context.Context, s *db.Session, project string, key int64) (bool, error) {
	if !k.svc.opts.DistributeProjects || project == "" {
		return true, nil
	}
	var ok bool
	err := s.QueryRow(ctx, pq("KeeperTakeOnWorker", project), key).Scan(&ok)
	if err == nil && ok {
		k.onWorker[key] = project
		return true, nil
	}
	if uerr := unlockKeys(ctx, s, []int64{key}); uerr != nil {
		return false, uerr
	}
	if errors.Is(err, db.ErrNotFound) {
		err = nil // the project's tables are gone: nothing to protect there
	}
	return false, err
}

// unlockKeys lets keys go, here and then on their Citus workers (see takeOnWorker). A key
// whose project was deleted cannot be reached on its worker any more (the statement routes
// through the project's table); it stays held there, harmlessly (no project uses its id
// range again), until the session ends, and is logged.
func (k *keeper) unlockKeys(ctx context.Context, s *db.Session, keys []int64) error {
	if err := unlockKeys(ctx, s, keys); err != nil {
		return err
	}
	for _, key := range keys {
		project, ok := k.onWorker[key]
		if !ok {
			continue
		}
		delete(k.onWorker, key)
		var released bool
		if err := s.QueryRow(ctx, pq("KeeperReleaseOnWorker", project), key).Scan(&released); err != nil && !errors.Is(err, db.ErrNotFound) {
			if s.Closed() {
				return err
			}
			k.svc.log.Info("lock keeper: cannot let a key go on its Citus worker (its project is gone)", "project", project, "key", key, "err", err)
		}
	}
	return nil
}

func tryKeys(ctx context.Context, s *db.Session, keys []int64) (map[int64]bool, error) {
	rows, err := s.Query(ctx, q.Get("KeeperTryLocks"), keys)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	got := map[int64]bool{}
	for rows.Next() {
		var key int64
		var ok bool
		if err := rows.Scan(&key, &ok); err != nil {
			return nil, err
		}
		got[key] = ok
	}
	return got, rows.Err()
}

func unlockKeys(ctx context.Context, s *db.Session, keys []int64) error {
	rows, err := s.Query(ctx, q.Get("KeeperUnlocks"), keys)
	if err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

func scanKeys(rows db.Rows, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var keys []int64
	for rows.Next() {
		var key int64
		if err := rows.Scan(&key); err != nil {
			return nil, err
		}
		keys = append(keys, key)
	}
	return keys, rows.Err()
}

// goneKeeperAge is how long a keeper row of a replica whose backend is gone, and that owns
// no lock, is kept before the reconcile deletes it.
const goneKeeperAge = time.Hour

// reconcile makes the session hold exactly the keys of the lock rows this replica owns: it
// takes over locks whose owner's keeper backend is gone, takes the keys it lacks in one
// statement, verifies in pg_locks what it holds, marks protected only verified keys (and
// unprotected the others: a pg client holds them), and lets go of keys no row wants (an
// unlock served by another replica). Call with the slot held.
func (k *keeper) reconcile(ctx context.Context) {
	if err := k.ensure(ctx); err != nil {
		return
	}
	k.recordPending(ctx)
	k.dirty = false
	var adopted [][2]string
	err := k.call(ctx, func(ctx context.Context, s *db.Session) error {
		rows, err := s.Query(ctx, q.Get("KeeperAdopt"), k.svc.replica)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var project, workspace, from string
			var since time.Time
			if err := rows.Scan(&project, &workspace, &from, &since); err != nil {
				return err
			}
			adopted = append(adopted, [2]string{project + "/" + workspace, from})
		}
		return rows.Err()
	})
	if err != nil {
		k.svc.log.Warn("lock keeper: take over orphaned locks", "err", err)
		if k.sess == nil {
			return
		}
	} else if len(adopted) > 0 {
		k.svc.log.Warn("lock keeper took over locks of a replica whose keeper is gone; they are unprotected until their keys are verified", "locks", adopted)
		k.auditAdopted(ctx, adopted)
	}

	var want, missing, verified []int64
	err = k.call(ctx, func(ctx context.Context, s *db.Session) error {
		var err error
		if want, err = scanKeys(s.Query(ctx, q.Get("KeeperLocks"), k.svc.replica)); err != nil {
			return err
		}
		if f := k.afterWantRead.Load(); f != nil {
			(*f)()
		}
		missing = missing[:0]
		for _, key := range want {
			if !k.held[key] {
				missing = append(missing, key)
			}
		}
		if len(missing) > 0 {
			got, err := tryKeys(ctx, s, missing)
			if err != nil {
				return err
			}
			projects, err := k.lockProjects(ctx, s)
			if err != nil {
				return err
			}
			for key, ok := range got {
				if ok {
					if ok, err = k.takeOnWorker(ctx, s, projects[key], key); err != nil {
						return err
					}
				}
				if ok {
					k.held[key] = true
				}
			}
		}
		verified, err = scanKeys(s.Query(ctx, q.Get("KeeperVerify"), want))
		return err
	})
	if err != nil {
		k.svc.log.Warn("lock keeper: take keys", "err", err)
		return
	}
	ok := map[int64]bool{}
	for _, key := range verified {
		ok[key] = true
	}
	wanted := map[int64]bool{}
	var refused []int64
	for _, key := range want {
		wanted[key] = true
		if !ok[key] {
			delete(k.held, key)
			refused = append(refused, key)
		}
	}
	if len(refused) > 0 {
		k.markUnprotected(ctx, refused, "the lock keeper cannot take the lock's advisory key: a pg client (or a frozen former session) holds it")
	}
	k.markProtected(ctx, verified)
	// Publish the count as soon as the rows say it, not after the housekeeping below: a
	// failure there returns early and would leave /readyz counting locks GET …/lock already
	// shows protected until the next reconcile.
	k.publish(int64(len(refused)))

	var extra []int64
	for key := range k.held {
		if !wanted[key] {
			extra = append(extra, key)
		}
	}
	if len(extra) > 0 {
		if err := k.call(ctx, func(ctx context.Context, s *db.Session) error { return k.unlockKeys(ctx, s, extra) }); err != nil {
			return
		}
		for _, key := range extra {
			delete(k.held, key)
		}
	}
	_ = k.call(ctx, func(ctx context.Context, s *db.Session) error {
		_, err := s.Exec(ctx, q.Get("KeeperCleanup"), goneKeeperAge.Seconds())
		return err
	})
}

// lockProjects maps this replica's lock keys to their projects, on Citus only (nil without:
// takeOnWorker needs no project then).
func (k *keeper) lockProjects(ctx context.Context, s *db.Session) (map[int64]string, error) {
	if !k.svc.opts.DistributeProjects {
		return nil, nil
	}
	rows, err := s.Query(ctx, q.Get("KeeperLockProjects"), k.svc.replica)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var key int64
		var project string
		if err := rows.Scan(&key, &project); err != nil {
			return nil, err
		}
		out[key] = project
	}
	return out, rows.Err()
}

// auditAdopted records locks taken over from gone replicas (target, former owner).
func (k *keeper) auditAdopted(ctx context.Context, adopted [][2]string) {
	ctx, cancel := k.bounded(ctx)
	defer cancel()
	_ = k.svc.db.InTx(ctx, func(tx *db.Tx) error {
		for _, a := range adopted {
			if err := audit(ctx, tx, k.actor(), "state.lock.adopted", a[0], map[string]any{"replica": k.svc.replica, "from": a[1]}); err != nil {
				return err
			}
		}
		return nil
	})
}

// publish updates the snapshot Readiness reads; unprotected < 0 keeps the last count.
func (k *keeper) publish(unprotected int64) {
	r := Readiness{}
	if prev := k.snap.Load(); prev != nil && unprotected < 0 {
		unprotected = prev.UnprotectedLocks
	}
	if unprotected < 0 {
		unprotected = 0
	}
	r.UnprotectedLocks = unprotected
	if k.sess == nil || k.sess.Closed() {
		r.Detail = "lock keeper session is down: HTTP state locks do not exclude pg backend clients until it reconnects"
		if k.lastErr != nil {
			r.Detail += ": " + k.lastErr.Error()
		}
	} else {
		r.PGClientsExcluded = true
		r.KeeperPID = k.sess.PID()
		if unprotected > 0 {
			r.Detail = fmt.Sprintf("%d lock(s) could not re-take their advisory key: pg clients may hold them", unprotected)
		}
	}
	k.snap.Store(&r)
}

// status is the snapshot, corrected by a call in flight for too long: a session that does
// not answer cannot vouch for anything.
func (k *keeper) status() Readiness {
	r := *k.snap.Load()
	if start := k.callStart.Load(); start != 0 {
		if d := time.Since(time.Unix(0, start)); d > k.svc.opts.keeperStuckAfter() {
			r.PGClientsExcluded = false
			r.Detail = fmt.Sprintf("lock keeper session has not answered for %v (LOCK answers 503 meanwhile; the session is replaced after %v)", d.Round(time.Millisecond), k.svc.opts.KeeperTimeout)
		}
	}
	return r
}

// poke asks the run loop to reconcile soon.
func (k *keeper) poke() {
	select {
	case k.pokeCh <- struct{}{}:
	default:
	}
}

// withSlot runs f holding the slot, for the background loop; it waits for the slot until
// ctx ends.
func (k *keeper) withSlot(ctx context.Context, f func()) {
	select {
	case k.slot <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer k.releaseSlot()
	f()
}

// run heart-beats through the session (which also notices a lost session within one
// interval), reconnects, and reconciles periodically and when poked.
func (k *keeper) run(ctx context.Context) {
	t := time.NewTicker(k.svc.opts.HeartbeatInterval)
	defer t.Stop()
	var reconcile <-chan time.Time
	if k.svc.opts.ReconcileInterval > 0 {
		rt := time.NewTicker(k.svc.opts.ReconcileInterval)
		defer rt.Stop()
		reconcile = rt.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.pokeCh:
			k.withSlot(ctx, func() { k.reconcile(ctx) })
		case <-reconcile:
			k.withSlot(ctx, func() { k.reconcile(ctx) })
		case <-t.C:
			k.withSlot(ctx, func() {
				if err := k.ensure(ctx); err == nil {
					_ = k.call(ctx, func(ctx context.Context, s *db.Session) error {
						_, err := s.Exec(ctx, q.Get("KeeperHeartbeat"), k.svc.replica)
						return err
					})
				}
				if k.dirty && k.sess != nil {
					k.reconcile(ctx)
				}
			})
		}
	}
}

// listen receives unlock forwards from other replicas on a second dedicated session (the
// keeper's own session is busy with calls) and pokes the run loop.
func (k *keeper) listen(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		sess, err := db.OpenSession(ctx, k.url, k.svc.db.Schema(), k.appName()+" listen")
		if err == nil {
			err = sess.Listen(ctx, k.svc.channel)
		}
		if err != nil {
			if sess != nil {
				_ = sess.Close(context.WithoutCancel(ctx))
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		k.poke() // notifications sent while not listening are lost: look now
		for ctx.Err() == nil {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			n, err := sess.WaitForNotification(wctx)
			cancel()
			if errors.Is(err, db.ErrNoNotification) {
				continue
			}
			if err != nil {
				break
			}
			if n.Payload == k.svc.replica {
				k.poke()
			}
		}
		_ = sess.Close(context.WithoutCancel(ctx))
	}
}

// close ends the session (PostgreSQL releases its keys) and unregisters the keeper, so
// other replicas take over its locks at their next reconcile. It waits for a call in flight
// at most for its timeout, and then for the session's backend to exit (see
// awaitBackendExit), so that the keys are free when Service.Close returns.
func (k *keeper) close() {
	ctx, cancel := context.WithTimeout(context.Background(), k.svc.opts.KeeperTimeout+5*time.Second)
	defer cancel()
	select {
	case k.slot <- struct{}{}:
		defer k.releaseSlot()
	case <-ctx.Done():
		k.svc.log.Warn("lock keeper busy at close; leaving its session to the process exit")
		return
	}
	if k.sess != nil && !k.sess.Closed() {
		_ = k.call(ctx, func(ctx context.Context, s *db.Session) error {
			_, err := s.Exec(ctx, q.Get("KeeperUnregister"), k.svc.replica)
			return err
		})
	}
	if k.sess != nil {
		// The keys go with the session: until another keeper has taken them over, pg
		// clients may take them.
		k.markUnprotected(ctx, nil, "the replica's lock keeper stopped")
		pid, start := int32(k.sess.PID()), k.sess.BackendStart()
		_ = k.sess.Close(ctx)
		k.sess = nil
		k.awaitBackendExit(ctx, pid, start)
	}
	k.held = map[int64]bool{}
	k.publish(0)
}

// backendExitWait bounds how long close waits for its backend to exit.
const backendExitWait = 2 * time.Second

// awaitBackendExit waits, through the pool, until the keeper's former backend (pid and
// start) has exited. Closing a connection does not end its backend at once: PostgreSQL lets
// the session's advisory keys go when the backend process exits, a moment later (often still
// held right after the close on a loaded machine). Without this wait, a replica restarted
// in place, or a pg client told the replica stopped, could find the keys still held; and a
// new replica's UNLOCK could answer while the old backend still held the key. The wait is
// bounded: a backend that does not exit in time is logged and left to PostgreSQL.
func (k *keeper) awaitBackendExit(ctx context.Context, pid int32, start time.Time) {
	ctx, cancel := context.WithTimeout(ctx, backendExitWait)
	defer cancel()
	for {
		var alive bool
		err := k.svc.db.QueryRow(ctx, q.Get("KeeperBackendAlive"), pid, start).Scan(&alive)
		if err == nil && !alive {
			return
		}
		select {
		case <-ctx.Done():
			k.svc.log.Warn("lock keeper's backend has not exited yet; its keys are free once it has", "pid", pid, "err", err)
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}
