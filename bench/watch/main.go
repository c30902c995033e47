// Command watch measures watch fan-out for bench/watch.sh: -watchers concurrent watches of
// orgs on one strata, while -c writers create -n orgs as fast as they can. It reports the
// events delivered per second over all watchers and the latency from a write to its event at
// every watcher, bounded from both sides: from the write's acknowledgement (the commit
// happened before it, so this is a lower bound) and from the moment the write was sent (an
// upper bound). Every watcher must receive every write's event exactly once, in increasing
// resourceVersion order (the program exits 1 otherwise), so a fast run cannot hide a loss.
//
//	watch -server URL -token T -watchers 100 -n 2000 -c 4
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/stratahq/strata/client"
)

func main() {
	server := flag.String("server", "http://127.0.0.1:7400", "strata URL")
	token := flag.String("token", os.Getenv("STRATA_TOKEN"), "admin token")
	watchers := flag.Int("watchers", 100, "concurrent watches")
	n := flag.Int("n", 2000, "orgs to create")
	c := flag.Int("c", 4, "concurrent writers")
	prefix := flag.String("prefix", "w"+strconv.FormatInt(time.Now().Unix()%100000, 10), "name prefix of the created orgs")
	flag.Parse()
	ctx := context.Background()
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	cl, err := client.New(*server, *token, &http.Client{Transport: tr})
	check(err)
	list, err := cl.Orgs().List(ctx, client.ListOptions{Limit: 1})
	check(err)

	type arrival struct {
		name string
		at   time.Time
	}
	arrivals := make([][]arrival, *watchers)
	var ready, done sync.WaitGroup
	for i := range *watchers {
		w, err := cl.Orgs().Watch(ctx, client.WatchOptions{ResourceVersion: list.ResourceVersion})
		check(err)
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			defer w.Close()
			ready.Done()
			last := int64(0)
			for len(arrivals[i]) < *n {
				ev, err := w.Next()
				check(err)
				if ev.Type != client.EventAdded || len(ev.Object.Metadata.Name) <= len(*prefix) || ev.Object.Metadata.Name[:len(*prefix)] != *prefix {
					continue
				}
				rv, _ := strconv.ParseInt(ev.Object.Metadata.ResourceVersion, 10, 64)
				if rv <= last {
					fail("watcher %d: resourceVersion %d after %d", i, rv, last)
				}
				last = rv
				arrivals[i] = append(arrivals[i], arrival{ev.Object.Metadata.Name, time.Now()})
			}
		}()
	}
	ready.Wait()

	sent := make(map[string]time.Time, *n)
	acked := make(map[string]time.Time, *n)
	var mu sync.Mutex
	next := make(chan int)
	var writers sync.WaitGroup
	began := time.Now()
	for range *c {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range next {
				name := fmt.Sprintf("%s-%06d", *prefix, i)
				t0 := time.Now()
				_, err := cl.Orgs().Create(ctx, client.Object{Metadata: client.ObjectMeta{Name: name}})
				check(err)
				t1 := time.Now()
				mu.Lock()
				sent[name], acked[name] = t0, t1
				mu.Unlock()
			}
		}()
	}
	for i := range *n {
		next <- i
	}
	close(next)
	writers.Wait()
	wrote := time.Since(began)
	done.Wait()
	elapsed := time.Since(began)

	var fromAck, fromSend []time.Duration
	total := 0
	for i, as := range arrivals {
		seen := map[string]bool{}
		for _, a := range as {
			if seen[a.name] {
				fail("watcher %d: %s twice", i, a.name)
			}
			seen[a.name] = true
			fromAck = append(fromAck, max(0, a.at.Sub(acked[a.name])))
			fromSend = append(fromSend, a.at.Sub(sent[a.name]))
		}
		total += len(as)
	}
	slices.Sort(fromAck)
	slices.Sort(fromSend)
	pct := func(d []time.Duration, p float64) time.Duration {
		return d[int(p*float64(len(d)-1))].Round(10 * time.Microsecond)
	}
	fmt.Printf("watchers %d, writes %d (%d writers): writes took %v (%.0f/s); %d events delivered in %v = %.0f events/s\n",
		*watchers, *n, *c, wrote.Round(time.Millisecond), float64(*n)/wrote.Seconds(), total, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds())
	fmt.Printf("latency write acknowledged -> event (lower bound): p50 %v  p99 %v  max %v\n", pct(fromAck, .5), pct(fromAck, .99), pct(fromAck, 1))
	fmt.Printf("latency write sent -> event (upper bound):         p50 %v  p99 %v  max %v\n", pct(fromSend, .5), pct(fromSend, .99), pct(fromSend, 1))
}

func check(err error) {
	if err != nil {
		fail("%v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}
