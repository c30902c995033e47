package pillar

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/stratahq/strata/internal/db"
)

// Cache keeps rendered pillars of one replica. It is correct across replicas because it
// trusts nothing it has not been told about: every change that can alter a render notifies
// "<schema>.pillars" on commit (migration 0010's statement triggers, whoever writes), the
// cache's session LISTENs on it, and a notification drops every entry.
//
// Two races are closed explicitly. A render computed from a snapshot taken before a change
// committed must not outlive the invalidation of that change: entries carry the generation
// read before the render started and are stored only if no invalidation happened meanwhile.
// Notifications sent while the session is disconnected are lost: while unsubscribed the cache
// serves nothing (every render is computed), reports itself not ready, and starts empty once
// subscribed again.
type Cache struct {
	mu      sync.Mutex
	gen     uint64
	entries map[string]Rendered

	subscribed atomic.Bool
	hits       atomic.Int64
	misses     atomic.Int64
}

// NewCache returns an empty, not yet subscribed cache.
func NewCache() *Cache { return &Cache{entries: map[string]Rendered{}} }

// get returns a cached render of node and the generation a render started now must carry.
func (c *Cache) get(node string) (Rendered, bool, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.subscribed.Load() {
		return Rendered{}, false, c.gen
	}
	r, ok := c.entries[node]
	return r, ok, c.gen
}

// put stores a render computed from generation gen, unless the cache was invalidated since.
func (c *Cache) put(node string, gen uint64, r Rendered) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen || !c.subscribed.Load() {
		return
	}
	c.entries[node] = r
}

// Invalidate drops every entry.
func (c *Cache) Invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.entries)
}

func (c *Cache) setSubscribed(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.entries)
	c.subscribed.Store(on)
}

// Ready reports whether the cache is subscribed to invalidations (nil) or why not.
func (c *Cache) Ready() error {
	if c.subscribed.Load() {
		return nil
	}
	return errors.New("pillar render cache: not subscribed to invalidations")
}

// Stats returns the cache's hit and miss counts.
func (c *Cache) Stats() (hits, misses int64) { return c.hits.Load(), c.misses.Load() }

// Listen keeps a session LISTENing on the invalidation channel until ctx ends, reconnecting
// after a loss; open opens a fresh session. Each (re)subscription starts the cache empty.
func (c *Cache) Listen(ctx context.Context, open func(context.Context) (*db.Session, error), schema string, logger *slog.Logger) {
	db.Subscribe(ctx, open, schema+".pillars", db.Listener{
		Subscribed: c.setSubscribed,
		Notify:     c.Invalidate,
		Lost: func(err error) {
			logger.WarnContext(ctx, "pillar cache unsubscribed; renders are computed until it subscribes again", "err", err)
		},
	})
}
