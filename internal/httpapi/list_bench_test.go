package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/resource"
)

// BenchmarkNodeListHTTP: a page of 50 nodes over HTTP answered from the list index — without
// a selector, with the ten-percent selector of bench/labels.sh — and the one-row authenticated
// GET beside them (the floor), in process, for profiling the list path:
//
//	go test -run '^$' -bench NodeListHTTP -cpuprofile cpu.out ./internal/httpapi/
func BenchmarkNodeListHTTP(b *testing.B) {
	ctx := context.Background()
	u := pgtest.NewDatabaseURL(b)
	d, err := db.Open(ctx, db.Options{URL: u, MaxConns: 32, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(d.Close)
	tokens := auth.NewService(d)
	token, err := tokens.Bootstrap(ctx, "")
	if err != nil {
		b.Fatal(err)
	}
	resources := resource.NewService(d)
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Tokens: tokens, Resources: resources, Logger: slog.New(slog.DiscardHandler), MaxBodyBytes: 64 << 20}))
	b.Cleanup(srv.Close)
	ix := serveListsFromIndex(b, resources)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	do := func(method, path string, body []byte, ct string) int {
		req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := do("POST", "/v1/orgs", []byte(`{"metadata":{"name":"bench"}}`), ""); st != 201 {
		b.Fatal(st)
	}
	const nodes = 5000
	var inv bytes.Buffer
	for i := range nodes {
		fmt.Fprintf(&inv, `{"metadata":{"name":"n%07d","labels":{"example.com/k0":"v%d","k1":"v%d","k2":"v%d","k3":"v%d","k4":"v%d"}},"spec":{"org":"bench"}}`+"\n",
			i, (i*3)%20, (i*4)%20, (i*5)%20, (i*6)%20, (i*7)%20)
	}
	if st := do("POST", "/v1/nodes:apply", inv.Bytes(), "application/x-ndjson"); st != 200 {
		b.Fatal(st)
	}
	for _, c := range []struct{ name, path string }{
		{"no-selector", "/v1/nodes?limit=50"},
		{"ten-percent", "/v1/nodes?limit=50&labelSelector=" + url.QueryEscape("k1=v4,k2 in (v5,v10)")},
		{"notin", "/v1/nodes?limit=50&labelSelector=" + url.QueryEscape("k3 notin (v0,v6),!k9")},
		{"get-floor", "/v1/nodes/n{r}"},
	} {
		b.Run(c.name, func(b *testing.B) {
			served := ix.Stats().Served
			var seed atomic.Uint64
			b.SetParallelism(4) // 8 clients on 2 processors
			defer reportCPU(b)()
			b.RunParallel(func(pb *testing.PB) {
				r := rand.New(rand.NewPCG(seed.Add(1), 3))
				for pb.Next() {
					path := c.path
					if c.name == "get-floor" {
						path = fmt.Sprintf("/v1/nodes/n%07d", r.IntN(nodes))
					}
					if st := do("GET", path, nil, ""); st != 200 {
						b.Fatal(path, st)
					}
				}
			})
			if c.name != "get-floor" && ix.Stats().Served-served < int64(b.N) {
				b.Fatalf("%d of %d lists fell back to the database", int64(b.N)-(ix.Stats().Served-served), b.N)
			}
		})
	}
}

// reportCPU reports the process's CPU time per operation (user + system, all threads: the
// server's and the in-process clients') when the function it returns runs: on a machine
// shared with other work, wall time per operation measures the queue for the processors.
// PostgreSQL's CPU is not in it.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() { b.ReportMetric(float64(cpuTime()-start)/float64(b.N)/1e3, "cpu-µs/op") }
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
