package tfstate

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/db"
)

// keeper is the replica's lock keeper: one dedicated session (db.Session) that holds the
// advisory keys of all the HTTP locks this replica owns, so that pg backend clients find
// those workspaces locked. Its calls are serialized by mu, which also guards its maps.
//
// The keeper runs all its queries on its own session, never on the pool: LOCK transactions
// hold pool connections while they wait for mu, so a keeper waiting for a pool connection
// under mu could deadlock with them.
//
// What the keeper should hold is decided by the database, not by memory: the lock rows this
// replica owns (tf_locks.owner), plus keys that a LOCK transaction has taken and not yet
// committed or rolled back (pending). held is what the session actually holds. Every
// correction (release after an unlock here or elsewhere, re-taking after a reconnect,
// taking over the locks of a dead replica) compares the two.
type keeper struct {
	svc *Service
	url string

	mu      sync.Mutex
	sess    *db.Session
	held    map[int64]bool
	pending map[int64]int
	lastErr error
	dirty   bool // reconnected: reconcile soon

	pokeCh chan struct{}
}

func newKeeper(s *Service, url string) *keeper {
	return &keeper{svc: s, url: url, held: map[int64]bool{}, pending: map[int64]int{}, pokeCh: make(chan struct{}, 1)}
}

func (k *keeper) appName() string {
	name := "strata-lock-keeper " + k.svc.replica
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}

// ensure connects the session when there is none (or it was lost), registers it, and
// re-takes the keys it held; a key it cannot get back is marked unprotected. Call with mu
// held.
func (k *keeper) ensure(ctx context.Context) error {
	if k.sess != nil && !k.sess.Closed() {
		return nil
	}
	if k.sess != nil {
		_ = k.sess.Close(ctx)
		k.sess = nil
	}
	sess, err := db.OpenSession(ctx, k.url, k.svc.db.Schema(), k.appName())
	if err != nil {
		k.lastErr = err
		return err
	}
	if _, err := sess.Exec(ctx, q.Get("KeeperRegister"), k.svc.replica, int32(sess.PID()), sess.BackendStart()); err != nil {
		_ = sess.Close(ctx)
		k.lastErr = err
		return err
	}
	k.sess = sess
	k.lastErr = nil
	k.dirty = true
	k.svc.log.Info("lock keeper session connected", "pid", sess.PID(), "replica", k.svc.replica)
	for key := range k.held {
		ok, err := sess.TryAdvisoryLock(ctx, key)
		if err != nil {
			k.broken(ctx, err)
			return err
		}
		if !ok {
			delete(k.held, key)
			k.markUnprotected(ctx, key)
		}
	}
	return nil
}

// broken drops a session that failed; the next call reconnects. Call with mu held.
func (k *keeper) broken(ctx context.Context, err error) {
	k.lastErr = err
	if k.sess != nil {
		_ = k.sess.Close(ctx)
		k.sess = nil
	}
	k.svc.log.Warn("lock keeper session lost; reconnecting", "err", err)
}

func (k *keeper) markUnprotected(ctx context.Context, key int64) {
	k.svc.log.Error("lock keeper could not re-take an advisory key: a pg client may hold the locked workspace", "key", key)
	if _, err := k.sess.Exec(ctx, q.Get("KeeperMarkUnprotected"), k.svc.replica, key); err != nil {
		k.svc.log.Warn("mark lock unprotected", "key", key, "err", err)
	}
}

// sessionTimeout bounds one keeper round trip made on behalf of a request.
const sessionTimeout = 10 * time.Second

// detach returns a context for running keeper queries on behalf of a request. It must not
// carry the request's cancellation: pgx closes a connection whose query is cancelled, and
// closing the keeper's session would release the advisory keys of every lock this replica
// holds because one client hung up.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), sessionTimeout)
}

// acquire takes key for a LOCK transaction in flight; done must follow. It reports false
// when another session holds the key.
func (k *keeper) acquire(ctx context.Context, key int64) (bool, error) {
	ctx, cancel := detach(ctx)
	defer cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.ensure(ctx); err != nil {
		return false, err
	}
	if !k.held[key] {
		ok, err := k.sess.TryAdvisoryLock(ctx, key)
		if err != nil {
			k.broken(ctx, err)
			return false, err
		}
		if !ok {
			return false, nil
		}
		k.held[key] = true
	}
	k.pending[key]++
	return true, nil
}

// done ends an acquire: after a rollback the key is let go unless a lock row still wants it.
func (k *keeper) done(ctx context.Context, key int64, committed bool) {
	ctx, cancel := detach(ctx)
	defer cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.pending[key]--; k.pending[key] <= 0 {
		delete(k.pending, key)
	}
	if !committed {
		k.releaseIfUnwanted(ctx, key)
	}
}

// release lets key go after this replica committed an unlock, unless it is wanted again.
func (k *keeper) release(ctx context.Context, key int64) {
	ctx, cancel := detach(ctx)
	defer cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.releaseIfUnwanted(ctx, key)
}

func (k *keeper) releaseIfUnwanted(ctx context.Context, key int64) {
	if !k.held[key] || k.pending[key] > 0 {
		return
	}
	if k.sess == nil || k.sess.Closed() {
		delete(k.held, key) // the session, and so the key, is gone
		return
	}
	var wanted bool
	if err := k.sess.QueryRow(ctx, q.Get("KeeperWants"), k.svc.replica, key).Scan(&wanted); err != nil {
		k.broken(ctx, err)
		return
	}
	if wanted {
		return
	}
	if _, err := k.sess.AdvisoryUnlock(ctx, key); err != nil {
		k.broken(ctx, err)
		return
	}
	delete(k.held, key)
}

// reconcile makes the session hold exactly the keys of the lock rows this replica owns:
// it takes over locks whose owner's keeper is gone, takes keys it lacks (marking those it
// cannot get as unprotected), and lets go of keys no row and no transaction wants (an
// unlock served by another replica). Call with mu held.
func (k *keeper) reconcile(ctx context.Context) {
	if err := k.ensure(ctx); err != nil {
		return
	}
	k.dirty = false
	if n, err := k.sess.Exec(ctx, q.Get("KeeperAdopt"), k.svc.replica); err != nil {
		k.svc.log.Warn("lock keeper: take over orphaned locks", "err", err)
	} else if n > 0 {
		k.svc.log.Info("lock keeper took over locks of a replica that is gone", "locks", n)
	}
	rows, err := k.sess.Query(ctx, q.Get("KeeperLocks"), k.svc.replica)
	if err != nil {
		k.svc.log.Warn("lock keeper: list locks", "err", err)
		return
	}
	want := map[int64]bool{}
	for rows.Next() {
		var key int64
		if err := rows.Scan(&key); err != nil {
			rows.Close()
			return
		}
		want[key] = true
	}
	if rows.Err() != nil {
		return
	}
	for key := range want {
		if !k.held[key] {
			ok, err := k.sess.TryAdvisoryLock(ctx, key)
			if err != nil {
				k.broken(ctx, err)
				return
			}
			if !ok {
				k.markUnprotected(ctx, key)
				continue
			}
			k.held[key] = true
		}
		if _, err := k.sess.Exec(ctx, q.Get("KeeperMarkProtected"), k.svc.replica, key); err != nil {
			k.svc.log.Warn("mark lock protected", "key", key, "err", err)
		}
	}
	for key := range k.held {
		if !want[key] && k.pending[key] == 0 {
			if _, err := k.sess.AdvisoryUnlock(ctx, key); err != nil {
				k.broken(ctx, err)
				return
			}
			delete(k.held, key)
		}
	}
}

// poke asks the run loop to reconcile soon.
func (k *keeper) poke() {
	select {
	case k.pokeCh <- struct{}{}:
	default:
	}
}

// run heart-beats through the session (which also notices a lost session within one
// interval), reconnects, and reconciles periodically and when poked.
func (k *keeper) run(ctx context.Context) {
	interval := k.svc.opts.HeartbeatInterval
	t := time.NewTicker(interval)
	defer t.Stop()
	beats := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.pokeCh:
			k.mu.Lock()
			k.reconcile(ctx)
			k.mu.Unlock()
		case <-t.C:
			beats++
			k.mu.Lock()
			if err := k.ensure(ctx); err == nil {
				if _, err := k.sess.Exec(ctx, q.Get("KeeperHeartbeat"), k.svc.replica); err != nil && ctx.Err() == nil {
					k.broken(ctx, err)
				}
			}
			if k.dirty || beats%5 == 0 {
				k.reconcile(ctx)
			}
			k.mu.Unlock()
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

func (k *keeper) status() Readiness {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.sess == nil || k.sess.Closed() {
		detail := "lock keeper session is down: HTTP state locks do not exclude pg backend clients until it reconnects"
		if k.lastErr != nil {
			detail += ": " + k.lastErr.Error()
		}
		return Readiness{Detail: detail}
	}
	return Readiness{PGClientsExcluded: true, KeeperPID: k.sess.PID()}
}

// close ends the session (PostgreSQL releases its keys) and unregisters the keeper, so
// other replicas take over its locks at their next reconcile.
func (k *keeper) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if k.sess != nil && !k.sess.Closed() {
		if _, err := k.sess.Exec(ctx, q.Get("KeeperUnregister"), k.svc.replica); err != nil {
			k.svc.log.Warn("unregister lock keeper", "err", err)
		}
	}
	if k.sess != nil {
		_ = k.sess.Close(ctx)
		k.sess = nil
	}
	k.held = map[int64]bool{}
}
