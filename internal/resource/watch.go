package resource

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/metadata"
	"github.com/stratahq/strata/internal/sabotage"
)

//go:embed watch.sql
var watchFS embed.FS

var watchQ = db.MustParseQueries(watchFS, "watch.sql")

// Change is one row of the changes log, as a watch delivers it.
type Change struct {
	RV   int64
	Type string // ADDED, MODIFIED or DELETED
	Kind string
	Org  string
	Name string
	// Object is the object after the change (the last object, for DELETED).
	Object api.Object
	// PrevLabels are the labels before the change: nil for ADDED, and for changes an older
	// release recorded (which did not keep them).
	PrevLabels map[string]string
	// PrevOrg is the org the object's org reference (Kind.OrgMember) named before a
	// modification: nil for other changes, kinds without one, and changes an older release
	// recorded.
	PrevOrg *string
	// renderScope is what cached renders the change can alter (resource.renderScope); nil
	// when none, and for changes an older release recorded (whose writers notified the
	// render caches themselves).
	renderScope *string
}

// EventFor returns the type of the event a watch with selector sel sends for c, and false
// when it sends none. Without requirements every change is sent as it is. With a selector an
// object that starts matching is ADDED, one that stops matching is DELETED (with the current
// object), one that matches before and after is MODIFIED, and one that matches neither is
// not sent. When the labels before a modification are unknown (a change an older release
// recorded) the object is taken to have matched: a consumer then gets MODIFIED or DELETED,
// and a level-based consumer handles a DELETED of something it never had.
func EventFor(c Change, sel metadata.Selector) (string, bool) {
	return EventIn(c, sel, "", "")
}

// EventIn is EventFor for a watch that also keeps only the objects whose org reference, the
// spec member (Kind.OrgMember), names org ("" keeps all): a node that moves into org is
// ADDED, one that moves out DELETED, as for a selector. A modification whose org before is
// unknown (PrevOrg nil: recorded by an older release) is taken to have been in org.
func EventIn(c Change, sel metadata.Selector, member, org string) (string, bool) {
	now := sel.Matches(c.Object.Metadata.Labels) && InOrg(c.Object, member, org)
	switch c.Type {
	case "ADDED", "DELETED":
		if !now {
			return "", false
		}
		return c.Type, true
	}
	before := (c.PrevLabels == nil || sel.Matches(c.PrevLabels)) &&
		(org == "" || member == "" || c.PrevOrg == nil || *c.PrevOrg == org)
	switch {
	case now && before:
		return "MODIFIED", true
	case now:
		return "ADDED", true
	case before && sabotage.Active("filterwatch"):
		return "MODIFIED", true
	case before:
		return "DELETED", true
	}
	return "", false
}

// Watch defaults.
const (
	// DefaultWatchBuffer is how many events a watcher may lag behind its replica's poller
	// before it is ended (it then resumes from the last version it received).
	DefaultWatchBuffer = 1024
	// DefaultWatchPollInterval is the fallback poll of the changes log when no notification
	// arrives (a lost LISTEN session, or none configured).
	DefaultWatchPollInterval = time.Second
	// DefaultWatchBatch bounds the changes one poll or catch-up read returns.
	DefaultWatchBatch = 500
	// watchStartTimeout bounds how long a watch waits for the replica's poller to start.
	watchStartTimeout = 10 * time.Second
)

// ErrWatchStopped ends every watch of a Hub that stops (the replica shuts down).
var ErrWatchStopped = fault.Unavailable(fault.ReasonShuttingDown, nil, "the server is shutting down; resume the watch from the last resourceVersion received on another replica")

// Hub is the one change poller of a replica. It reads the changes log in resourceVersion
// order — woken by a NOTIFY on "<schema>.changes" (sent by the insert's trigger for writers
// that notify in their transaction, migration 0012, and by a replica's announcement after
// COMMIT for strata's own writes of objects, migration 0036), and once a second regardless —
// and fans each change out to the subscriptions of its kind and org. Watchers
// thus cost one query per change batch per replica, not one query loop each.
//
// Correctness does not depend on notifications: the poller advances only through versions
// that are all resolved (versions.go), so reading "after the last version read" never skips
// a change that commits later, and a lost notification only delays events by a poll.
// A subscriber that falls Buffer events behind is ended (Err says so) instead of holding the
// poller up; its consumer resumes from the last version it received, as in Kubernetes.
type Hub struct {
	svc    *Service
	open   func(context.Context) (*db.Session, error)
	logger *slog.Logger

	// Buffer, PollInterval and Batch are DefaultWatchBuffer, DefaultWatchPollInterval and
	// DefaultWatchBatch unless changed before Run.
	Buffer       int
	PollInterval time.Duration
	Batch        int

	wake      chan struct{}
	ready     chan struct{}
	listening atomic.Bool

	// delivered counts events queued to subscribers; cutBehind and cutGone the subscriptions
	// ended because they fell behind or their history was pruned (metrics).
	delivered, cutBehind, cutGone atomic.Int64

	// recorded and recordedAt: the last version written to watch_resolved, and when (owned
	// by the polling goroutine).
	recorded   int64
	recordedAt time.Time

	// index, when set (ServeLists), is the replica's list index, fed by poll.
	index *Index
	// renders, when set (FeedRenders), is told the render scopes of the changes poll reads.
	renders RenderFeed

	mu      sync.Mutex
	head    int64 // every version up to head is resolved, and its change fanned out
	stopped bool
	subs    map[*Subscription]struct{}
}

// RenderFeed is what learns from the poller which cached renders changes alter: the
// replica's pillar render cache (pillar.Cache). Writes of objects stamp those scopes in the
// change log and notify no render cache themselves (migration 0036, announceAfterCommit).
type RenderFeed interface {
	// FeedSubscribed says whether the poller's session LISTENs for announcements (when it
	// does not, changes are seen only at the next poll, and the feed must not be trusted).
	FeedSubscribed(on bool)
	// FeedScopes drops the renders a space-separated list of scopes names (node:<name>,
	// org:<name>, * for all).
	FeedScopes(payload string)
}

// FeedRenders makes the poller tell f the render scopes of every change it reads, in
// version order, before they are fanned out. Call it before Run.
func (h *Hub) FeedRenders(f RenderFeed) { h.renders = f }

// NewHub returns the change poller of s's database. open opens a dedicated session to
// LISTEN on; nil polls only (a transaction-mode pooler with sessions turned off).
func NewHub(s *Service, open func(context.Context) (*db.Session, error), logger *slog.Logger) *Hub {
	if logger == nil {
		logger = slog.Default()
	}
	return &Hub{
		svc: s, open: open, logger: logger,
		Buffer: DefaultWatchBuffer, PollInterval: DefaultWatchPollInterval, Batch: DefaultWatchBatch,
		wake: make(chan struct{}, 1), ready: make(chan struct{}), subs: map[*Subscription]struct{}{},
	}
}

// Head is the version every change up to which the poller has fanned out.
func (h *Hub) Head() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.head
}

// HubStats is what the poller has done, for metrics.
type HubStats struct {
	Subscribers int
	Head        int64 // every version up to it is resolved and fanned out
	Delivered   int64 // events queued to subscribers
	CutBehind   int64 // subscriptions ended because they fell behind
	CutGone     int64 // subscriptions ended because their history was pruned
}

// Stats reports the poller's counters.
func (h *Hub) Stats() HubStats {
	h.mu.Lock()
	n, head := len(h.subs), h.head
	h.mu.Unlock()
	return HubStats{Subscribers: n, Head: head, Delivered: h.delivered.Load(), CutBehind: h.cutBehind.Load(), CutGone: h.cutGone.Load()}
}

// Listening reports whether the poller is subscribed to change notifications (when not, it
// still polls every PollInterval).
func (h *Hub) Listening() bool { return h.listening.Load() }

// Run polls until ctx ends, then ends every subscription with ErrWatchStopped.
func (h *Hub) Run(ctx context.Context) {
	defer h.stop()
	backoff := 100 * time.Millisecond
	for {
		// The poller starts where every version is known resolved (not at the newest
		// visible one, which may have versions in flight below it) and reads up from there.
		start := versionQ.Get("VersionResolved")
		if h.svc.exposeGaps {
			start = watchQ.Get("WatchHead")
		}
		var head int64
		err := h.svc.db.QueryRow(ctx, start).Scan(&head)
		if err == nil {
			h.mu.Lock()
			h.head = head
			h.mu.Unlock()
			close(h.ready)
			if h.index != nil {
				h.index.runCtx = ctx
				h.index.startBuild()
			}
			break
		}
		if ctx.Err() != nil {
			return
		}
		h.logger.WarnContext(ctx, "watch: reading the newest change failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	if h.open != nil {
		go h.listen(ctx)
	}
	ticker := time.NewTicker(h.PollInterval)
	defer ticker.Stop()
	for {
		if err := h.poll(ctx); err != nil && ctx.Err() == nil {
			h.logger.WarnContext(ctx, "watch: polling the changes log failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		case <-ticker.C:
		}
	}
}

// listen keeps a session LISTENing on "<schema>.changes" until ctx ends, reconnecting after
// a loss (the pattern of the pillar cache), and wakes the poller on every notification.
func (h *Hub) listen(ctx context.Context) {
	db.Subscribe(ctx, h.open, h.svc.db.Schema()+".changes", db.Listener{
		Subscribed: func(on bool) {
			if h.renders != nil {
				// Before the poller reports itself listening: a render feed starts empty.
				h.renders.FeedSubscribed(on)
			}
			h.listening.Store(on)
			if on {
				h.poke() // changes committed while unsubscribed were not announced
			}
		},
		Notify: func(string) { h.poke() },
		Lost: func(err error) {
			h.logger.WarnContext(ctx, "watch: not subscribed to change notifications; polling every "+h.PollInterval.String()+" until it is again", "err", err)
		},
	})
}

// poke wakes the poller without blocking (one pending wake-up is enough).
func (h *Hub) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// poll reads and fans out every change after head, a batch at a time, strictly in version
// order: at the first version missing below a visible one it stops, settles the missing ones
// (versions.go: this waits for writers in flight to commit) and reads again, so head is
// always a prefix of versions that are all resolved.
func (h *Hub) poll(ctx context.Context) error {
	if h.index != nil {
		if err := h.index.installPending(ctx); err != nil {
			return err
		}
	}
	for {
		h.mu.Lock()
		head := h.head
		h.mu.Unlock()
		var (
			compacted int64
			batch     []Change
		)
		err := h.svc.db.ReadTx(ctx, func(tx *db.Tx) error {
			if err := tx.QueryRow(ctx, watchQ.Get("WatchCompacted")).Scan(&compacted); err != nil {
				return err
			}
			var err error
			batch, err = readChanges(ctx, tx, watchQ.Get("WatchPoll"), head, h.Batch)
			return err
		})
		if err != nil {
			return err
		}
		h.feedRenders(batch, head)
		// The list index keeps objects as stored (lists present them when they answer, with
		// the kinds' current read pipelines, as the database path does).
		var stored []json.RawMessage
		if h.index != nil {
			stored = make([]json.RawMessage, len(batch))
			for i := range batch {
				stored[i] = batch[i].Object.Spec
			}
		}
		for i := range batch {
			if batch[i].Type != "GAP" {
				h.svc.presentObject(ctx, h.svc.db, &batch[i].Object)
			}
		}
		var (
			missing []int64
			applied []Change
			gone    bool
		)
		h.mu.Lock()
		if compacted > h.head {
			// Changes this poller never read were pruned (it was away longer than the
			// retention): every subscriber behind the compaction point may have missed
			// some, so each is told to list again, and the poller goes on from there.
			for s := range h.subs {
				if s.cursor < compacted {
					h.cutGone.Add(1)
					h.endLocked(s, goneError(s.cursor, compacted))
				}
			}
			h.head = compacted
			gone = true
		}
		for i, c := range batch {
			if c.RV <= h.head {
				continue
			}
			if c.RV != h.head+1 && !h.svc.exposeGaps {
				for v := h.head + 1; v < c.RV; v++ {
					missing = append(missing, v)
				}
				break
			}
			if c.Type != "GAP" {
				h.fanOutLocked(c)
			}
			if stored != nil {
				c.Object.Spec = stored[i]
				applied = append(applied, c)
			}
			h.head = c.RV
		}
		head = h.head
		if h.index != nil && !gone {
			h.index.applyBatch(applied, head)
		}
		h.mu.Unlock()
		if gone && h.renders != nil {
			h.renders.FeedScopes("*") // changes this poller never read may have named renders
		}
		if gone && h.index != nil {
			// The log was pruned past what the index holds (the poller was away longer than
			// the retention, or a new history epoch began): it cannot be patched; load it again.
			h.index.drop(FallbackNotReady)
		}
		h.svc.noteResolved(head)
		h.recordResolved(ctx, head)
		if len(missing) > 0 {
			if err := h.svc.fill(ctx, missing); err != nil {
				return err
			}
			continue
		}
		if len(batch) < h.Batch {
			return nil
		}
	}
}

// feedRenders tells the render feed the scopes of the changes of batch above head. It
// runs as soon as they are read, before a missing version below them is settled (they are
// committed, and the renders they alter must go now, not when a slower writer's version
// resolves), so a change read again after such a wait is fed twice, which costs a render.
func (h *Hub) feedRenders(batch []Change, head int64) {
	if h.renders == nil {
		return
	}
	var payload strings.Builder
	for i := range batch {
		if batch[i].RV <= head || batch[i].renderScope == nil || *batch[i].renderScope == "" {
			continue
		}
		if payload.Len() > 0 {
			payload.WriteByte(' ')
		}
		payload.WriteString(*batch[i].renderScope)
	}
	if payload.Len() > 0 {
		h.renders.FeedScopes(payload.String())
	}
}

// fanOutLocked queues c to every subscription of its kind and org that has not had it; h.mu
// is held.
func (h *Hub) fanOutLocked(c Change) {
	for s := range h.subs {
		if s.kind != c.Kind || s.org != c.Org || c.RV <= s.cursor {
			continue
		}
		select {
		case s.ch <- c:
			s.cursor = c.RV
			h.delivered.Add(1)
		default:
			h.cutBehind.Add(1)
			h.endLocked(s, fault.New(fault.KindUnavailable,
				"the watch fell more than %d events behind and was ended; resume it from the last resourceVersion received", h.Buffer))
		}
	}
}

// recordResolved advances watch_resolved to head at most once a second, so lists and
// starting replicas look for versions in flight only above it.
func (h *Hub) recordResolved(ctx context.Context, head int64) {
	if head <= h.recorded || time.Since(h.recordedAt) < time.Second {
		return
	}
	if _, err := h.svc.db.Exec(ctx, versionQ.Get("VersionResolvedAdvance"), head); err != nil {
		if ctx.Err() == nil {
			h.logger.WarnContext(ctx, "watch: recording the resolved version failed", "err", err)
		}
		return
	}
	h.recorded, h.recordedAt = head, time.Now()
}

// endLocked removes s with err; h.mu is held.
func (h *Hub) endLocked(s *Subscription, err error) {
	if _, ok := h.subs[s]; !ok {
		return
	}
	delete(h.subs, s)
	s.err = err
	close(s.ch)
}

// stop ends every subscription; later ones fail at once.
func (h *Hub) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	for s := range h.subs {
		h.endLocked(s, ErrWatchStopped)
	}
}

func goneError(from, compacted int64) error {
	return fault.Gone("resourceVersion %d is too old: the changes log answers only for changes after %d (older ones were pruned, or the database failed over, was recovered or restored since and its history may have lost changes); list again and watch from the list's resourceVersion", from, compacted)
}

// readChanges reads change rows (WatchPoll or WatchCatchUp with args).
func readChanges(ctx context.Context, tx *db.Tx, query *db.Query, args ...any) ([]Change, error) {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Change
	for rows.Next() {
		var (
			c         Change
			obj, prev []byte
		)
		if err := rows.Scan(&c.RV, &c.Type, &c.Kind, &c.Org, &c.Name, &obj, &prev, &c.PrevOrg, &c.renderScope); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(obj, &c.Object); err != nil {
			return nil, fmt.Errorf("change %d: %w", c.RV, err)
		}
		if prev != nil {
			if err := json.Unmarshal(prev, &c.PrevLabels); err != nil {
				return nil, fmt.Errorf("change %d: prev_labels: %w", c.RV, err)
			}
			if c.PrevLabels == nil { // JSON null
				c.PrevLabels = map[string]string{}
			}
		}
		if c.Object.Metadata.Labels == nil {
			c.Object.Metadata.Labels = map[string]string{}
		}
		if c.Object.Metadata.Annotations == nil {
			c.Object.Metadata.Annotations = map[string]string{}
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Subscription is one watcher's feed of the changes of one kind in one org, after a
// resourceVersion: first the backlog read from the log up to what the poller had processed,
// then the poller's live feed, with neither a gap nor a duplicate at the hand-off. It is not
// safe for concurrent use; Close may be called from any goroutine.
type Subscription struct {
	h         *Hub
	kind, org string

	// cursor: before the hand-off, the version the backlog has been read through (owned by
	// the reader); after it, the last version queued to ch (guarded by h.mu).
	cursor int64
	// delivered is the version of the last change Next returned (or the start).
	delivered int64
	// reported is the highest version Progress has returned: progress never goes back, so a
	// BOOKMARK never carries a version below an earlier one (owned by the consumer).
	reported int64
	live     bool
	backlog  []Change

	ch  chan Change
	err error // set before ch is closed
}

// Subscribe starts a feed of the changes of kind in org (org "" for global kinds) after
// version from. It fails with 410 (fault.KindGone) when from is older than the retained
// changes log.
func (h *Hub) Subscribe(ctx context.Context, kind, org string, from int64) (*Subscription, error) {
	timer := time.NewTimer(watchStartTimeout)
	defer timer.Stop()
	select {
	case <-h.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
		return nil, fault.New(fault.KindUnavailable, "the change poller of this replica has not started (is the database reachable?)")
	}
	var compacted int64
	if err := h.svc.db.QueryRow(ctx, watchQ.Get("WatchCompacted")).Scan(&compacted); err != nil {
		return nil, err
	}
	if from < compacted {
		return nil, goneError(from, compacted)
	}
	return &Subscription{h: h, kind: kind, org: org, cursor: from, delivered: from, ch: make(chan Change, h.Buffer)}, nil
}

// Next returns the next change, in resourceVersion order. It returns ctx's error when ctx
// ends first (the subscription stays usable), and the reason the feed ended otherwise: 410
// when its backlog was pruned, 503 when it fell too far behind or the replica stops.
func (s *Subscription) Next(ctx context.Context) (Change, error) {
	for {
		if len(s.backlog) > 0 {
			c := s.backlog[0]
			s.backlog = s.backlog[1:]
			s.delivered = c.RV
			return c, nil
		}
		if !s.live {
			if err := s.catchUp(ctx); err != nil {
				return Change{}, err
			}
			continue
		}
		select {
		case c, ok := <-s.ch:
			if !ok {
				return Change{}, s.err
			}
			s.delivered = c.RV
			if sabotage.Active("dropwatch") && c.RV%5 == 0 {
				continue
			}
			return c, nil
		case <-ctx.Done():
			return Change{}, ctx.Err()
		}
	}
}

// catchUp reads the next part of the backlog, or hands over to the live feed when the
// backlog reaches what the poller has processed. The hand-off happens under the poller's
// lock, at a moment when the backlog has been read exactly through the poller's head, so the
// first live change is the one after the last backlog change.
func (s *Subscription) catchUp(ctx context.Context) error {
	h := s.h
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return ErrWatchStopped
	}
	head := h.head
	if s.cursor >= head {
		h.subs[s] = struct{}{}
		s.live = true
		h.mu.Unlock()
		return nil
	}
	h.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	var (
		compacted int64
		batch     []Change
	)
	// The read is bounded (Batch rows by index) and is not cut by ctx: callers pass a ctx
	// with a short deadline to wait for the next change (a watch's bookmark timer), and a
	// query cancelled half-way costs its pooled connection.
	readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err := h.svc.db.ReadTx(readCtx, func(tx *db.Tx) error {
		if err := tx.QueryRow(readCtx, watchQ.Get("WatchCompacted")).Scan(&compacted); err != nil {
			return err
		}
		var err error
		batch, err = readChanges(readCtx, tx, watchQ.Get("WatchCatchUp"), s.cursor, head, s.kind, s.org, h.Batch)
		return err
	})
	if err != nil {
		return err
	}
	if s.cursor < compacted {
		return goneError(s.cursor, compacted)
	}
	for i := range batch {
		h.svc.presentObject(ctx, h.svc.db, &batch[i].Object)
	}
	s.backlog = batch
	if len(batch) == h.Batch {
		s.cursor = batch[len(batch)-1].RV
	} else {
		s.cursor = head
	}
	return nil
}

// Progress is the version through which every change of the subscription has been returned
// by Next: the poller's head when the subscriber has caught up and consumed everything
// queued, otherwise the last change returned. A BOOKMARK carries it, so a consumer resuming
// from a bookmark misses nothing.
//
// It never goes back: once it has reported the poller's head H with nothing queued, every
// change through H has been returned, and a change queued later is above H, so a later call
// with changes waiting reports at least H, not only the last change returned (a watch sent a
// BOOKMARK below its previous one so, found by the robustness harness under pause-replica).
func (s *Subscription) Progress() int64 {
	s.reported = max(s.reported, s.progress())
	return s.reported
}

func (s *Subscription) progress() int64 {
	if !s.live {
		if len(s.backlog) == 0 {
			return max(s.delivered, s.cursor)
		}
		return s.delivered
	}
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	if _, ok := s.h.subs[s]; ok && len(s.ch) == 0 {
		return max(s.h.head, s.delivered)
	}
	return s.delivered
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	delete(s.h.subs, s)
}

// ListSnapshot reads every object of kind in org that filter and sel let through, all pages
// in one snapshot, and the resourceVersion of that snapshot: what a watch without a
// resourceVersion sends as ADDED before the changes after that version. It holds all objects
// in memory (a watch of a million objects should start from a list's resourceVersion).
func (s *Service) ListSnapshot(ctx context.Context, kind, org string, filter auth.Filter, sel metadata.Selector, inOrg string) (api.ObjectList, error) {
	out := api.ObjectList{Items: []api.Object{}}
	k, err := s.kindOf(ctx, Ref{Kind: kind, Org: org})
	if err != nil {
		return out, err
	}
	floor := s.resolved.Load() // before the snapshot: versions through it are visible in it
	var gaps []int64
	opts, err := withOrgMember(k, ListOptions{Limit: MaxListLimit, Filter: filter, Selector: sel, InOrg: inOrg})
	if err != nil {
		return out, err
	}
	err = s.db.ReadTx(ctx, func(tx *db.Tx) error {
		for page := opts; ; {
			l, last, err := s.listTx(ctx, tx, kind, org, page)
			if err != nil {
				return err
			}
			out.Items = append(out.Items, l.Items...)
			out.ResourceVersion = l.ResourceVersion
			if last == "" {
				break
			}
			page.After = last
		}
		var err error
		gaps, err = s.gapsOf(ctx, tx, floor, listVersion(out))
		return err
	})
	if err == nil && len(gaps) > 0 {
		out.Items, _, err = s.settleList(ctx, kind, org, opts, 0, out.Items, "", gaps)
	}
	if err != nil {
		return api.ObjectList{Items: []api.Object{}}, err
	}
	s.noteResolved(listVersion(out))
	for i := range out.Items {
		s.presentObject(ctx, s.db, &out.Items[i])
	}
	return out, nil
}

// HeadVersion is the highest resourceVersion committed in the database (or the compaction
// point of an emptied log): what a list answers now, on any replica. A watch from beyond it
// waits for it (httpapi).
func (s *Service) HeadVersion(ctx context.Context) (int64, error) {
	var head int64
	err := s.db.QueryRow(ctx, watchQ.Get("WatchHead")).Scan(&head)
	return head, err
}

// ParseResourceVersion reads a resourceVersion a client sent: a positive decimal integer.
func ParseResourceVersion(field, raw string) (int64, error) {
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 1 {
		return 0, fault.Invalid(field, "resourceVersion must be a positive decimal integer this server issued, not %q", fault.Truncate(raw, 40))
	}
	return n, nil
}
