// Command labels drives strata's label path over HTTP for bench/labels.sh:
//
//	labels setup  -server URL -token T -nodes 1000        # org "bench" and nodes n0000…, 5 labels each
//	labels patch  -server URL -token T -n 16000 -c 8      # n merge PATCHes of one label, c clients
//	labels select -server URL -token T -n 2000 -c 8 -selector 'k1=v{r},k2 in (v1,v2,v3)'
//	labels get    -server URL -token T -path '/v1/nodes/minion-{r}/pillar' -range 10000 -duration 15s
//	labels get    -server URL -token T -path '/v1/nodes/n{r7}' -range 100000   # the select data's nodes
//
// patch is the HTTP side of the "PATCH vs raw INSERT … ON CONFLICT" comparison: each request
// sets label k<0..9> of a random one of the first 1000 nodes to v<0..50>, the same keys and
// values ../shared/bench/anchor-labels-upsert.sql writes with pgbench. Every answer must be a
// 200 (the program exits 1 otherwise), so a fast run cannot hide failures. select lists
// nodes with a selector (limit 50) and prints p50/p99 latency.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: labels setup|patch|select [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	server := fs.String("server", "http://127.0.0.1:7400", "strata URL")
	token := fs.String("token", os.Getenv("STRATA_TOKEN"), "admin token")
	n := fs.Int("n", 16000, "requests")
	c := fs.Int("c", 8, "concurrent clients")
	nodes := fs.Int("nodes", 1000, "setup: nodes to create")
	getPath := fs.String("path", "/v1/nodes/minion-{r}/pillar", "get: the path, {r} a random number from 1 to -range")
	rangeN := fs.Int("range", 10000, "get: the range of {r}")
	duration := fs.Duration("duration", 0, "stop after this long even if fewer than -n requests ran (0: no limit)")
	fresh := fs.Bool("no-cache", false, "get: send Cache-Control: no-cache (a render computed from the database, not the replica's cache)")
	selector := fs.String("selector", "k1=v4,k2 in (v5,v10)", "select: label selector")
	seedFlag := fs.Uint64("seed", 0, "the random draws' seed (0: a new one each run, printed on stderr). "+
		"A fixed seed repeats the same requests: a second patch run with it writes the values the first wrote, and so changes almost nothing")
	_ = fs.Parse(os.Args[2:])
	seed = *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	fmt.Fprintf(os.Stderr, "seed=%d\n", seed)
	if *duration > 0 {
		deadline = time.Now().Add(*duration)
	}
	h := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	do := func(method, path string, body []byte, ct string) (int, []byte) {
		req, _ := http.NewRequestWithContext(context.Background(), method, *server+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+*token)
		if *fresh {
			req.Header.Set("Cache-Control", "no-cache")
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := h.Do(req)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		return resp.StatusCode, buf.Bytes()
	}
	switch os.Args[1] {
	case "setup":
		if st, b := do("POST", "/v1/orgs", []byte(`{"metadata":{"name":"bench"}}`), ""); st != 201 && st != 409 {
			fail("create org: %d %s", st, b)
		}
		var body bytes.Buffer
		for i := range *nodes {
			fmt.Fprintf(&body, `{"metadata":{"name":"n%04d","labels":{"example.com/k0":"v%d","k1":"v%d","k2":"v%d","k3":"v%d","k4":"v%d"}},"spec":{"org":"bench"}}`+"\n",
				i, (i*3)%20, (i*4)%20, (i*5)%20, (i*6)%20, (i*7)%20)
		}
		if st, b := do("POST", "/v1/nodes:apply", body.Bytes(), "application/x-ndjson"); st != 200 || !bytes.Contains(b, []byte(`"errors":0`)) {
			fail("apply: %d %s", st, b[max(0, len(b)-300):])
		}
	case "patch":
		run(*n, *c, func(r *rand.Rand) error {
			path := fmt.Sprintf("/v1/nodes/n%04d", r.IntN(1000))
			body := fmt.Appendf(nil, `{"metadata":{"labels":{"k%d":"v%d"}}}`, r.IntN(10), r.IntN(51))
			if st, b := do("PATCH", path, body, "application/merge-patch+json"); st != 200 {
				return fmt.Errorf("PATCH %s: %d %s", path, st, b)
			}
			return nil
		})
	case "get":
		// GET a path in which {r} is replaced by a random 1..-range per request (e.g.
		// /v1/nodes/minion-{r}/pillar), or {r4} by 0..-range-1 in four digits (n{r4}: the
		// nodes setup makes); every answer must be a 200.
		run(*n, *c, func(r *rand.Rand) error {
			x := r.IntN(*rangeN)
			path := strings.ReplaceAll(strings.ReplaceAll(*getPath, "{r4}", fmt.Sprintf("%04d", x)), "{r}", strconv.Itoa(1+x))
			path = strings.ReplaceAll(path, "{r7}", fmt.Sprintf("%07d", 1+x)) // the select benchmark's n0000001…

			if st, b := do("GET", path, nil, ""); st != 200 {
				return fmt.Errorf("GET %s: %d %s", path, st, b)
			}
			return nil
		})
	case "select":
		// {r} in the selector is replaced by a random 0..19 per request, as the anchor's
		// pgbench script draws :v. An empty selector lists without one.
		run(*n, *c, func(r *rand.Rand) error {
			q := "/v1/nodes?limit=50"
			if *selector != "" {
				q += "&labelSelector=" + url.QueryEscape(strings.ReplaceAll(*selector, "{r}", strconv.Itoa(r.IntN(20))))
			}
			if st, b := do("GET", q, nil, ""); st != 200 {
				return fmt.Errorf("GET %s: %d %s", q, st, b)
			}
			return nil
		})
	default:
		fail("unknown command %q", os.Args[1])
	}
}

// deadline, when set, ends run early.
var deadline time.Time

// seed seeds each client's random draws (with the client's number).
var seed uint64

// run makes n calls of f over c goroutines and prints throughput and latency percentiles.
func run(n, c int, f func(r *rand.Rand) error) {
	var next atomic.Int64
	lat := make([][]time.Duration, c)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for w := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), seed))
			for next.Add(1) <= int64(n) && (deadline.IsZero() || time.Now().Before(deadline)) {
				t0 := time.Now()
				if err := f(r); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if err, _ := firstErr.Load().(error); err != nil {
		fail("%v", err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) / 1000 }
	fmt.Printf("requests=%d clients=%d seconds=%.2f per_second=%.0f p50_ms=%.2f p99_ms=%.2f\n",
		len(all), c, el.Seconds(), float64(len(all))/el.Seconds(), pct(0.5), pct(0.99))
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}
