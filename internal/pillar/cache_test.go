package pillar_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
)

// replica is one strata replica's pillar service with its own pool and its own cache, fed
// as the server feeds it: by the "<schema>.pillars" notifications and by its change poller.
type replica struct {
	db    *db.DB
	res   *resource.Service
	svc   *pillar.Service
	cache *pillar.Cache
	hub   *resource.Hub
}

func newReplica(t *testing.T, url string) *replica {
	return newReplicaPolling(t, url, 0)
}

// newReplicaPolling is newReplica whose change poller polls every interval (0: the default)
// when no announcement wakes it.
func newReplicaPolling(t *testing.T, url string, interval time.Duration) *replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	d, err := db.Open(ctx, db.Options{URL: url})
	require.NoError(t, err)
	t.Cleanup(d.Close)
	r := &replica{db: d, res: resource.NewService(d), svc: pillar.NewService(d), cache: pillar.NewCache(0)}
	r.res.OnWrite(r.svc.InvalidateCache)
	r.svc.UseCache(r.cache)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	go r.cache.Listen(ctx, func(ctx context.Context) (*db.Session, error) {
		return db.OpenSession(ctx, url, d.Schema(), "pillar cache test")
	}, d.Schema(), logger)
	r.hub = resource.NewHub(r.res, func(ctx context.Context) (*db.Session, error) {
		return db.OpenSession(ctx, url, d.Schema(), "pillar cache test: changes")
	}, logger)
	if interval > 0 {
		r.hub.PollInterval = interval
	}
	r.cache.UseChangeFeed()
	r.hub.FeedRenders(r.cache)
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); r.hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-hubDone })
	require.Eventually(t, func() bool { return r.cache.Ready() == nil }, 10*time.Second, 10*time.Millisecond)
	return r
}

func (r *replica) port(t *testing.T) string {
	t.Helper()
	out, err := r.svc.Render(context.Background(), r.res, "web01", false)
	require.NoError(t, err)
	b, _ := json.Marshal(out.Decoded()["port"])
	return string(b)
}

// drained waits until b has sent its announcements and r's change poller has read every
// change in the log, so no invalidation of an earlier object write is still on its way to r.
func (r *replica) drained(t *testing.T, b *replica) {
	t.Helper()
	ctx := context.Background()
	b.db.FlushAnnouncements(ctx)
	var newest int64
	require.NoError(t, b.db.QueryRow(ctx, &db.Query{Name: "newest", Text: `SELECT coalesce(max(resource_version), 0) FROM {{schema}}.changes`}).Scan(&newest))
	require.Eventually(t, func() bool { return r.hub.Head() >= newest }, 10*time.Second, 5*time.Millisecond, "the change poller reads the log up to %d", newest)
}

// servedFromCache waits until r renders web01's port as want from its cache (once the
// notifications of earlier writes have arrived, a render is a hit).
func (r *replica) servedFromCache(t *testing.T, want string) {
	t.Helper()
	require.Eventually(t, func() bool {
		require.Equal(t, want, r.port(t))
		hits, _ := r.cache.Stats()
		require.Equal(t, want, r.port(t))
		hits2, _ := r.cache.Stats()
		return hits2 == hits+1
	}, 5*time.Second, 10*time.Millisecond, "renders are served from the cache")
}

// seedAcme creates, through r, org acme, its node web01 (no labels) and its group web
// selecting role=web.
func seedAcme(t *testing.T, r *replica) {
	t.Helper()
	ctx := context.Background()
	_, err := r.res.Create(ctx, resource.Ref{Kind: resource.KindOrg, Name: "acme"}, api.Object{})
	require.NoError(t, err)
	_, err = r.res.Create(ctx, resource.Ref{Kind: resource.KindNode, Name: "web01"}, node("acme", nil))
	require.NoError(t, err)
	_, err = r.res.Create(ctx, resource.Ref{Kind: resource.KindGroup, Org: "acme", Name: "web"}, api.Object{Spec: json.RawMessage(`{"selector":"role=web"}`)})
	require.NoError(t, err)
}

// TestCacheInvalidatedAcrossReplicas: replica A serves a node's pillar from its cache; writes
// through replica B — to the pillar, to the node's labels (its groups' selectors), to a
// membership — reach A's renders through the notification, not through expiry.
func TestCacheInvalidatedAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabaseURL(t)
	a, b := newReplica(t, url), newReplica(t, url)
	seedAcme(t, b)
	_, _, err := b.svc.Put(ctx, pillar.Global, "app", obj(t, `{"port": 1}`), "", "t")
	require.NoError(t, err)

	// Once the notifications of the setup writes have arrived, renders come from the cache.
	a.servedFromCache(t, "1")

	visible := func(want string, change func()) {
		t.Helper()
		start := time.Now()
		change()
		require.Eventually(t, func() bool { return a.port(t) == want }, 5*time.Second, 5*time.Millisecond)
		t.Logf("change visible on the other replica after %v", time.Since(start))
	}
	visible("2", func() {
		_, _, err := b.svc.Put(ctx, pillar.Global, "app", obj(t, `{"port": 2}`), "", "t")
		require.NoError(t, err)
	})
	_, _, err = b.svc.Put(ctx, pillar.Target{Kind: "group", Org: "acme", Group: "web"}, "app", obj(t, `{"port": 3}`), "", "t")
	require.NoError(t, err)
	visible("3", func() { // the node gains the label its group selects
		_, err := b.res.Patch(ctx, resource.Ref{Kind: resource.KindNode, Name: "web01"}, []byte(`{"metadata":{"labels":{"role":"web"}}}`))
		require.NoError(t, err)
	})
	_, err = b.res.Create(ctx, resource.Ref{Kind: resource.KindGroup, Org: "acme", Name: "zz"}, api.Object{Spec: json.RawMessage(`{"priority": 9}`)})
	require.NoError(t, err)
	_, _, err = b.svc.Put(ctx, pillar.Target{Kind: "group", Org: "acme", Group: "zz"}, "app", obj(t, `{"port": 4}`), "", "t")
	require.NoError(t, err)
	visible("4", func() { // a static membership
		_, err := b.res.AddMember(ctx, "acme", "zz", "web01")
		require.NoError(t, err)
	})
	visible("3", func() { // deleting a group deletes its rows and changes its members' pillar
		require.NoError(t, b.res.Delete(ctx, resource.Ref{Kind: resource.KindGroup, Org: "acme", Name: "zz"}, "", false))
	})
	var rows int
	require.NoError(t, b.db.QueryRow(ctx, &db.Query{Name: "n", Text: `SELECT count(*) FROM strata.pillars WHERE target_kind = 'Group'`}).Scan(&rows))
	require.Equal(t, 1, rows, "only the remaining group's row is left")
}

// TestCacheUnsubscribedServesNothing: when the listening session is lost, the cache reports
// not ready and serves nothing until it has subscribed again (notifications sent meanwhile
// are lost, so nothing cached before may be trusted); then it starts empty.
func TestCacheUnsubscribedServesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabaseURL(t)
	a := newReplica(t, url)
	_, err := a.res.Create(ctx, resource.Ref{Kind: resource.KindOrg, Name: "acme"}, api.Object{})
	require.NoError(t, err)
	_, err = a.res.Create(ctx, resource.Ref{Kind: resource.KindNode, Name: "web01"}, node("acme", nil))
	require.NoError(t, err)
	_, _, err = a.svc.Put(ctx, pillar.Global, "app", obj(t, `{"port": 1}`), "", "t")
	require.NoError(t, err)
	require.Equal(t, "1", a.port(t))

	// Cut the listener off and change the pillar behind its back, while it is away. Only this
	// test's database: pg_stat_activity is the whole cluster's, and the listeners of the
	// package's other cache tests, running in parallel on their own databases, carry the same
	// application name (killing them made TestCacheInvalidationIsScoped fail in CI, its cache
	// emptied by the resubscription).
	_, err = a.db.Exec(ctx, &db.Query{Name: "kill", Text: `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'pillar cache test' AND datname = current_database()`})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return a.cache.Ready() != nil }, 5*time.Second, 5*time.Millisecond, "a lost subscription is reported")
	_, err = a.db.Exec(ctx, &db.Query{Name: "sneak", Text: `UPDATE strata.pillars SET data = '{"port": 2}'`})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return a.cache.Ready() == nil }, 10*time.Second, 10*time.Millisecond, "it subscribes again")
	require.Equal(t, "2", a.port(t), "nothing cached before the loss is served after it")
}

// TestCacheInvalidatedByPlainSQL: migration 0010 promises that any writer of the tables a
// render reads invalidates every replica's cache, not only strata's API (whose writes also
// touch resources). Labels and static memberships changed with plain SQL through replica B,
// touching no other table, change replica A's render.
func TestCacheInvalidatedByPlainSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabaseURL(t)
	a, b := newReplica(t, url), newReplica(t, url)
	seedAcme(t, b)
	_, err := b.res.Create(ctx, resource.Ref{Kind: resource.KindGroup, Org: "acme", Name: "zz"}, api.Object{Spec: json.RawMessage(`{"priority": 9}`)})
	require.NoError(t, err)
	_, _, err = b.svc.Put(ctx, pillar.Global, "app", obj(t, `{"port": 1}`), "", "t")
	require.NoError(t, err)
	_, _, err = b.svc.Put(ctx, pillar.Target{Kind: "group", Org: "acme", Group: "web"}, "app", obj(t, `{"port": 3}`), "", "t")
	require.NoError(t, err)
	_, _, err = b.svc.Put(ctx, pillar.Target{Kind: "group", Org: "acme", Group: "zz"}, "app", obj(t, `{"port": 4}`), "", "t")
	require.NoError(t, err)
	a.servedFromCache(t, "1")

	sql := func(want, text string) {
		t.Helper()
		_, err := b.db.Exec(ctx, &db.Query{Name: "plain", Text: text})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return a.port(t) == want }, 5*time.Second, 5*time.Millisecond, text)
	}
	sql("3", `INSERT INTO {{schema}}.labels (resource_id, key_name, value)
		SELECT id, 'role', 'web' FROM {{schema}}.resources WHERE kind = 'Node' AND name = 'web01'`)
	sql("4", `INSERT INTO {{schema}}.group_members (group_id, node_id)
		SELECT g.id, n.id FROM {{schema}}.resources g, {{schema}}.resources n
		WHERE g.kind = 'Group' AND g.name = 'zz' AND n.kind = 'Node' AND n.name = 'web01'`)
	sql("3", `DELETE FROM {{schema}}.group_members`)
	sql("1", `DELETE FROM {{schema}}.labels`)
}

// TestCacheInvalidationIsScoped (issue 17, item 4): every write flushed every replica's whole
// cache. Now a write through replica B drops on replica A only the renders it can change —
// a node's row or labels or membership: that node; an org's row or one of its groups: the
// org's nodes; a global row or a setting: all — seen on A both as the changed render and as
// the untouched renders still being served from its cache (a hit).
func TestCacheInvalidationIsScoped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabaseURL(t)
	a, b := newReplica(t, url), newReplica(t, url)
	for _, org := range []string{"acme", "other"} {
		_, err := b.res.Create(ctx, resource.Ref{Kind: resource.KindOrg, Name: org}, api.Object{})
		require.NoError(t, err)
	}
	for _, n := range []struct{ name, org string }{{"web01", "acme"}, {"web02", "acme"}, {"db01", "other"}, {"sentinel", "other"}} {
		_, err := b.res.Create(ctx, resource.Ref{Kind: resource.KindNode, Name: n.name}, node(n.org, map[string]string{"role": "web"}))
		require.NoError(t, err)
	}
	_, err := b.res.Create(ctx, resource.Ref{Kind: resource.KindGroup, Org: "acme", Name: "web"}, api.Object{Spec: json.RawMessage(`{"selector":"role=web"}`)})
	require.NoError(t, err)
	nodes := []string{"web01", "web02", "db01"}
	render := func(n string) map[string]any {
		t.Helper()
		out, err := a.svc.Render(ctx, a.res, n, false)
		require.NoError(t, err)
		return out.Decoded()
	}
	// cached reports whether A serves n from its cache now.
	cached := func(n string) bool {
		t.Helper()
		h, _ := a.cache.Stats()
		render(n)
		h2, _ := a.cache.Stats()
		return h2 > h
	}
	// The setup's own notifications reach A when they do: start once A serves all from cache.
	require.Eventually(t, func() bool {
		all := true
		for _, n := range nodes {
			all = cached(n) && all
		}
		return all
	}, 5*time.Second, 10*time.Millisecond)
	for i, step := range []struct {
		what    string
		write   func()
		changed []string // the renders the write changes (A must show it)
		kept    []string // the renders A keeps serving from its cache
	}{
		{"a group's row", func() {
			_, _, err := b.svc.Put(ctx, pillar.Target{Kind: "group", Org: "acme", Group: "web"}, "g", obj(t, `{"grp":3}`), "", "t")
			require.NoError(t, err)
		}, []string{"web01", "web02"}, []string{"db01"}},
		{"a node's row", func() {
			_, _, err := b.svc.Put(ctx, pillar.Target{Kind: "node", Node: "web01"}, "c", obj(t, `{"v":1}`), "", "t")
			require.NoError(t, err)
		}, []string{"web01"}, []string{"web02", "db01"}},
		{"a node's labels", func() {
			_, err := b.res.Patch(ctx, resource.Ref{Kind: resource.KindNode, Name: "web02"}, []byte(`{"metadata":{"labels":{"role":"db"}}}`))
			require.NoError(t, err)
		}, []string{"web02"}, []string{"web01", "db01"}},
		{"a membership", func() {
			_, err := b.res.AddMember(ctx, "acme", "web", "web02")
			require.NoError(t, err)
		}, []string{"web02"}, []string{"web01", "db01"}},
		{"an org's row", func() {
			_, _, err := b.svc.Put(ctx, pillar.Target{Kind: "org", Org: "other"}, "c", obj(t, `{"v":5}`), "", "t")
			require.NoError(t, err)
		}, []string{"db01"}, []string{"web01", "web02"}},
		{"a global row", func() {
			_, _, err := b.svc.Put(ctx, pillar.Global, "c", obj(t, `{"g":6}`), "", "t")
			require.NoError(t, err)
		}, nodes, nil},
	} {
		// Drain: the previous step's notifications may still be on their way to A (a write
		// can notify more than once) and would drop renders this step expects kept. A write to
		// the sentinel node's own row notifies only node:sentinel; notifications reach A in
		// commit order on one session, so once A's render of the sentinel shows it, every
		// earlier one has been handled. Writes of objects reach A by a second way too, B's
		// announcements and A's change poller (migration 0036): B has sent every one and A's
		// poller has read every change first.
		a.drained(t, b)
		render("sentinel")
		require.Eventually(t, func() bool { return cached("sentinel") }, 5*time.Second, 5*time.Millisecond)
		_, _, err := b.svc.Put(ctx, pillar.Target{Kind: "node", Node: "sentinel"}, "s", obj(t, fmt.Sprintf(`{"step":%d}`, i)), "", "t")
		require.NoError(t, err)
		require.Eventually(t, func() bool { return fmt.Sprint(render("sentinel")["step"]) == fmt.Sprint(i) }, 5*time.Second, 5*time.Millisecond,
			"%d %s: A sees the sentinel's write", i, step.what)
		before := map[string]string{}
		for _, n := range nodes {
			before[n] = fmt.Sprint(render(n)) // and cached
		}
		// Every invalidation advances the cache's generation, so a render that overlapped
		// any notification (even the sentinel's second one) was not stored: render until each
		// is served from the cache. Stored entries are dropped only by their own scopes, which
		// is what the kept check below asserts.
		for _, n := range nodes {
			require.Eventually(t, func() bool { return cached(n) }, 5*time.Second, 5*time.Millisecond,
				"%s: %s is cached before the write", step.what, n)
		}
		step.write()
		for _, n := range step.changed {
			require.Eventually(t, func() bool { return fmt.Sprint(render(n)) != before[n] }, 5*time.Second, 5*time.Millisecond,
				"%d %s: A's render of %s shows the write", i, step.what, n)
		}
		for _, n := range step.kept {
			require.True(t, cached(n), "%d %s: A still serves %s from its cache", i, step.what, n)
		}
	}
}

// TestCacheInvalidatedFromTheChangeLog (issue 31, item 4; migration 0036): a write of an
// object notifies no render cache inside its transaction; it stamps the renders it alters in
// the change log and announces itself after COMMIT. A writer that dies in between never
// announces: the other replicas' pollers still find the change at their next poll and drop
// the render. Replica A2 polls every 100 ms and must show the write; A1, which polls once an
// hour, is the control: it must still serve the old render from its cache once A2 shows the
// new one, so nothing but the poll (no notification) carried the change.
func TestCacheInvalidatedFromTheChangeLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabaseURL(t)
	b := newReplica(t, url)
	seedAcme(t, b)
	_, _, err := b.svc.Put(ctx, pillar.Global, "app", obj(t, `{"port": 1}`), "", "t")
	require.NoError(t, err)
	_, _, err = b.svc.Put(ctx, pillar.Target{Kind: "group", Org: "acme", Group: "web"}, "app", obj(t, `{"port": 3}`), "", "t")
	require.NoError(t, err)
	a1, a2 := newReplicaPolling(t, url, time.Hour), newReplicaPolling(t, url, 100*time.Millisecond)
	b.db.FlushAnnouncements(ctx)
	for _, a := range []*replica{a1, a2} {
		a.servedFromCache(t, "1")
	}

	// The node gains the label its group selects; B "dies" before announcing it.
	_, err = b.res.Patch(db.WithoutAnnouncement(ctx), resource.Ref{Kind: resource.KindNode, Name: "web01"}, []byte(`{"metadata":{"labels":{"role":"web"}}}`))
	require.NoError(t, err)
	var scope *string
	require.NoError(t, b.db.QueryRow(ctx, &db.Query{Name: "scope", Text: `SELECT render_scope FROM {{schema}}.changes ORDER BY resource_version DESC LIMIT 1`}).Scan(&scope))
	require.NotNil(t, scope)
	require.Equal(t, "node:web01", *scope, "the change row names the render it alters")
	require.Eventually(t, func() bool { return a2.port(t) == "3" }, 5*time.Second, 10*time.Millisecond, "the poll finds the change")
	require.Equal(t, "1", a1.port(t), "control: without the poll nothing told the replica")
	hits, _ := a1.cache.Stats()
	require.Equal(t, "1", a1.port(t))
	hits2, _ := a1.cache.Stats()
	require.Equal(t, hits+1, hits2, "control: the stale render came from the cache")
}
