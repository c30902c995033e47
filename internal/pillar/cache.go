package pillar

import (
	"container/list"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/sabotage"
)

// Cache keeps rendered pillars of one replica. It is correct across replicas because it
// trusts nothing it has not been told about, by one of two feeds. Changes to pillar rows,
// memberships and settings, and writes by SQL, notify "<schema>.pillars" on commit
// (statement triggers, whoever writes: migrations 0010 and 0014); the cache's session
// LISTENs on it, and a notification drops the renders its payload names — node:<name>,
// org:<name> (every node of the org), or * (all; also an empty or unknown payload). Writes of
// objects by strata (nodes, orgs, groups and their labels) do not notify inside their
// transactions (migration 0036): each change row names the renders it alters, and the
// replica's change poller hands those names to the cache (UseChangeFeed, FeedScopes) as it
// reads the log, which it does when a writer announces its commit and at least once a second.
//
// Two races are closed explicitly. A render computed from a snapshot taken before a change
// committed must not outlive the invalidation of that change: entries carry the generation
// read before the render started and are stored only if no invalidation happened meanwhile.
// Notifications sent while the session is disconnected are lost: while either feed is
// unsubscribed the cache serves nothing (every render is computed), reports itself not
// ready, and starts empty once subscribed again.
type Cache struct {
	mu      sync.Mutex
	gen     uint64
	entries map[string]*list.Element // of *cacheEntry
	lru     list.List                // front: most recently used
	bytes   int64                    // the cost of the entries held
	max     int64

	subscribed atomic.Bool
	// feedUsed: the cache also learns of changes from the change log's poller (UseChangeFeed);
	// it then serves only while feedOn too.
	feedUsed  atomic.Bool
	feedOn    atomic.Bool
	hits      atomic.Int64
	misses    atomic.Int64
	evictions atomic.Int64
	// invalidated counts invalidations by scope (scopeNode, scopeOrg, scopeAll).
	invalidated [scopeCount]atomic.Int64
}

// cacheEntry is one cached render and what it counts against the cache's bound.
type cacheEntry struct {
	node string
	org  string
	r    Rendered
	cost int64
}

// DefaultCacheBytes bounds a replica's render cache when no bound is given: 256 MiB holds
// the pillars of about 6,500 minions of 10 KB each, or 650,000 of 100 bytes.
const DefaultCacheBytes = 256 << 20

// entryCost is what a render counts against the bound: four times its JSON size (a decoded
// pillar, maps of interfaces, takes about that much memory; docs/benchmarks.md measures it)
// plus the key and the entry.
func entryCost(node string, r Rendered) int64 { return 4*r.size + int64(len(node)) + 200 }

// NewCache returns an empty, not yet subscribed cache holding at most maxBytes of renders
// (DefaultCacheBytes when maxBytes is 0), the least recently used evicted first.
func NewCache(maxBytes int64) *Cache {
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	return &Cache{entries: map[string]*list.Element{}, max: maxBytes}
}

// get returns a cached render of node and the generation a render started now must carry.
func (c *Cache) get(node string) (Rendered, bool, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.serving() {
		return Rendered{}, false, c.gen
	}
	e, ok := c.entries[node]
	if !ok {
		return Rendered{}, false, c.gen
	}
	c.lru.MoveToFront(e)
	return e.Value.(*cacheEntry).r, true, c.gen
}

// put stores a render computed from generation gen, unless the cache was invalidated since,
// evicting the least recently used renders until it fits; a render larger than the whole
// bound is not stored.
func (c *Cache) put(node string, gen uint64, r Rendered) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cost := entryCost(node, r)
	if gen != c.gen || !c.serving() || cost > c.max {
		return
	}
	if e, ok := c.entries[node]; ok {
		c.remove(e)
	}
	for c.bytes+cost > c.max {
		c.remove(c.lru.Back())
		c.evictions.Add(1)
	}
	c.entries[node] = c.lru.PushFront(&cacheEntry{node: node, org: r.org, r: r, cost: cost})
	c.bytes += cost
}

// remove drops entry e. Call with mu held.
func (c *Cache) remove(e *list.Element) {
	ce := e.Value.(*cacheEntry)
	c.lru.Remove(e)
	delete(c.entries, ce.node)
	c.bytes -= ce.cost
}

// Invalidate drops every entry.
func (c *Cache) Invalidate() { c.InvalidateScopes("*") }

// InvalidateScopes drops the renders a notification's payload names: space-separated scopes
// node:<name> (that node), org:<name> (every node of that org: its rows and its groups'
// rows, selectors and members reach only its nodes) and * (all). An empty payload, or any
// scope it does not know, drops all: narrowing is an optimization, never a guess. Every
// invalidation also advances the generation, so a render that started before it is not
// stored, whichever node it is for.
func (c *Cache) InvalidateScopes(payload string) {
	scopes := strings.Fields(payload)
	for _, sc := range scopes {
		switch {
		case sc == "*":
			c.invalidated[scopeAll].Add(1)
		case strings.HasPrefix(sc, "node:"):
			c.invalidated[scopeNode].Add(1)
		case strings.HasPrefix(sc, "org:"):
			c.invalidated[scopeOrg].Add(1)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	nodes, orgs := map[string]bool{}, map[string]bool{}
	for _, sc := range scopes {
		kind, name, _ := strings.Cut(sc, ":")
		switch {
		case kind == "node" && name != "":
			nodes[name] = true
		case kind == "org" && name != "":
			orgs[name] = true
		default:
			c.clear()
			return
		}
	}
	if len(scopes) == 0 {
		c.clear()
		return
	}
	for n := range nodes {
		if e, ok := c.entries[n]; ok {
			c.remove(e)
		}
	}
	if len(orgs) > 0 {
		for e := c.lru.Front(); e != nil; {
			next := e.Next()
			if orgs[e.Value.(*cacheEntry).org] {
				c.remove(e)
			}
			e = next
		}
	}
}

// clear drops every entry. Call with mu held.
func (c *Cache) clear() {
	clear(c.entries)
	c.lru.Init()
	c.bytes = 0
}

func (c *Cache) setSubscribed(on bool) { c.restart(&c.subscribed, on) }

// restart sets a subscription flag and starts the cache empty: what was cached before may
// predate invalidations the lost subscription never delivered.
func (c *Cache) restart(flag *atomic.Bool, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.clear()
	flag.Store(on)
}

// serving reports whether every source of invalidations the cache relies on is subscribed.
func (c *Cache) serving() bool {
	return c.subscribed.Load() && (!c.feedUsed.Load() || c.feedOn.Load())
}

// Ready reports whether the cache is subscribed to invalidations (nil) or why not.
func (c *Cache) Ready() error {
	if !c.subscribed.Load() {
		return errors.New("pillar render cache: not subscribed to invalidations")
	}
	if !c.serving() {
		return errors.New("pillar render cache: not subscribed to the change log's notifications")
	}
	return nil
}

// UseChangeFeed makes the cache rely on a second source of invalidations, the replica's
// change poller (resource.Hub.FeedRenders): writes of objects announce themselves after
// they commit and stamp, in the change log, the renders each change can alter (migration
// 0036), instead of notifying "<schema>.pillars". From now on the cache serves only while
// that feed is subscribed too (FeedSubscribed), and starts empty each time it subscribes.
func (c *Cache) UseChangeFeed() { c.restart(&c.feedUsed, true) }

// FeedSubscribed is the change feed's subscription state: lost (the poller's session that
// LISTENs for announcements is gone: changes are then seen only at its next poll) or back.
func (c *Cache) FeedSubscribed(on bool) { c.restart(&c.feedOn, on) }

// FeedScopes drops the renders the change feed names (the render_scope of changes the
// poller read), as InvalidateScopes does for a notification.
func (c *Cache) FeedScopes(payload string) {
	if sabotage.Active("cachedrop") {
		// As in Listen: a loaded replica's late invalidation, which own writes must not rely on.
		time.AfterFunc(100*time.Millisecond, func() { c.InvalidateScopes(payload) })
		return
	}
	c.InvalidateScopes(payload)
}

// Stats returns the cache's hit and miss counts.
func (c *Cache) Stats() (hits, misses int64) { return c.hits.Load(), c.misses.Load() }

// Invalidation scopes, for InvalidationsBy.
const (
	scopeNode = iota
	scopeOrg
	scopeAll
	scopeCount
)

// InvalidationsBy reports how many invalidations of each scope the cache received: a node's
// renders, an org's, or all (global rows, settings, or more names than a notification holds).
func (c *Cache) InvalidationsBy() (node, org, all int64) {
	return c.invalidated[scopeNode].Load(), c.invalidated[scopeOrg].Load(), c.invalidated[scopeAll].Load()
}

// Evictions is how many renders were dropped to stay within the bound.
func (c *Cache) Evictions() int64 { return c.evictions.Load() }

// Size returns the cost of the renders held (see entryCost) and how many there are.
func (c *Cache) Size() (bytes int64, entries int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes, len(c.entries)
}

// Listen keeps a session LISTENing on the invalidation channel until ctx ends, reconnecting
// after a loss; open opens a fresh session. Each (re)subscription starts the cache empty.
func (c *Cache) Listen(ctx context.Context, open func(context.Context) (*db.Session, error), schema string, logger *slog.Logger) {
	db.Subscribe(ctx, open, schema+".pillars", db.Listener{
		Subscribed: c.setSubscribed,
		Notify: func(payload string) {
			if sabotage.Active("cachedrop") {
				time.Sleep(100 * time.Millisecond) // a loaded replica's late NOTIFY: own writes must not rely on it
			}
			c.InvalidateScopes(payload)
		},
		Lost: func(err error) {
			logger.WarnContext(ctx, "pillar cache unsubscribed; renders are computed until it subscribes again", "err", err)
		},
	})
}
