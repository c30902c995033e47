package resource_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/metadata"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/resource"
)

// BenchmarkIndexList: Service.List answered from the list index, a page of 50, 8 clients, on
// the data of BenchmarkSelectorList, for the selector shapes of bench/labels.sh select —
// the anchor's (matches nothing), ten percent, fifty percent, notin/!key (80 %) and none.
// "consistent" is what a list costs (the database's current version read, then the page from
// memory); "memory" skips that read (SkipIndexWait), the page alone. STRATA_BENCH_SIZE sets
// the number of nodes (default 100000):
//
//	STRATA_BENCH_SIZE=1000000 go test -run '^$' -bench IndexList -benchtime 3s ./internal/resource/
func BenchmarkIndexList(b *testing.B) {
	size := 100000
	if s := os.Getenv("STRATA_BENCH_SIZE"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		size = n
	}
	ctx := context.Background()
	d := pgtest.NewDB(b)
	for i, stmt := range benchData[:3] {
		var args []any
		if i == 1 {
			args = []any{size}
		}
		if _, err := d.Exec(ctx, &db.Query{Name: fmt.Sprintf("bench-data-%d", i), Text: stmt}, args...); err != nil {
			b.Fatal(stmt, err)
		}
	}
	svc := resource.NewService(d)
	hub := resource.NewHub(svc, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ix := hub.ServeLists()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go hub.Run(runCtx)
	for deadline := time.Now().Add(10 * time.Minute); !ix.Stats().Ready; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the index did not load")
		}
	}
	memory := resource.NewService(d)
	mhub := resource.NewHub(memory, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	mix := mhub.ServeLists()
	resource.SkipIndexWait(mix)
	go mhub.Run(runCtx)
	for deadline := time.Now().Add(10 * time.Minute); !mix.Stats().Ready; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the index did not load")
		}
	}
	st := ix.Stats()
	b.Logf("%d objects, %d bytes counted (%d per object)", st.Objects, st.Bytes, st.Bytes/int64(st.Objects))
	for _, c := range []struct {
		name, sel string
		want      int
	}{
		{"anchor", "k1=v{r},k2 in (v1,v2,v3)", 0},
		{"ten-percent", "k1=v4,k2 in (v5,v10)", 50},
		{"fifty-percent", "k2 in (v0,v10)", 50},
		{"notin", "k3 notin (v0,v6),!k9", 50},
		{"no-selector", "", 50},
	} {
		for _, path := range []struct {
			name string
			svc  *resource.Service
			ix   *resource.Index
		}{{"consistent", svc, ix}, {"memory", memory, mix}} {
			b.Run(c.name+"/"+path.name, func(b *testing.B) {
				served := path.ix.Stats().Served
				b.SetParallelism(4) // 8 clients on 2 processors
				defer reportCPU(b)()
				b.RunParallel(func(pb *testing.PB) {
					r := rand.New(rand.NewPCG(rand.Uint64(), 1))
					for pb.Next() {
						s := c.sel
						if c.name == "anchor" {
							s = fmt.Sprintf("k1=v%d,k2 in (v1,v2,v3)", r.IntN(20))
						}
						sel, err := metadata.ParseSelector(s)
						if err != nil {
							b.Fatal(err)
						}
						page, _, err := path.svc.List(ctx, resource.KindNode, "", resource.ListOptions{Limit: 50, Filter: all, Selector: sel})
						if err != nil || len(page.Items) != c.want {
							b.Fatal(err, len(page.Items))
						}
					}
				})
				if path.ix.Stats().Served-served < int64(b.N) {
					b.Fatal("lists fell back to the database")
				}
			})
		}
	}
}

// reportCPU reports the process's CPU time per operation (user + system, all threads) when
// the function it returns runs: on a machine shared with other work, wall time per operation
// measures the queue for the processors, CPU time what an operation costs.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() { b.ReportMetric(float64(cpuTime()-start)/float64(b.N)/1e3, "cpu-µs/op") }
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
