package db

import (
	"context"
	"strings"
	"sync"
)

// RoundTrips counts the round trips to PostgreSQL made with one context: a statement sent on
// its own (BEGIN and COMMIT included) is one, a pipeline (Tx.Pipeline, DB.Pipeline) is one
// however many statements it carries. A write's latency and much of PostgreSQL's and strata's
// CPU per write go with its round trips, so tests hold the write path to a budget of them
// (see docs/benchmarks.md) through this counter rather than through timings.
type RoundTrips struct {
	mu    sync.Mutex
	trips []string
}

type roundTripsKey struct{}

// CountRoundTrips returns ctx carrying a fresh counter, and the counter: every round trip of
// a statement run with the returned context (or one derived from it) is recorded.
func CountRoundTrips(ctx context.Context) (context.Context, *RoundTrips) {
	rt := &RoundTrips{}
	return context.WithValue(ctx, roundTripsKey{}, rt), rt
}

// Count is how many round trips were recorded.
func (rt *RoundTrips) Count() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return len(rt.trips)
}

// String lists the round trips, one per line, each with the names of its statements, so a
// test that fails its budget says which statements went on their own.
func (rt *RoundTrips) String() string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return strings.Join(rt.trips, "\n")
}

// trip records one round trip named by its first statement.
func (rt *RoundTrips) trip(name string) {
	rt.mu.Lock()
	rt.trips = append(rt.trips, name)
	rt.mu.Unlock()
}

// more adds a statement's name to the round trip recorded last (the pipeline it is part of).
func (rt *RoundTrips) more(name string) {
	rt.mu.Lock()
	if n := len(rt.trips); n > 0 {
		rt.trips[n-1] += " + " + name
	}
	rt.mu.Unlock()
}

func roundTripsOf(ctx context.Context) *RoundTrips {
	rt, _ := ctx.Value(roundTripsKey{}).(*RoundTrips)
	return rt
}

// tripName names a statement for RoundTrips: its "-- name:" or, for statements without one
// (BEGIN, COMMIT), its first words.
func tripName(sql string) string {
	if n := queryName(sql); n != "other" {
		return n
	}
	sql = strings.TrimSpace(sql)
	if len(sql) > 40 {
		sql = sql[:40]
	}
	return sql
}
