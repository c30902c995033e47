package httpapi_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkColdRender is one uncached render over HTTP (no render cache, as with
// --session-database-url off): the node, its org, two groups and eight pillar rows of about
// 1 KB each, merged, authenticated with a token. It is what a cold render costs strata on top
// of PostgreSQL's work.
func BenchmarkColdRender(b *testing.B) {
	bundle := setup(b)
	must := func(method, path, body string) {
		r := bundle.do(b, method, path, bundle.admin, strings.NewReader(body))
		if r.status >= 300 {
			b.Fatalf("%s %s: %d %s", method, path, r.status, r.body)
		}
	}
	must("POST", "/v1/orgs", `{"metadata":{"name":"acme"}}`)
	must("POST", "/v1/nodes", `{"metadata":{"name":"web01","labels":{"role":"web"}},"spec":{"org":"acme"}}`)
	must("POST", "/v1/orgs/acme/groups", `{"metadata":{"name":"web"},"spec":{"selector":"role=web"}}`)
	must("POST", "/v1/orgs/acme/groups", `{"metadata":{"name":"all"},"spec":{"selector":"!none"}}`)
	row := func(i int) string {
		var sb strings.Builder
		sb.WriteString(`{"svc`)
		fmt.Fprint(&sb, i)
		sb.WriteString(`":{`)
		for k := range 20 {
			if k > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, `"key%02d":"value-%02d-%s"`, k, k, strings.Repeat("x", 30))
		}
		sb.WriteString(`}}`)
		return sb.String()
	}
	for i, target := range []string{"/v1/pillars/global", "/v1/orgs/acme/pillars", "/v1/orgs/acme/groups/web/pillars", "/v1/orgs/acme/groups/all/pillars", "/v1/nodes/web01/pillars"} {
		must("PUT", fmt.Sprintf("%s/c%d", target, i), row(i))
	}
	for i := 5; i < 8; i++ {
		must("PUT", fmt.Sprintf("/v1/nodes/web01/pillars/c%d", i), row(i))
	}
	b.ResetTimer()
	for b.Loop() {
		r := bundle.do(b, "GET", "/v1/nodes/web01/pillar", bundle.admin, nil)
		if r.status != 200 {
			b.Fatal(r.status)
		}
	}
}

// BenchmarkWarmRendersUnderWrites measures warm render throughput (renders of 1,000 nodes
// of one org over HTTP, 4 clients, every node rendered once before) for 3 s with no writes,
// then for 3 s while 50 pillar writes per second land on random nodes through the same
// replica, and reports both and their ratio (issue 17: ≥ 0.8).
func BenchmarkWarmRendersUnderWrites(bm *testing.B) {
	const nodes = 1000
	b := cachedReplica(bm, true)
	b.do(bm, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"acme"}}`))
	var inv strings.Builder
	for i := range nodes {
		fmt.Fprintf(&inv, `{"metadata":{"name":"n%04d"},"spec":{"org":"acme"}}`+"\n", i)
	}
	if r := b.do(bm, "POST", "/v1/nodes:apply", b.admin, strings.NewReader(inv.String()), "Content-Type", "application/x-ndjson"); r.status != 200 {
		bm.Fatal(r.status)
	}
	b.do(bm, "PUT", "/v1/pillars/global/base", b.admin, strings.NewReader(`{"ntp":{"servers":["a","b"]},"motd":"hello"}`))
	b.do(bm, "PUT", "/v1/orgs/acme/pillars/org", b.admin, strings.NewReader(`{"org":"acme","dns":["1.1.1.1"]}`))
	for i := range nodes {
		b.do(bm, "GET", fmt.Sprintf("/v1/nodes/n%04d/pillar", i), b.admin, nil)
	}
	run := func(d time.Duration, writes bool) float64 {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var n atomic.Int64
		for c := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(c), 1))
				for {
					select {
					case <-stop:
						return
					default:
					}
					b.do(bm, "GET", fmt.Sprintf("/v1/nodes/n%04d/pillar", rng.IntN(nodes)), b.admin, nil)
					n.Add(1)
				}
			}()
		}
		if writes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(20 * time.Millisecond) // 50 per second
				defer tick.Stop()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					b.do(bm, "PUT", fmt.Sprintf("/v1/nodes/n%04d/pillars/app", (i*7919)%nodes), b.admin, strings.NewReader(fmt.Sprintf(`{"v":%d}`, i)))
				}
			}()
		}
		time.Sleep(d)
		close(stop)
		wg.Wait()
		return float64(n.Load()) / d.Seconds()
	}
	for bm.Loop() {
		quiet := run(3*time.Second, false)
		busy := run(3*time.Second, true)
		bm.ReportMetric(quiet, "quiet-renders/s")
		bm.ReportMetric(busy, "renders/s-under-writes")
		bm.ReportMetric(busy/quiet, "ratio")
	}
}
