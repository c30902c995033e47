package kind_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/resource"
)

// BenchmarkWritesDuringRegistration100k (issue 17, item 6): while a registration checks its
// change against 100,000 stored objects (a tighter maximum of ratio, one less each round: every
// object is scanned, none violates, the revision is inserted), one
// writer replaces objects of the kind in a loop. Reported: how long the registration took,
// and the writer's slowest and 99th-percentile write while it ran — what the kind's key costs
// the kind's writers.
func BenchmarkWritesDuringRegistration100k(b *testing.B) {
	r := setup(b)
	ctx := context.Background()
	_, err := r.kinds.Register(ctx, admin, "Database", api.KindRequest{Scope: "org", Schema: json.RawMessage(benchSchema)}, false)
	require.NoError(b, err)
	_, err = r.d.Exec(ctx, benchQueries.Get("BenchInsertObjects"), 100000, benchSpec(1))
	require.NoError(b, err)
	ref := resource.Ref{Kind: "Database", Org: "acme", Name: "db-1"}
	var lat []time.Duration
	var regTotal time.Duration
	for i := 0; b.Loop(); i++ {
		var next map[string]any
		require.NoError(b, json.Unmarshal([]byte(benchSchema), &next))
		props := next["properties"].(map[string]any)
		props["ratio"].(map[string]any)["maximum"] = 1000 - i // tighter every round: a new revision
		doc, _ := json.Marshal(next)
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			_, err := r.kinds.Register(ctx, admin, "Database", api.KindRequest{Schema: doc}, false)
			done <- err
		}()
		for w := 0; ; w++ {
			select {
			case err := <-done:
				require.NoError(b, err)
				regTotal += time.Since(start)
				goto next
			default:
			}
			t0 := time.Now()
			if _, err := r.res.Replace(ctx, ref, obj(benchSpec(w))); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
	next:
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-write-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-write-ms")
		b.ReportMetric(float64(len(lat))/float64(b.N), "writes/registration")
	}
	b.ReportMetric(float64(regTotal.Milliseconds())/float64(b.N), "registration-ms")
}
