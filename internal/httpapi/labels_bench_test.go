package httpapi_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// BenchmarkNodePatch: merge PATCHes of one label of 1000 nodes over HTTP, in parallel (the
// HTTP side of bench/labels.sh patch, in process, for profiling:
// go test -run x -bench NodePatch -cpuprofile cpu.out ./internal/httpapi/).
func BenchmarkNodePatch(b *testing.B) {
	sb := newStateBench(b, 0)
	do := func(method, path, body string) int {
		req, _ := http.NewRequest(method, sb.url+path, bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+sb.token)
		req.Header.Set("Content-Type", "application/merge-patch+json")
		if strings.HasSuffix(path, ":apply") {
			req.Header.Set("Content-Type", "application/x-ndjson")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body) // an apply answers as it goes: read it all
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := do("POST", "/v1/orgs", `{"metadata":{"name":"bench"}}`); st != 201 {
		b.Fatal(st)
	}
	var inv bytes.Buffer
	for i := range 1000 {
		fmt.Fprintf(&inv, `{"metadata":{"name":"n%04d","labels":{"k1":"v1","k2":"v2","k3":"v3","k4":"v4","example.com/k0":"v0"}},"spec":{"org":"bench"}}`+"\n", i)
	}
	if st := do("POST", "/v1/nodes:apply", inv.String()); st != 200 {
		b.Fatal(st)
	}
	var seed atomic.Uint64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(seed.Add(1), 7))
		for pb.Next() {
			if st := do("PATCH", fmt.Sprintf("/v1/nodes/n%04d", r.IntN(1000)), fmt.Sprintf(`{"metadata":{"labels":{"k%d":"v%d"}}}`, r.IntN(10), r.IntN(51))); st != 200 {
				b.Fatal(st)
			}
		}
	})
}
