package db

import (
	"context"
	"maps"
	"slices"
	"strings"
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
// the replica announces the transaction on channel (a NOTIFY with an empty payload, unless
// Announce gave it words), coalesced with the announcements of other transactions of this
// replica. A caller that defers must write, in the same transaction, whatever its readers
// need to learn what changed (the change log's rows and their render_scope): an announcement
// is only a wake-up, or a shortcut, and is lost with the replica if it dies before sending it.
//
// It must be called before the transaction's first statement (the SET goes in front of that
// statement, in its round trip); later, when the transaction has begun or was joined, it
// still announces after COMMIT, but the triggers notify as well.
func (t *Tx) DeferNotifications(channel string) {
	if l, ok := t.tx.(*lazyTx); ok && !l.begun {
		l.deferNotify = true
	}
	t.Announce(channel, "")
}

// Announce adds word (none when empty) to the payload of channel's announcement after the
// transaction commits. The announcement of a channel carries the distinct words of every
// transaction it coalesces, space-separated in sorted order; one that would not fit a
// notification (more than 7,000 bytes) carries "*" instead, which the render cache reads as
// "all" (the convention of migration 0014's notify_pillar_scopes).
func (t *Tx) Announce(channel, word string) {
	if t.announce == nil {
		t.announce = map[string]map[string]bool{}
	}
	words := t.announce[channel]
	if words == nil {
		words = map[string]bool{}
		t.announce[channel] = words
	}
	if word != "" {
		words[word] = true
	}
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
	pending map[string]map[string]bool // channel → words
	running bool
	idle    *sync.Cond
	// sent counts the NOTIFY statements sent (tests).
	sent int64
}

// announce queues what a committed transaction announces and starts the sender unless it
// runs.
func (d *DB) announce(what map[string]map[string]bool) {
	a := &d.announcer
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending == nil {
		a.pending = map[string]map[string]bool{}
	}
	for channel, words := range what {
		p := a.pending[channel]
		if p == nil {
			p = map[string]bool{}
			a.pending[channel] = p
		}
		for w := range words {
			p[w] = true
		}
	}
	if !a.running {
		a.running = true
		go d.sendAnnouncements()
	}
}

// maxAnnouncement bounds a payload (PostgreSQL's limit is 8,000 bytes).
const maxAnnouncement = 7000

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
		var channels, payloads []string
		for channel, words := range a.pending {
			list := slices.Sorted(maps.Keys(words))
			payload := strings.Join(list, " ")
			if len(payload) > maxAnnouncement {
				payload = "*"
			}
			channels, payloads = append(channels, channel), append(payloads, payload)
		}
		clear(a.pending)
		a.sent++
		a.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := d.pool.Exec(ctx, "select set_config('synchronous_commit', 'off', true), pg_notify(c, p) from unnest($1::text[], $2::text[]) as t(c, p)", channels, payloads)
		cancel()
		if err != nil {
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
