package db

import (
	"context"
	"sync"
	"time"
)

// deferredNotify is what a transaction sets (SET LOCAL) to tell the statement triggers of
// migration 0036 that its writer announces it after COMMIT: they send no NOTIFY, so the
// transaction never takes PostgreSQL's database-wide notification lock, which is held from
// PreCommit_Notify until the commit record is flushed and so makes notifying writers commit
// one at a time.
const deferredNotify = "set local strata.notify = 'deferred'"

// DeferNotifications makes the transaction's statement triggers leave their notifications to
// the writer (migration 0036): after a COMMIT that succeeded, or whose outcome is unknown,
// the replica announces the transaction on channel (a NOTIFY with an empty payload,
// coalesced with the announcements of other transactions of this replica). A caller that
// defers must write, in the same transaction, whatever its readers need to learn what
// changed (the change log's rows and their render_scope); an announcement is only a wake-up
// and may be lost with the replica.
//
// It must be called before the transaction's first statement (the SET goes in front of that
// statement, in its round trip); later, when the transaction has begun or was joined, it
// still announces after COMMIT, but the triggers notify as well.
func (t *Tx) DeferNotifications(channel string) {
	if l, ok := t.tx.(*lazyTx); ok && !l.begun {
		l.deferNotify = true
	}
	for _, c := range t.announce {
		if c == channel {
			return
		}
	}
	t.announce = append(t.announce, channel)
}

type withoutAnnouncement struct{}

// WithoutAnnouncement returns ctx for transactions that defer their notifications and then
// never announce: what a writer that dies between its COMMIT and its announcement leaves
// behind, for tests of the change log's safety net (the pollers' periodic poll).
func WithoutAnnouncement(ctx context.Context) context.Context {
	return context.WithValue(ctx, withoutAnnouncement{}, true)
}

// announcer sends a replica's announcements: one NOTIFY statement at a time, each carrying
// every channel asked for while the previous one was in flight, so a replica writing
// thousands of transactions a second sends far fewer notifications, and each in an implicit
// transaction of its own with synchronous_commit off (a notification needs no durable
// commit: its loss delays a poller by its poll interval, see DeferNotifications).
type announcer struct {
	mu      sync.Mutex
	pending map[string]bool
	running bool
	idle    *sync.Cond
	// sent counts the NOTIFY statements sent (tests).
	sent int64
}

// announce queues channels for the next NOTIFY and starts the sender unless it runs.
func (d *DB) announce(channels []string) {
	a := &d.announcer
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending == nil {
		a.pending = map[string]bool{}
	}
	for _, c := range channels {
		a.pending[c] = true
	}
	if !a.running {
		a.running = true
		go d.sendAnnouncements()
	}
}

// sendAnnouncements sends what is pending until nothing is.
func (d *DB) sendAnnouncements() {
	a := &d.announcer
	for {
		a.mu.Lock()
		if len(a.pending) == 0 {
			a.running = false
			if a.idle != nil {
				a.idle.Broadcast()
			}
			a.mu.Unlock()
			return
		}
		channels := make([]string, 0, len(a.pending))
		for c := range a.pending {
			channels = append(channels, c)
		}
		clear(a.pending)
		a.sent++
		a.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := d.pool.Exec(ctx, "select set_config('synchronous_commit', 'off', true), pg_notify(c, '') from unnest($1::text[]) c", channels)
		cancel()
		if err != nil && d.pool.Stat() != nil {
			d.logger.Debug("announcing committed writes failed; replicas see them at their next poll", "err", err)
		}
	}
}

// FlushAnnouncements waits, at most until ctx ends, until every announcement queued so far
// has been sent: for a process that exits right after its writes (a CLI command), and tests.
func (d *DB) FlushAnnouncements(ctx context.Context) {
	a := &d.announcer
	a.mu.Lock()
	if a.idle == nil {
		a.idle = sync.NewCond(&a.mu)
	}
	stop := context.AfterFunc(ctx, func() {
		a.mu.Lock()
		a.idle.Broadcast()
		a.mu.Unlock()
	})
	defer stop()
	for a.running && ctx.Err() == nil {
		a.idle.Wait()
	}
	a.mu.Unlock()
}

// AnnouncementsSent is how many NOTIFY statements the replica's announcer has sent.
func (d *DB) AnnouncementsSent() int64 {
	d.announcer.mu.Lock()
	defer d.announcer.mu.Unlock()
	return d.announcer.sent
}
