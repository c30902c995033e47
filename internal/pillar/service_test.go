package pillar_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type bundle struct {
	db  *db.DB
	res *resource.Service
	svc *pillar.Service
}

func setup(t *testing.T) *bundle {
	t.Helper()
	d := pgtest.NewDB(t)
	return &bundle{db: d, res: resource.NewService(d), svc: pillar.NewService(d)}
}

func obj(t *testing.T, s string) map[string]any {
	t.Helper()
	m, err := pillar.DecodeObject([]byte(s))
	require.NoError(t, err)
	return m
}

func (b *bundle) mk(t *testing.T, ref resource.Ref, o api.Object) {
	t.Helper()
	_, err := b.res.Create(context.Background(), ref, o)
	require.NoError(t, err)
}

func node(org string, labels map[string]string) api.Object {
	return api.Object{Metadata: api.ObjectMeta{Labels: labels}, Spec: json.RawMessage(`{"org":"` + org + `"}`)}
}

// TestPutGetDeleteEveryTarget: rows of the four targets, ETags and If-Match, 404 for an
// unknown target, 422 for a body that is not an object, and rows deleted with their target.
func TestPutGetDeleteEveryTarget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.mk(t, resource.Ref{Kind: resource.KindOrg, Name: "acme"}, api.Object{})
	b.mk(t, resource.Ref{Kind: resource.KindGroup, Org: "acme", Name: "web"}, api.Object{})
	b.mk(t, resource.Ref{Kind: resource.KindNode, Name: "web01"}, node("acme", nil))
	for _, tg := range []pillar.Target{pillar.Global, {Kind: "org", Org: "acme"}, {Kind: "group", Org: "acme", Group: "web"}, {Kind: "node", Node: "web01"}} {
		p, created, err := b.svc.Put(ctx, tg, "app", obj(t, `{"port": 80, "big": 12345678901234567890123}`), "", "alice")
		require.NoError(t, err, tg)
		require.True(t, created)
		got, err := b.svc.Get(ctx, tg, "app")
		require.NoError(t, err)
		require.Equal(t, p.ETag, got.ETag)
		b2, _ := json.Marshal(got.Data)
		require.JSONEq(t, `{"port": 80, "big": 12345678901234567890123}`, string(b2))
		require.Contains(t, string(b2), "12345678901234567890123")

		_, _, err = b.svc.Put(ctx, tg, "app", obj(t, `{"port": 81}`), `"stale"`, "bob")
		require.Equal(t, fault.KindPreconditionFailed, fault.KindOf(err), tg)
		p2, created, err := b.svc.Put(ctx, tg, "app", obj(t, `{"port": 81}`), p.ETag, "bob")
		require.NoError(t, err)
		require.False(t, created)
		require.NotEqual(t, p.ETag, p2.ETag)
		require.Equal(t, fault.KindPreconditionFailed, fault.KindOf(b.svc.Delete(ctx, tg, "app", p.ETag, "bob")))
		cats, err := b.svc.Categories(ctx, tg)
		require.NoError(t, err)
		require.Len(t, cats, 1)
	}
	_, _, err := b.svc.Put(ctx, pillar.Target{Kind: "node", Node: "ghost"}, "app", obj(t, `{}`), "", "x")
	require.Equal(t, fault.KindNotFound, fault.KindOf(err))
	_, _, err = b.svc.Put(ctx, pillar.Global, "Bad Category", obj(t, `{}`), "", "x")
	require.Equal(t, fault.KindInvalid, fault.KindOf(err))
	for _, bad := range []string{`[1]`, `"x"`, `null`, `3`} {
		_, err := pillar.DecodeObject([]byte(bad))
		require.Equal(t, fault.KindUnprocessable, fault.KindOf(err), bad)
	}

	// Deleting the node deletes its pillar rows, in the same transaction; the history stays.
	require.NoError(t, b.res.Delete(ctx, resource.Ref{Kind: resource.KindNode, Name: "web01"}, "", false))
	var n int
	require.NoError(t, b.db.QueryRow(ctx, &db.Query{Name: "n", Text: `SELECT count(*) FROM strata.pillars WHERE target_kind = 'Node'`}).Scan(&n))
	require.Zero(t, n)
	h, err := b.svc.History(ctx, pillar.Target{Kind: "node", Node: "web01"}, "app", 0, 10)
	require.NoError(t, err)
	require.Len(t, h, 2)
}

// TestGlobalRowsNeverRepeat: concurrent creators of one global category end with one row
// (UNIQUE NULLS NOT DISTINCT), and every Put succeeds (the losers update it).
func TestGlobalRowsNeverRepeat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := b.svc.Put(ctx, pillar.Global, "common", obj(t, fmt.Sprintf(`{"writer": %d}`, i)), "", "w")
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var n int
	require.NoError(t, b.db.QueryRow(ctx, &db.Query{Name: "n", Text: `SELECT count(*) FROM strata.pillars WHERE resource_id IS NULL`}).Scan(&n))
	require.Equal(t, 1, n)
	h, err := b.svc.History(ctx, pillar.Global, "common", 0, 100)
	require.NoError(t, err)
	require.Len(t, h, 16, "every write is in the history")
}

// TestRenderOrder: global, org, the node's groups (priority, then name; selector or static;
// never another org's groups), then the node; categories in byte order inside a target.
func TestRenderOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	for _, o := range []string{"acme", "beta"} {
		b.mk(t, resource.Ref{Kind: resource.KindOrg, Name: o}, api.Object{})
	}
	b.mk(t, resource.Ref{Kind: resource.KindNode, Name: "web01"}, node("acme", map[string]string{"role": "web"}))
	groups := map[string]string{
		"hi":     `{"priority": 10, "selector": "role=web"}`,
		"lo":     `{"priority": -5}`,
		"mid-a":  `{"priority": 0, "selector": "role=web"}`,
		"mid-b":  `{"priority": 0, "selector": "role=web"}`,
		"other":  `{"priority": 99, "selector": "role=db"}`,
		"static": `{"priority": 5}`,
	}
	for g, spec := range groups {
		b.mk(t, resource.Ref{Kind: resource.KindGroup, Org: "acme", Name: g}, api.Object{Spec: json.RawMessage(spec)})
	}
	b.mk(t, resource.Ref{Kind: resource.KindGroup, Org: "beta", Name: "hi"}, api.Object{Spec: json.RawMessage(`{"priority": 100, "selector": "role=web"}`)})
	_, err := b.res.AddMember(ctx, "acme", "static", "web01")
	require.NoError(t, err)
	_, err = b.res.AddMember(ctx, "acme", "lo", "web01")
	require.NoError(t, err)

	put := func(tg pillar.Target, cat, data string) {
		_, _, err := b.svc.Put(ctx, tg, cat, obj(t, data), "", "t")
		require.NoError(t, err)
	}
	put(pillar.Global, "a_b", `{"who":"global a_b","g":1}`)
	put(pillar.Global, "a-b", `{"who":"global a-b"}`)
	put(pillar.Global, "a.b", `{"who":"global a.b"}`)
	put(pillar.Target{Kind: "org", Org: "acme"}, "x", `{"who":"org"}`)
	put(pillar.Target{Kind: "org", Org: "beta"}, "x", `{"who":"org beta", "beta": true}`)
	for g := range groups {
		put(pillar.Target{Kind: "group", Org: "acme", Group: g}, "x", `{"who":"group `+g+`","`+g+`":true}`)
	}
	put(pillar.Target{Kind: "group", Org: "beta", Group: "hi"}, "x", `{"who":"beta group","leak":true}`)

	layers, err := b.svc.Layers(ctx, pillar.NodeInfo{Name: "web01", Org: "acme", Labels: map[string]string{"role": "web"}})
	require.NoError(t, err)
	var order []string
	for _, l := range layers {
		order = append(order, l.Target+":"+l.Category)
	}
	require.Equal(t, []string{
		"global:a-b", "global:a.b", "global:a_b",
		"org/acme:x",
		"group/acme/lo:x", "group/acme/mid-a:x", "group/acme/mid-b:x", "group/acme/static:x", "group/acme/hi:x",
	}, order)

	put(pillar.Target{Kind: "node", Node: "web01"}, "x", `{"who":"node"}`)
	r, err := b.svc.Render(ctx, b.res, "web01", false)
	require.NoError(t, err)
	out, _ := json.Marshal(r.Decoded())
	require.JSONEq(t, `{"who":"node","g":1,"lo":true,"mid-a":true,"mid-b":true,"static":true,"hi":true}`, string(out))
	r2, err := b.svc.Render(ctx, b.res, "web01", true)
	require.NoError(t, err)
	require.Equal(t, r.ETag, r2.ETag)
	require.NotEmpty(t, r2.Explanation)
	_, err = b.svc.Render(ctx, b.res, "ghost", false)
	require.Equal(t, fault.KindNotFound, fault.KindOf(err))
}

// TestHistoryAndRestore: every change is recorded with who, old and new value; a restore
// writes an old value back as a new change.
func TestHistoryAndRestore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	for i, who := range []string{"alice", "bob", "carol"} {
		_, _, err := b.svc.Put(ctx, pillar.Global, "app", obj(t, fmt.Sprintf(`{"v": %d}`, i)), "", who)
		require.NoError(t, err)
	}
	require.NoError(t, b.svc.Delete(ctx, pillar.Global, "app", "", "dave"))
	h, err := b.svc.History(ctx, pillar.Global, "app", 0, 10)
	require.NoError(t, err)
	require.Len(t, h, 4)
	require.Equal(t, "dave", h[0].Actor)
	require.Nil(t, h[0].New)
	require.Equal(t, "alice", h[3].Actor)
	require.Nil(t, h[3].Old)
	_, err = b.svc.Restore(ctx, pillar.Global, "app", h[0].ID, "", "erin")
	require.Equal(t, fault.KindUnprocessable, fault.KindOf(err), "a deletion has no value to restore")
	p, err := b.svc.Restore(ctx, pillar.Global, "app", h[2].ID, "", "erin") // bob's {"v":1}
	require.NoError(t, err)
	out, _ := json.Marshal(p.Data)
	require.JSONEq(t, `{"v":1}`, string(out))
	h, err = b.svc.History(ctx, pillar.Global, "app", 0, 1)
	require.NoError(t, err)
	require.Equal(t, "erin", h[0].Actor)
	page2, err := b.svc.History(ctx, pillar.Global, "app", h[0].ID, 10)
	require.NoError(t, err)
	require.Len(t, page2, 4)

	// The audit log has every change too, with who made it.
	var sets, deletes int
	require.NoError(t, b.db.QueryRow(ctx, &db.Query{Name: "audit", Text: `SELECT count(*) FILTER (WHERE action = 'pillar.set'), count(*) FILTER (WHERE action = 'pillar.delete') FROM strata.audit_log WHERE target = 'global/app'`}).Scan(&sets, &deletes))
	require.Equal(t, 4, sets) // alice, bob, carol, erin's restore
	require.Equal(t, 1, deletes)
}
