package resource

// The list index: a replica's in-memory copy of every object (all kinds, all orgs) and its
// labels, fed by the replica's change poller (Hub.poll), from which List answers pages
// without reading objects from PostgreSQL — the Kubernetes API server's "consistent reads
// from cache" (KEP-2340), mapped to strata's changes log (docs/benchmarks.md, "How the list
// index stays consistent").
//
// Consistency. A list reads the database's current resourceVersion R (WatchHead: one
// statement on the primary, started after the request arrived, so R covers every write
// acknowledged before the list began, on any replica) and waits until the index has applied
// every change up to R. The index's head is advanced only by the poller, after it applied a
// batch, and the poller advances only through versions that are all resolved (versions.go),
// so "head ≥ R" means the index holds exactly the state after every change up to its head.
// The page then carries the head as its resourceVersion: a watch from it misses nothing and
// repeats nothing, as with the database path. The wait is bounded (Index.Wait); a list that
// times out, or arrives while the index is being built, was dropped (410: the log was pruned
// past the poller, or a new history epoch), or is over its byte bound, reads the database
// instead. Continue tokens hold only a name, so pages may come from either path or replica.
//
// Every kind is indexed: an object costs a few hundred bytes (measured in
// TestIndexBytesPerObject), and the byte bound (MaxBytes) is what limits the index, not a
// list of kinds.
//
// Writes. The index's copies (and the replica's own last writes not yet applied, Index.wrote)
// are also the bases of replaces and patches, which then need no read before their COMMIT
// (Service.updateFromIndex): a copy may be behind, so the write's stamp checks the row's
// version and writes nothing when it moved on, and the write runs under the row lock instead.

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/metadata"
)

//go:embed index.sql
var indexFS embed.FS

var indexQ = db.MustParseQueries(indexFS, "index.sql")

// Index defaults.
const (
	// DefaultListIndexMaxBytes bounds a replica's list index: 4 GiB, about 4,900,000 objects
	// of the benchmark's shape (a node with five labels: ~870 bytes counted, ~885 bytes of
	// heap measured, TestIndexBytesPerObject), so the 1,000,000-node benchmark fits 4×.
	DefaultListIndexMaxBytes = 4 << 30
	// DefaultListIndexWait bounds how long a list waits for the index to apply the
	// database's current version before it reads the database instead.
	DefaultListIndexWait = 500 * time.Millisecond
	// indexRetryAfter is how long an index over its byte bound waits before it is loaded again.
	indexRetryAfter = 5 * time.Minute
	// ixChunk is the target size of one run of the name-ordered entries.
	ixChunk = 256
)

// Reasons a list is answered by the database instead of the index (metrics).
const (
	FallbackNotReady = "not_ready" // being built, dropped (410, epoch), or never started
	FallbackTimeout  = "timeout"   // the index did not reach the current version in time
	FallbackBudget   = "budget"    // the objects exceed the byte bound
	FallbackHistory  = "history"   // the database's head is below the index's: a lost history
)

var fallbackReasons = []string{FallbackNotReady, FallbackTimeout, FallbackBudget, FallbackHistory}

// Index is a replica's list index (see the top of this file). Create it with Hub.ServeLists.
type Index struct {
	svc *Service
	hub *Hub

	// MaxBytes and Wait are DefaultListIndexMaxBytes and DefaultListIndexWait unless changed
	// before the hub runs.
	MaxBytes int64
	Wait     time.Duration

	mu       sync.RWMutex
	live     *ixState      // nil while not ready
	advanced chan struct{} // closed (and replaced) whenever live's head moves or live changes
	overAt   time.Time     // when the index last went over MaxBytes (zero: it did not)
	gen      int64         // raised by every drop: a state loaded before one is stale

	// pending is a state the builder loaded, for the poller to install (installPending).
	pending  atomic.Pointer[ixState]
	building atomic.Bool
	runCtx   context.Context

	// skipWait answers from whatever the index holds, without reading the database's
	// version or waiting: for the control of the read-your-writes test only.
	skipWait bool

	// heads shares reads of the database's current version among concurrent lists.
	heads headReader

	served   atomic.Int64
	fallback [4]atomic.Int64 // by fallbackReasons
	rebuilds atomic.Int64

	// written holds the objects this replica wrote lately, as written, with their versions:
	// the base of the next update of one when it is newer than the index's copy, since the
	// poller applies a write some milliseconds after it committed, and a client writing one
	// object twice in a row would otherwise start its second write from the copy before its
	// first. Never read by lists, whose consistency rests on the poller alone.
	writtenMu sync.Mutex
	written   map[string]writtenObject

	// basedWrites counts updates computed from the index's copy of their object
	// (Service.updateFromIndex) that committed; staleBases those whose copy had been
	// overtaken, which the locked path wrote instead.
	basedWrites atomic.Int64
	staleBases  atomic.Int64
}

// ixState is one built index: the objects of every (kind, org) and the version through which
// it holds every change.
type ixState struct {
	gen     int64 // the index's generation when the load began
	head    int64
	bytes   int64
	objects int
	sets    map[string]*ixSet // kind "\x00" org
	members map[string]string // kind -> its org reference member (Kind.OrgMember), for ?org=
}

// ixSet holds the objects of one kind in one org: in name order (runs of at most 2×ixChunk
// entries, so an insert moves a few hundred pointers, not a million), by name, and by label
// (key -> value -> entries, and the count per key) for selective selectors.
type ixSet struct {
	chunks  [][]*ixEntry
	byName  map[string]*ixEntry
	post    map[string]map[string]map[*ixEntry]struct{}
	keyRefs map[string]int
}

// ixEntry is one object as stored (before its kind's read pipeline, which List runs on the
// page, as the database path does), with its org reference and what it counts in bytes.
type ixEntry struct {
	name   string
	obj    api.Object
	orgRef string
	size   int64
}

// ServeLists creates the replica's list index, fed by h, and makes h's service answer lists
// from it. Call it before Run.
func (h *Hub) ServeLists() *Index {
	ix := &Index{svc: h.svc, hub: h, MaxBytes: DefaultListIndexMaxBytes, Wait: DefaultListIndexWait, advanced: make(chan struct{})}
	h.index = ix
	h.svc.index = ix
	return ix
}

// IndexStats is what the list index holds and has done, for metrics.
type IndexStats struct {
	Ready    bool
	Head     int64
	Objects  int
	Bytes    int64
	Served   int64            // lists answered from memory
	Fallback map[string]int64 // lists answered by the database, by reason
	Rebuilds int64            // loads of the index (the first one included)
	// BasedWrites are updates written from the index's copy of their object in one round
	// trip; StaleBases those whose copy was overtaken and that the locked path wrote instead.
	BasedWrites, StaleBases int64
}

// Stats reports the index's counters.
func (ix *Index) Stats() IndexStats {
	st := IndexStats{Served: ix.served.Load(), Rebuilds: ix.rebuilds.Load(), Fallback: map[string]int64{},
		BasedWrites: ix.basedWrites.Load(), StaleBases: ix.staleBases.Load()}
	for i, r := range fallbackReasons {
		st.Fallback[r] = ix.fallback[i].Load()
	}
	ix.mu.RLock()
	if l := ix.live; l != nil {
		st.Ready, st.Head, st.Objects, st.Bytes = true, l.head, l.objects, l.bytes
	}
	ix.mu.RUnlock()
	return st
}

// writtenObject is an object this replica wrote, as written, and its version.
type writtenObject struct {
	obj api.Object
	rv  int64
}

// maxWritten bounds Index.written: past it, the entries the poller has applied are dropped,
// and all of them if that is not enough.
const maxWritten = 4096

// object returns the newest copy of one object this replica has, when the index is live:
// the index's, or the one this replica wrote last when the poller has not applied that write
// yet. It is the base of a write that starts without a read (Service.updateFromIndex). The
// copy may be behind the database, which the write's stamp checks; its maps are shared and
// must not be changed.
func (ix *Index) object(kind, org, name string) (api.Object, bool) {
	key := kind + "\x00" + org
	ix.mu.RLock()
	live := ix.live
	var e *ixEntry
	if live != nil {
		if set := live.sets[key]; set != nil {
			e = set.byName[name]
		}
	}
	ix.mu.RUnlock()
	if live == nil {
		return api.Object{}, false
	}
	ix.writtenMu.Lock()
	w, ok := ix.written[key+"\x00"+name]
	ix.writtenMu.Unlock()
	if ok && (e == nil || w.rv > versionOf(e.obj)) {
		return w.obj, true
	}
	if e == nil {
		return api.Object{}, false
	}
	return e.obj, true
}

// wrote keeps obj, which this replica has just written (created, replaced or patched), as
// the base of the next update of it (object).
func (ix *Index) wrote(obj api.Object) {
	rv := versionOf(obj)
	if rv == 0 {
		return
	}
	obj.Metadata.Labels, obj.Metadata.Annotations = maps.Clone(obj.Metadata.Labels), maps.Clone(obj.Metadata.Annotations)
	ix.mu.RLock()
	var head int64
	if ix.live != nil {
		head = ix.live.head
	}
	ix.mu.RUnlock()
	ix.writtenMu.Lock()
	defer ix.writtenMu.Unlock()
	if ix.written == nil || len(ix.written) >= maxWritten {
		for k, w := range ix.written {
			if w.rv <= head {
				delete(ix.written, k)
			}
		}
		if len(ix.written) >= maxWritten {
			clear(ix.written)
		}
		if ix.written == nil {
			ix.written = map[string]writtenObject{}
		}
	}
	key := obj.Kind + "\x00" + obj.Metadata.Org + "\x00" + obj.Metadata.Name
	if old, ok := ix.written[key]; !ok || old.rv < rv {
		ix.written[key] = writtenObject{obj: obj, rv: rv}
	}
}

// deleted forgets what wrote kept of an object this replica has deleted.
func (ix *Index) deleted(ref Ref) {
	ix.writtenMu.Lock()
	delete(ix.written, ref.Kind+"\x00"+ref.Org+"\x00"+ref.Name)
	ix.writtenMu.Unlock()
}

// versionOf is obj's resourceVersion as a number (0 when it has none).
func versionOf(obj api.Object) int64 {
	rv, _ := strconv.ParseInt(obj.Metadata.ResourceVersion, 10, 64)
	return rv
}

func (ix *Index) countFallback(reason string) {
	ix.fallback[slices.Index(fallbackReasons, reason)].Add(1)
}

// advanceLocked wakes every list waiting for the index; ix.mu is held for writing.
func (ix *Index) advanceLocked() {
	close(ix.advanced)
	ix.advanced = make(chan struct{})
}

// drop discards the live index (reason: FallbackNotReady or FallbackBudget) and starts
// loading a new one, at once or, over the byte bound, after indexRetryAfter.
func (ix *Index) drop(reason string) {
	ix.mu.Lock()
	ix.live = nil
	ix.gen++
	if reason == FallbackBudget {
		ix.overAt = time.Now()
	}
	ix.advanceLocked()
	ix.mu.Unlock()
	ix.pending.Store(nil)
	// What this replica wrote may belong to a history the drop left behind (a restore, a
	// failover): the stamp would refuse such a base, but it costs a round trip each.
	ix.writtenMu.Lock()
	clear(ix.written)
	ix.writtenMu.Unlock()
	ix.startBuild()
}

// startBuild loads a new index in the background unless a load is running.
func (ix *Index) startBuild() {
	if ix.runCtx == nil || !ix.building.CompareAndSwap(false, true) {
		return
	}
	go func() {
		ctx := ix.runCtx
		defer func() {
			if ctx.Err() != nil {
				ix.building.Store(false)
			}
		}()
		backoff := time.Second
		for ctx.Err() == nil {
			ix.mu.RLock()
			over := ix.overAt
			ix.mu.RUnlock()
			if wait := time.Until(over.Add(indexRetryAfter)); !over.IsZero() && wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
			}
			st, err := ix.load(ctx)
			if errors.Is(err, errOverBudget) {
				ix.mu.Lock()
				ix.overAt = time.Now()
				ix.mu.Unlock()
				ix.hub.logger.WarnContext(ctx, "list index: the objects exceed --list-index-max-bytes; lists read the database", "max_bytes", ix.MaxBytes)
				continue
			}
			if err != nil {
				if ctx.Err() == nil {
					ix.hub.logger.WarnContext(ctx, "list index: loading failed; retrying", "err", err)
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, 30*time.Second)
				continue
			}
			ix.rebuilds.Add(1)
			// Clear the flag first: an install that finds the state stale starts another.
			ix.building.Store(false)
			ix.pending.Store(st)
			ix.hub.poke()
			return
		}
	}()
}

var errOverBudget = errors.New("list index over its byte bound")

// load reads every object in one REPEATABLE READ snapshot, settles the versions the snapshot
// misses below its newest one, M, and applies their changes (as List does to its page), so
// the state returned is exactly the one after every change up to M.
func (ix *Index) load(ctx context.Context) (*ixState, error) {
	s := ix.svc
	st := newState(s)
	ix.mu.RLock()
	st.gen = ix.gen
	ix.mu.RUnlock()
	floor := s.resolved.Load()
	var gaps []int64
	err := s.db.ReadTx(ctx, func(tx *db.Tx) error {
		if err := tx.QueryRow(ctx, watchQ.Get("WatchHead")).Scan(&st.head); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, indexQ.Get("IndexLoad"))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var kind string
			obj, err := scanObject("", rows, &kind)
			if err != nil {
				return err
			}
			obj.Kind = kind
			st.appendSorted(obj)
			if st.bytes > ix.MaxBytes {
				return errOverBudget
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		gaps, err = s.gapsOf(ctx, tx, floor, st.head)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(gaps) > 0 {
		changes, err := s.settle(ctx, gaps)
		if err != nil {
			return nil, err
		}
		for _, c := range changes {
			st.apply(c)
		}
	}
	return st, nil
}

func newState(s *Service) *ixState {
	st := &ixState{sets: map[string]*ixSet{}, members: map[string]string{}}
	for _, k := range s.kinds.All() {
		if k.OrgMember != "" {
			st.members[k.Name] = k.OrgMember
		}
	}
	return st
}

// installPending makes a loaded state live, in the poller's goroutine (h.mu is not held):
// it reads and applies the changes the poller passed while the state loaded, so that the
// state holds everything up to the poller's head and the poller's next batch continues it.
func (ix *Index) installPending(ctx context.Context) error {
	st := ix.pending.Load()
	if st == nil {
		return nil
	}
	h := ix.hub
	h.mu.Lock()
	target := h.head
	h.mu.Unlock()
	for st.head < target {
		var (
			compacted int64
			batch     []Change
		)
		err := h.svc.db.ReadTx(ctx, func(tx *db.Tx) error {
			if err := tx.QueryRow(ctx, watchQ.Get("WatchCompacted")).Scan(&compacted); err != nil {
				return err
			}
			var err error
			batch, err = readChanges(ctx, tx, watchQ.Get("WatchPoll"), st.head, h.Batch)
			return err
		})
		if err != nil {
			return err
		}
		if compacted > st.head || len(batch) == 0 {
			// Pruned while loading: what the load missed is gone; load again.
			ix.pending.Store(nil)
			ix.startBuild()
			return nil
		}
		for _, c := range batch {
			if c.RV > target {
				break
			}
			if c.Type != "GAP" {
				st.apply(c)
			}
			st.head = c.RV
		}
	}
	if st.bytes > ix.MaxBytes {
		ix.pending.Store(nil)
		ix.drop(FallbackBudget)
		return nil
	}
	ix.pending.Store(nil)
	ix.mu.Lock()
	stale := st.gen != ix.gen
	if !stale {
		ix.live = st
		ix.overAt = time.Time{}
		ix.advanceLocked()
	}
	ix.mu.Unlock()
	if stale {
		ix.startBuild() // dropped while it loaded
	}
	return nil
}

// applyBatch applies changes the poller read (stored objects, in version order, every one
// above the live head) and raises the head to head; h.mu is held.
func (ix *Index) applyBatch(changes []Change, head int64) {
	ix.mu.Lock()
	st := ix.live
	if st == nil {
		ix.mu.Unlock()
		return
	}
	for _, c := range changes {
		if c.RV > st.head && c.Type != "GAP" {
			st.apply(c)
		}
	}
	st.head = max(st.head, head)
	over := st.bytes > ix.MaxBytes
	ix.advanceLocked()
	ix.mu.Unlock()
	if over {
		ix.drop(FallbackBudget)
	}
}

// appendSorted adds obj, which sorts after every object loaded so far (IndexLoad's order).
func (st *ixState) appendSorted(obj api.Object) {
	set := st.set(obj.Kind, obj.Metadata.Org)
	e := st.entry(obj)
	set.byName[e.name] = e
	set.postAdd(e)
	if n := len(set.chunks); n > 0 && len(set.chunks[n-1]) < ixChunk {
		set.chunks[n-1] = append(set.chunks[n-1], e)
	} else {
		set.chunks = append(set.chunks, append(make([]*ixEntry, 0, ixChunk), e))
	}
	st.bytes += e.size
	st.objects++
}

// apply applies one change (not a GAP) to the state.
func (st *ixState) apply(c Change) {
	set := st.set(c.Kind, c.Org)
	if c.Type == "DELETED" {
		if old := set.remove(c.Name); old != nil {
			st.bytes -= old.size
			st.objects--
		}
		return
	}
	obj := c.Object
	obj.Kind, obj.Metadata.Name, obj.Metadata.Org = c.Kind, c.Name, c.Org
	for _, t := range []**time.Time{&obj.Metadata.CreatedAt, &obj.Metadata.UpdatedAt} {
		if *t != nil {
			u := (*t).UTC()
			*t = &u
		}
	}
	e := st.entry(obj)
	if old := set.put(e); old != nil {
		st.bytes -= old.size
	} else {
		st.objects++
	}
	st.bytes += e.size
}

func (st *ixState) set(kind, org string) *ixSet {
	key := kind + "\x00" + org
	set := st.sets[key]
	if set == nil {
		set = &ixSet{byName: map[string]*ixEntry{}, post: map[string]map[string]map[*ixEntry]struct{}{}, keyRefs: map[string]int{}}
		st.sets[key] = set
	}
	return set
}

// Bytes an entry counts beyond its text, measured with TestIndexBytesPerObject (heap growth
// per object at 100,000 nodes of the benchmark's shape, divided over these constants).
const (
	ixEntryBytes = 350 // the entry, its pointers in the runs and the name map, times, maps' headers
	ixLabelBytes = 90  // a label in the object's map and in the postings
	ixAnnoBytes  = 50  // an annotation in the object's map
)

func (st *ixState) entry(obj api.Object) *ixEntry {
	// Compact, as a list's answer writes them: the answer then copies them as they are
	// (jsonb prints a space after every colon and comma).
	obj.Spec, obj.Status = compact(obj.Spec), compact(obj.Status)
	e := &ixEntry{name: obj.Metadata.Name, obj: obj}
	if m := st.members[obj.Kind]; m != "" {
		e.orgRef = SpecString(obj, m)
	}
	size := int64(ixEntryBytes + len(obj.Metadata.Name) + len(obj.Spec) + len(obj.Status) + len(obj.Metadata.UID) + len(obj.Metadata.ResourceVersion))
	for k, v := range obj.Metadata.Labels {
		size += int64(ixLabelBytes + len(k) + len(v))
	}
	for k, v := range obj.Metadata.Annotations {
		size += int64(ixAnnoBytes + len(k) + len(v))
	}
	e.size = size
	return e
}

// find returns where name is, or would be inserted: the run and the position in it.
func (s *ixSet) find(name string) (ci, i int) {
	ci = sort.Search(len(s.chunks), func(c int) bool { ch := s.chunks[c]; return ch[len(ch)-1].name >= name })
	if ci == len(s.chunks) {
		return ci, 0
	}
	ch := s.chunks[ci]
	return ci, sort.Search(len(ch), func(j int) bool { return ch[j].name >= name })
}

// put inserts e or replaces the entry of its name, which it returns.
func (s *ixSet) put(e *ixEntry) *ixEntry {
	old := s.byName[e.name]
	if old != nil {
		s.postDel(old)
	}
	s.byName[e.name] = e
	s.postAdd(e)
	ci, i := s.find(e.name)
	if old != nil {
		s.chunks[ci][i] = e
		return old
	}
	if ci == len(s.chunks) {
		if ci > 0 && len(s.chunks[ci-1]) < ixChunk {
			s.chunks[ci-1] = append(s.chunks[ci-1], e)
		} else {
			s.chunks = append(s.chunks, append(make([]*ixEntry, 0, ixChunk), e))
		}
		return nil
	}
	ch := slices.Insert(s.chunks[ci], i, e)
	if len(ch) > 2*ixChunk {
		lo, hi := slices.Clone(ch[:ixChunk]), slices.Clone(ch[ixChunk:])
		s.chunks[ci] = lo
		s.chunks = slices.Insert(s.chunks, ci+1, hi)
	} else {
		s.chunks[ci] = ch
	}
	return nil
}

// remove deletes the entry of name and returns it (nil when there is none).
func (s *ixSet) remove(name string) *ixEntry {
	old := s.byName[name]
	if old == nil {
		return nil
	}
	delete(s.byName, name)
	s.postDel(old)
	ci, i := s.find(name)
	ch := slices.Delete(s.chunks[ci], i, i+1)
	if len(ch) == 0 {
		s.chunks = slices.Delete(s.chunks, ci, ci+1)
	} else {
		s.chunks[ci] = ch
	}
	return old
}

func (s *ixSet) postAdd(e *ixEntry) {
	for k, v := range e.obj.Metadata.Labels {
		vals := s.post[k]
		if vals == nil {
			vals = map[string]map[*ixEntry]struct{}{}
			s.post[k] = vals
		}
		es := vals[v]
		if es == nil {
			es = map[*ixEntry]struct{}{}
			vals[v] = es
		}
		es[e] = struct{}{}
		s.keyRefs[k]++
	}
}

func (s *ixSet) postDel(e *ixEntry) {
	for k, v := range e.obj.Metadata.Labels {
		vals := s.post[k]
		delete(vals[v], e)
		if len(vals[v]) == 0 {
			delete(vals, v)
		}
		if s.keyRefs[k]--; s.keyRefs[k] == 0 {
			delete(s.keyRefs, k)
			delete(s.post, k)
		}
	}
}

// walk calls f with each entry named after after, in name order, until f returns false.
func (s *ixSet) walk(after string, f func(e *ixEntry) bool) {
	ci := sort.Search(len(s.chunks), func(c int) bool { ch := s.chunks[c]; return ch[len(ch)-1].name > after })
	if ci == len(s.chunks) {
		return
	}
	ch := s.chunks[ci]
	i := sort.Search(len(ch), func(j int) bool { return ch[j].name > after })
	for ; ci < len(s.chunks); ci, i = ci+1, 0 {
		for _, e := range s.chunks[ci][i:] {
			if !f(e) {
				return
			}
		}
	}
}

// labelKey is how a requirement's key appears in an object's labels (the database path
// compares prefix and name; the labels map joins them as ListResource's query does).
func labelKey(r metadata.Requirement) string {
	if r.Prefix == "" {
		return r.Name
	}
	return r.Prefix + "/" + r.Name
}

// matches is the SQL fragments' semantics (Sel* in queries.sql) on an entry's labels: in
// needs the key with a listed value, notin and ! also match objects without the key.
func matches(sel metadata.Selector, keys []string, labels map[string]string) bool {
	for i, r := range sel.Requirements {
		v, ok := labels[keys[i]]
		switch r.Op {
		case metadata.OpIn:
			if !ok || !slices.Contains(r.Values, v) {
				return false
			}
		case metadata.OpNotIn:
			if ok && slices.Contains(r.Values, v) {
				return false
			}
		case metadata.OpExists:
			if !ok {
				return false
			}
		case metadata.OpNotExists:
			if ok {
				return false
			}
		}
	}
	return true
}

// page reads one page of List from the state, as listTx reads it from the database: the
// entries of kind in org named after opts.After that the filter, the selector and the org
// reference let through, in name order, limit of them, and the last name when one more
// follows. It plans as drive does: when the most selective positive requirement names few
// objects it reads those and sorts them; otherwise it walks names.
func (st *ixState) page(kind, org string, opts ListOptions, limit, driveLimit int) ([]api.Object, string) {
	items := []api.Object{}
	set := st.sets[kind+"\x00"+org]
	if set == nil {
		return items, ""
	}
	sel := opts.Selector
	keys := make([]string, len(sel.Requirements))
	for i, r := range sel.Requirements {
		keys[i] = labelKey(r)
	}
	var found []*ixEntry
	take := func(e *ixEntry) bool {
		if !opts.Filter.Allows(e.name) || !matches(sel, keys, e.obj.Metadata.Labels) {
			return true
		}
		if opts.InOrg != "" && opts.orgMember != "" {
			ref := e.orgRef
			if st.members[kind] != opts.orgMember {
				ref = SpecString(e.obj, opts.orgMember)
			}
			if ref != opts.InOrg {
				return true
			}
		}
		found = append(found, e)
		return len(found) <= limit
	}
	best, bestN := -1, 0
	for i, r := range sel.Requirements {
		n := 0
		switch r.Op {
		case metadata.OpIn:
			for _, v := range r.Values {
				n += len(set.post[keys[i]][v])
			}
		case metadata.OpExists:
			n = set.keyRefs[keys[i]]
		default:
			continue
		}
		if n == 0 {
			return items, "" // a requirement no object meets
		}
		if best < 0 || n < bestN {
			best, bestN = i, n
		}
	}
	// Driving costs a visit and a sort of each of the bestN entries; walking visits about
	// (limit+1)·total/matches entries, where matches ≤ bestN. In memory a visit costs about
	// what a comparison of the sort does, so drive only when bestN² is well below
	// (limit+1)·total (at 100,000 objects and pages of 50: below ~1,100 objects), and never
	// above driveLimit, the database path's bound (0 always walks, as there).
	if best >= 0 && driveLimit > 0 && bestN <= driveLimit && 4*bestN*bestN < (limit+1)*len(set.byName) {
		r := sel.Requirements[best]
		var cands []*ixEntry
		add := func(es map[*ixEntry]struct{}) {
			for e := range es {
				if e.name > opts.After {
					cands = append(cands, e)
				}
			}
		}
		if r.Op == metadata.OpIn {
			for _, v := range r.Values {
				add(set.post[keys[best]][v])
			}
		} else {
			for _, es := range set.post[keys[best]] {
				add(es)
			}
		}
		slices.SortFunc(cands, func(a, b *ixEntry) int {
			switch {
			case a.name < b.name:
				return -1
			case a.name > b.name:
				return 1
			}
			return 0
		})
		for _, e := range cands {
			if !take(e) {
				break
			}
		}
	} else {
		set.walk(opts.After, take)
	}
	last := ""
	if len(found) > limit {
		found = found[:limit]
		last = found[limit-1].name
	}
	items = make([]api.Object, len(found))
	for i, e := range found {
		items[i] = e.obj
	}
	return items, last
}

// list answers a page from the index, and false when the database must answer it instead
// (the reason is counted). The items share their labels and annotations maps with the index:
// callers only read them.
func (ix *Index) list(ctx context.Context, kind, org string, opts ListOptions) (api.ObjectList, string, bool, error) {
	ix.mu.RLock()
	ready, over := ix.live != nil, !ix.overAt.IsZero()
	ix.mu.RUnlock()
	if !ready {
		if over {
			ix.countFallback(FallbackBudget)
		} else {
			ix.countFallback(FallbackNotReady)
		}
		return api.ObjectList{}, "", false, nil
	}
	var target int64
	if !ix.skipWait {
		var err error
		if target, err = ix.heads.read(ctx, ix.readHead); err != nil {
			return api.ObjectList{}, "", false, err
		}
		if !ix.checkHistory(target) {
			return api.ObjectList{}, "", false, nil
		}
	}
	deadline := time.NewTimer(ix.Wait)
	defer deadline.Stop()
	poked := false
	for {
		ix.mu.RLock()
		st := ix.live
		if st == nil {
			ix.mu.RUnlock()
			ix.countFallback(FallbackNotReady)
			return api.ObjectList{}, "", false, nil
		}
		if st.head >= target {
			items, last := st.page(kind, org, opts, pageLimit(opts), ix.svc.DriveLimit)
			head := st.head
			ix.mu.RUnlock()
			ix.served.Add(1)
			return api.ObjectList{Items: items, ResourceVersion: strconv.FormatInt(head, 10)}, last, true, nil
		}
		wait := ix.advanced
		ix.mu.RUnlock()
		if !poked {
			// Do not wait for the next notification or poll: this list needs the poller now.
			ix.hub.poke()
			poked = true
		}
		select {
		case <-wait:
		case <-deadline.C:
			ix.countFallback(FallbackTimeout)
			return api.ObjectList{}, "", false, nil
		case <-ctx.Done():
			return api.ObjectList{}, "", false, ctx.Err()
		}
	}
}

// checkHistory drops the index when the database's newest version is below the index's
// head: the database's history went back (a restore the epoch check has not marked yet), and
// the index may hold changes the database lost.
func (ix *Index) checkHistory(dbHead int64) bool {
	ix.mu.RLock()
	st := ix.live
	behind := st != nil && dbHead < st.head
	ix.mu.RUnlock()
	if behind {
		ix.countFallback(FallbackHistory)
		ix.drop(FallbackNotReady)
	}
	return !behind
}

// Digest hashes (kind, org, name, resourceVersion) of every object the index holds, in
// (kind, org, name) order, and returns it with the head it was taken at; false while the index
// is not ready. DatabaseDigest computes the same over the database, for a consistency check.
func (ix *Index) Digest() (uint64, int64, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	st := ix.live
	if st == nil {
		return 0, 0, false
	}
	keys := make([]string, 0, len(st.sets))
	for k := range st.sets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	d := newDigest()
	for _, k := range keys {
		st.sets[k].walk("", func(e *ixEntry) bool {
			d.add(e.obj.Kind, e.obj.Metadata.Org, e.name, e.obj.Metadata.ResourceVersion)
			return true
		})
	}
	return d.sum, st.head, true
}

// DatabaseDigest is Digest over the database's objects, read in one snapshot, with that
// snapshot's newest version: equal to the index's digest when both are at the same version.
func (s *Service) DatabaseDigest(ctx context.Context) (uint64, int64, error) {
	d := newDigest()
	var head int64
	err := s.db.ReadTx(ctx, func(tx *db.Tx) error {
		if err := tx.QueryRow(ctx, watchQ.Get("WatchHead")).Scan(&head); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, indexQ.Get("IndexLoad"))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var kind string
			obj, err := scanObject("", rows, &kind)
			if err != nil {
				return err
			}
			d.add(kind, obj.Metadata.Org, obj.Metadata.Name, obj.Metadata.ResourceVersion)
		}
		return rows.Err()
	})
	return d.sum, head, err
}

// digest is FNV-1a (64 bits) over NUL-separated fields, as the apiserver's consistency
// checker hashes namespace/name/resourceVersion.
type digest struct{ sum uint64 }

func newDigest() *digest { return &digest{sum: 14695981039346656037} }

func (d *digest) add(fields ...string) {
	for _, f := range fields {
		for i := 0; i < len(f); i++ {
			d.sum ^= uint64(f[i])
			d.sum *= 1099511628211
		}
		d.sum ^= 0
		d.sum *= 1099511628211
	}
}

// compact returns raw without insignificant whitespace (raw itself when it has none or is not
// valid JSON).
func compact(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || !bytes.ContainsAny(raw, " \t\n\r") {
		return raw
	}
	var b bytes.Buffer
	b.Grow(len(raw))
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// readHead reads the database's current version (WatchHead: the newest change, or the
// compaction point of an emptied log).
func (ix *Index) readHead(ctx context.Context) (int64, error) {
	var v int64
	err := ix.svc.db.QueryRow(ctx, watchQ.Get("WatchHead")).Scan(&v)
	return v, err
}

// headReader shares one read of the database's current version among the lists that arrive
// while another read is in flight — but only reads that start after a list arrived: a read
// already under way when a list arrives may miss a write acknowledged just before, so the
// list joins the next one (research §4.1: "join the next one, never the one in flight").
// At most one read is in flight per replica; under load each read serves every list that
// arrived during the previous one.
type headReader struct {
	mu      sync.Mutex
	running bool      // a read is in flight
	next    *headCall // the read that starts when the running one ends, joined by arrivals
}

type headCall struct {
	done chan struct{}
	v    int64
	err  error
}

// read returns a version read by a statement that began after read was called.
func (h *headReader) read(ctx context.Context, query func(context.Context) (int64, error)) (int64, error) {
	h.mu.Lock()
	if h.next == nil {
		h.next = &headCall{done: make(chan struct{})}
	}
	c := h.next
	if !h.running {
		h.running, h.next = true, nil
		go h.run(c, query)
	}
	h.mu.Unlock()
	select {
	case <-c.done:
		return c.v, c.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// run performs c, then each call that was joined meanwhile, until none is waiting. The
// statements do not run under any one list's context: others share them.
func (h *headReader) run(c *headCall, query func(context.Context) (int64, error)) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c.v, c.err = query(ctx)
		cancel()
		close(c.done)
		h.mu.Lock()
		c = h.next
		if c == nil {
			h.running = false
			h.mu.Unlock()
			return
		}
		h.next = nil
		h.mu.Unlock()
	}
}
