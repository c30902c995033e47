package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
)

// cachedReplica serves the API with the render cache wired as strata serve wires it: the
// cache LISTENs for invalidations, and (when sync) the replica's own writes invalidate it
// before they answer.
func cachedReplica(t testing.TB, sync bool) *testBundle {
	t.Helper()
	return cachedReplicaOn(t, pgtest.NewDatabaseURL(t), sync)
}

// cachedReplicaOn is cachedReplica on the database at url, which other replicas may share.
func cachedReplicaOn(t testing.TB, url string, sync bool) *testBundle {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	d, err := db.Open(ctx, db.Options{URL: url, MaxConns: 8})
	require.NoError(t, err)
	t.Cleanup(d.Close)
	tokens := auth.NewService(d)
	// Every replica of one database is given the same bootstrap token; the first creates it.
	const secret = "strata_rywBootstrapTokenForReplicasOfOneDB1234"
	_, err = tokens.Bootstrap(ctx, secret)
	require.NoError(t, err)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	pillars, cache := pillar.NewService(d), pillar.NewCache(0)
	pillars.UseCache(cache)
	go cache.Listen(ctx, func(ctx context.Context) (*db.Session, error) {
		return db.OpenSession(ctx, url, d.Schema(), "render ryw test")
	}, d.Schema(), quiet)
	resources := resource.NewService(d)
	if sync {
		resources.OnWrite(pillars.InvalidateCache)
	}
	// Writes of objects reach the cache through the change poller (migration 0036).
	hub := resource.NewHub(resources, func(ctx context.Context) (*db.Session, error) {
		return db.OpenSession(ctx, url, d.Schema(), "render ryw test: changes")
	}, quiet)
	cache.UseChangeFeed()
	hub.FeedRenders(cache)
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-hubDone })
	require.Eventually(t, func() bool { return cache.Ready() == nil }, 10*time.Second, 10*time.Millisecond)
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Tokens: tokens, Resources: resources, Pillars: pillars,
		MaxBodyBytes: 64 << 10, Version: "test", Logger: quiet}))
	t.Cleanup(srv.Close)
	return &testBundle{srv: srv, admin: secret, tokens: tokens}
}

// staleRenders runs n write → render pairs on one replica, cycling through every kind of
// write that can change a render (a node's pillar row, an org's row, a label that moves the
// node between selector groups, a static membership, a group deleted and created again, the
// mergeLists setting), each render issued right after the write's answer, and returns how
// many renders predated their write. Before each write the node is rendered, so the cache
// holds an entry the write makes stale.
func staleRenders(t *testing.T, b *testBundle, n int) (stale int) {
	t.Helper()
	must := func(status int, method, path, body string) {
		t.Helper()
		r := b.do(t, method, path, b.admin, strings.NewReader(body))
		require.Equal(t, status, r.status, "%s %s: %s", method, path, r.body)
	}
	must(201, "POST", "/v1/orgs", `{"metadata":{"name":"acme"}}`)
	must(201, "POST", "/v1/nodes", `{"metadata":{"name":"web01","labels":{"parity":"even"}},"spec":{"org":"acme"}}`)
	for _, p := range []string{"even", "odd"} {
		must(201, "POST", "/v1/orgs/acme/groups", `{"metadata":{"name":"`+p+`"},"spec":{"selector":"parity=`+p+`"}}`)
		must(201, "PUT", "/v1/orgs/acme/groups/"+p+"/pillars/parity", `{"parity":"`+p+`"}`)
	}
	must(201, "POST", "/v1/orgs/acme/groups", `{"metadata":{"name":"static"}}`)
	must(201, "PUT", "/v1/orgs/acme/groups/static/pillars/static", `{"static":true}`)
	must(201, "PUT", "/v1/pillars/global/lists", `{"list":["global"]}`)
	must(201, "PUT", "/v1/nodes/web01/pillars/lists", `{"list":["node"]}`)
	render := func() map[string]any {
		t.Helper()
		r := b.do(t, "GET", "/v1/nodes/web01/pillar", b.admin, nil)
		require.Equal(t, 200, r.status, string(r.body))
		var p map[string]any
		require.NoError(t, json.Unmarshal(r.body, &p))
		return p
	}
	member, groupThere, mergeLists := false, false, false
	for i := range n {
		render() // the cache holds the pillar from before the write
		var ok func(p map[string]any) bool
		switch i % 6 {
		case 0:
			must(200+boolInt(i < 6), "PUT", "/v1/nodes/web01/pillars/app", fmt.Sprintf(`{"v":%d}`, i))
			ok = func(p map[string]any) bool { return fmt.Sprint(p["v"]) == fmt.Sprint(i) }
		case 1:
			must(200+boolInt(i < 6), "PUT", "/v1/orgs/acme/pillars/org", fmt.Sprintf(`{"o":%d}`, i))
			ok = func(p map[string]any) bool { return fmt.Sprint(p["o"]) == fmt.Sprint(i) }
		case 2:
			parity := []string{"even", "odd"}[(i/6)%2]
			must(200, "PATCH", "/v1/nodes/web01", `{"metadata":{"labels":{"parity":"`+parity+`"}}}`)
			ok = func(p map[string]any) bool { return p["parity"] == parity }
		case 3:
			if member {
				must(204, "DELETE", "/v1/orgs/acme/groups/static/members/web01", "")
			} else {
				must(201, "PUT", "/v1/orgs/acme/groups/static/members/web01", "")
			}
			member = !member
			want := member
			ok = func(p map[string]any) bool { return (p["static"] == true) == want }
		case 4:
			if groupThere {
				must(204, "DELETE", "/v1/orgs/acme/groups/extra", "")
			} else {
				must(201, "POST", "/v1/orgs/acme/groups", `{"metadata":{"name":"extra"},"spec":{"selector":"!missing"}}`)
				must(201, "PUT", "/v1/orgs/acme/groups/extra/pillars/extra", `{"extra":true}`)
			}
			groupThere = !groupThere
			want := groupThere
			ok = func(p map[string]any) bool { return (p["extra"] == true) == want }
		case 5:
			mergeLists = !mergeLists
			must(200, "PUT", "/v1/pillar-settings", fmt.Sprintf(`{"mergeLists":%v}`, mergeLists))
			want := 1
			if mergeLists {
				want = 2
			}
			ok = func(p map[string]any) bool { l, _ := p["list"].([]any); return len(l) == want }
		}
		if !ok(render()) {
			stale++
		}
	}
	return stale
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestRenderReadsItsWrites is item 0 of issue 17: on one replica, 12 of 300 renders issued
// right after an acknowledged write returned the pillar from before it (the invalidation came
// by NOTIFY after the answer). The replica's own writes now invalidate its cache before they
// answer: 1,200 write → render pairs of every kind, none stale. The control, the same
// replica without the synchronous invalidation (NOTIFY only), is seen serving stale renders.
func TestRenderReadsItsWrites(t *testing.T) {
	t.Parallel()
	t.Run("synchronous", func(t *testing.T) {
		t.Parallel()
		require.Zero(t, staleRenders(t, cachedReplica(t, true), 1200), "renders that predate a write this replica acknowledged")
	})
	t.Run("control", func(t *testing.T) {
		t.Parallel()
		stale := staleRenders(t, cachedReplica(t, false), 1200)
		t.Logf("without the synchronous invalidation: %d of 1200 renders were stale", stale)
		require.NotZero(t, stale, "with NOTIFY alone some renders predate their write, so the test can fail")
	})
}

// TestStrictRenderAcrossReplicas: a write through replica A is seen at once by a render on
// replica B that asks for it with Cache-Control: no-cache, although B's cache learns of the
// write only when A's notification arrives. The control, the same renders without the
// header, is seen answering from before the write.
func TestStrictRenderAcrossReplicas(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabaseURL(t)
	a, b := cachedReplicaOn(t, url, true), cachedReplicaOn(t, url, true)
	must := func(r response, status int) {
		t.Helper()
		require.Equal(t, status, r.status, string(r.body))
	}
	must(a.do(t, "POST", "/v1/orgs", a.admin, strings.NewReader(`{"metadata":{"name":"acme"}}`)), 201)
	must(a.do(t, "POST", "/v1/nodes", a.admin, strings.NewReader(`{"metadata":{"name":"web01"},"spec":{"org":"acme"}}`)), 201)
	value := func(r response) string {
		t.Helper()
		must(r, 200)
		var p map[string]any
		require.NoError(t, json.Unmarshal(r.body, &p))
		return fmt.Sprint(p["v"])
	}
	strictStale, plainStale := 0, 0
	for i := range 400 {
		strict := i%2 == 0
		hdr := []string{}
		if strict {
			hdr = []string{"Cache-Control", "no-cache"}
		}
		b.do(t, "GET", "/v1/nodes/web01/pillar", b.admin, nil) // B caches the pillar before the write
		must(a.do(t, "PUT", "/v1/nodes/web01/pillars/app", a.admin, strings.NewReader(fmt.Sprintf(`{"v":%d}`, i))), 200+boolInt(i == 0))
		if value(b.do(t, "GET", "/v1/nodes/web01/pillar", b.admin, nil, hdr...)) != fmt.Sprint(i) {
			if strict {
				strictStale++
			} else {
				plainStale++
			}
		}
	}
	t.Logf("renders on B right after A's write: %d of 200 without the header predated it", plainStale)
	require.Zero(t, strictStale, "Cache-Control: no-cache renders what is committed")
	require.NotZero(t, plainStale, "without the header B may answer from its cache until the notification arrives (the control)")
}

// BenchmarkCrossReplicaStaleness measures how long after a write through replica A has
// answered replica B's cached render still predates it: A writes, B renders (from its cache)
// until it shows the write. It reports the p50, p99 and max in microseconds (the staleness
// bound docs/benchmarks.md states).
func BenchmarkCrossReplicaStaleness(bm *testing.B) {
	url := pgtest.NewDatabaseURL(bm)
	a, b := cachedReplicaOn(bm, url, true), cachedReplicaOn(bm, url, true)
	a.do(bm, "POST", "/v1/orgs", a.admin, strings.NewReader(`{"metadata":{"name":"acme"}}`))
	a.do(bm, "POST", "/v1/nodes", a.admin, strings.NewReader(`{"metadata":{"name":"web01"},"spec":{"org":"acme"}}`))
	var lat []time.Duration
	for i := 0; bm.Loop(); i++ {
		b.do(bm, "GET", "/v1/nodes/web01/pillar", b.admin, nil)
		a.do(bm, "PUT", "/v1/nodes/web01/pillars/app", a.admin, strings.NewReader(fmt.Sprintf(`{"v":%d}`, i)))
		done := time.Now()
		for {
			r := b.do(bm, "GET", "/v1/nodes/web01/pillar", b.admin, nil)
			if strings.Contains(string(r.body), fmt.Sprintf(`"v":%d}`, i)) {
				break
			}
		}
		lat = append(lat, time.Since(done))
	}
	reportLatencies(bm, lat)
}

// BenchmarkCrossReplicaStalenessObjectWrite is BenchmarkCrossReplicaStaleness for a write of
// an object: a label PATCH that moves the node between two selector groups. Such a write
// sends no notification inside its transaction (migration 0036): B's render changes when A's
// announcement wakes B's change poller and the poller reads the change row that names it.
func BenchmarkCrossReplicaStalenessObjectWrite(bm *testing.B) {
	url := pgtest.NewDatabaseURL(bm)
	a, b := cachedReplicaOn(bm, url, true), cachedReplicaOn(bm, url, true)
	a.do(bm, "POST", "/v1/orgs", a.admin, strings.NewReader(`{"metadata":{"name":"acme"}}`))
	a.do(bm, "POST", "/v1/nodes", a.admin, strings.NewReader(`{"metadata":{"name":"web01","labels":{"parity":"even"}},"spec":{"org":"acme"}}`))
	for _, p := range []string{"even", "odd"} {
		a.do(bm, "POST", "/v1/orgs/acme/groups", a.admin, strings.NewReader(`{"metadata":{"name":"`+p+`"},"spec":{"selector":"parity=`+p+`"}}`))
		a.do(bm, "PUT", "/v1/orgs/acme/groups/"+p+"/pillars/parity", a.admin, strings.NewReader(`{"parity":"`+p+`"}`))
	}
	var lat []time.Duration
	for i := 0; bm.Loop(); i++ {
		parity := []string{"odd", "even"}[i%2]
		b.do(bm, "GET", "/v1/nodes/web01/pillar", b.admin, nil)
		if r := a.do(bm, "PATCH", "/v1/nodes/web01", a.admin, strings.NewReader(`{"metadata":{"labels":{"parity":"`+parity+`"}}}`)); r.status != 200 {
			bm.Fatalf("PATCH: %d %s", r.status, r.body)
		}
		done := time.Now()
		for {
			r := b.do(bm, "GET", "/v1/nodes/web01/pillar", b.admin, nil)
			if strings.Contains(string(r.body), `"parity":"`+parity+`"`) {
				break
			}
		}
		lat = append(lat, time.Since(done))
	}
	reportLatencies(bm, lat)
}

// reportLatencies reports the p50, p99 and max of lat in microseconds.
func reportLatencies(bm *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) }
	bm.ReportMetric(q(0.5), "p50-µs")
	bm.ReportMetric(q(0.99), "p99-µs")
	bm.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}
