package resource

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/metadata"
)

// TestIndexBytesPerObject measures what one object of the list benchmark's shape (a node
// with five labels, no annotation, spec {"org":"bench"}) costs the list index in heap —
// entry, object, labels map, postings, name map, runs — at 100,000 objects, and checks that
// what the index counts against its byte bound (ixEntryBytes, ixLabelBytes) is within 25 %
// of it, so --list-index-max-bytes means about what it says. The figure is in
// docs/benchmarks.md.
func TestIndexBytesPerObject(t *testing.T) {
	const n = 100000
	st := newState(NewService(nil))
	now := time.Now().UTC()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	// The objects as decoding the load's rows makes them (each with its own maps and
	// strings), then the index over them: together what the index holds.
	objs := make([]api.Object, n)
	for i := range objs {
		name := fmt.Sprintf("n%07d", i+1)
		// Strings built apart, as decoding rows gives each object its own.
		objs[i] = api.Object{Kind: KindNode, Spec: json.RawMessage(`{"org": "bench"}`),
			Metadata: api.ObjectMeta{Name: name, UID: "u" + strconv.FormatInt(int64(i+7), 36), ResourceVersion: strconv.Itoa(i),
				Labels:      map[string]string{},
				Annotations: map[string]string{}, CreatedAt: &now, UpdatedAt: &now}}
		for k := range 5 {
			key := "k" + strconv.Itoa(k)
			if k == 0 {
				key = "example.com/" + key
			}
			objs[i].Metadata.Labels[key] = "v" + strconv.Itoa(((i+1)*(k+3))%20)
		}
	}
	for _, o := range objs {
		st.appendSorted(o)
	}
	objs = nil
	runtime.GC()
	runtime.ReadMemStats(&after)
	perObject := float64(after.HeapAlloc-before.HeapAlloc) / n
	counted := float64(st.bytes) / n
	t.Logf("heap per object: %.0f B; counted against the byte bound: %.0f B", perObject, counted)
	require.InDelta(t, perObject, counted, perObject/4)
	runtime.KeepAlive(st)
}

// BenchmarkIndexPage: one page of 50 from an index of STRATA_BENCH_SIZE nodes (default
// 1,000,000) of the list benchmark's shape, built in memory without a database, for the
// selector shapes of bench/labels.sh select: the page alone, one goroutine.
//
//	go test -run '^$' -bench IndexPage ./internal/resource/
func BenchmarkIndexPage(b *testing.B) {
	n := 1000000
	if s := os.Getenv("STRATA_BENCH_SIZE"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	st := newState(NewService(nil))
	now := time.Now().UTC()
	for i := range n {
		o := api.Object{Kind: KindNode, Spec: json.RawMessage(`{"org":"bench"}`),
			Metadata: api.ObjectMeta{Name: fmt.Sprintf("n%07d", i+1), UID: "u" + strconv.FormatInt(int64(i+7), 36), ResourceVersion: "0",
				Labels: map[string]string{}, Annotations: map[string]string{}, CreatedAt: &now, UpdatedAt: &now}}
		for k := range 5 {
			key := "k" + strconv.Itoa(k)
			if k == 0 {
				key = "example.com/" + key
			}
			o.Metadata.Labels[key] = "v" + strconv.Itoa(((i+1)*(k+3))%20)
		}
		st.appendSorted(o)
	}
	for _, c := range []struct{ name, sel string }{
		{"anchor", "k1=v3,k2 in (v1,v2,v3)"},
		{"ten-percent", "k1=v4,k2 in (v5,v10)"},
		{"fifty-percent", "k2 in (v0,v10)"},
		{"notin", "k3 notin (v0,v6),!k9"},
		{"no-selector", ""},
	} {
		sel, err := metadata.ParseSelector(c.sel)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				items, _ := st.page(KindNode, "", ListOptions{Limit: 50, Filter: auth.Filter{All: true}, Selector: sel}, 50, DefaultDriveLimit)
				if c.name != "anchor" && len(items) != 50 {
					b.Fatal(len(items))
				}
			}
		})
	}
}
