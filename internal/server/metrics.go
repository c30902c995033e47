package server

import (
	"github.com/stratahq/strata/internal/db/migrations"
	"runtime"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pillar"
)

// queryMetrics observes every database query by its "-- name:" and outcome (SQLSTATE or
// "ok"), the kine pattern: a slow or failing statement is named in the metrics.
type queryMetrics struct {
	duration *prometheus.HistogramVec
}

func (m *queryMetrics) ObserveQuery(name, code string, d time.Duration) {
	m.duration.WithLabelValues(name, code).Observe(d.Seconds())
}

// newRegistry builds the process's Prometheus registry: Go and process collectors, query
// durations, and pool gauges read from the pool when scraped. The registry is explicit (no
// global default), so tests can build several servers in one process.
func newRegistry() (*prometheus.Registry, *queryMetrics) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	qm := &queryMetrics{duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "strata_db_query_duration_seconds",
		Help:    "Database query durations by query name and outcome (ok or SQLSTATE).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"query", "code"})}
	reg.MustRegister(qm.duration)
	return reg, qm
}

func registerPoolMetrics(reg *prometheus.Registry, d *db.DB) {
	gauge := func(name, help string, f func(db.PoolStats) float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return f(d.PoolStats()) }))
	}
	gauge("strata_db_pool_connections", "Open connections in the pool.", func(s db.PoolStats) float64 { return float64(s.Total) })
	gauge("strata_db_pool_idle_connections", "Idle connections in the pool.", func(s db.PoolStats) float64 { return float64(s.Idle) })
	gauge("strata_db_pool_acquired_connections", "Connections in use.", func(s db.PoolStats) float64 { return float64(s.Acquired) })
	gauge("strata_db_pool_max_connections", "Pool size limit.", func(s db.PoolStats) float64 { return float64(s.Max) })
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "strata_db_pool_acquire_total", Help: "Connections acquired from the pool.",
	}, func() float64 { return float64(d.PoolStats().AcquireCount) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "strata_db_pool_empty_acquire_total", Help: "Acquires that had to wait because the pool was empty.",
	}, func() float64 { return float64(d.PoolStats().EmptyAcquireCount) }))
}

// registerPillarCacheMetrics exposes the render cache's hits and misses, read when scraped.
func registerPillarCacheMetrics(reg *prometheus.Registry, c *pillar.Cache) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "strata_pillar_cache_hits_total", Help: "Pillar renders served from this replica's cache."},
			func() float64 { h, _ := c.Stats(); return float64(h) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "strata_pillar_cache_misses_total", Help: "Pillar renders computed (not in this replica's cache)."},
			func() float64 { _, m := c.Stats(); return float64(m) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "strata_pillar_cache_evictions_total", Help: "Pillar renders dropped from this replica's cache to stay within --render-cache-bytes."},
			func() float64 { return float64(c.Evictions()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_pillar_cache_bytes", Help: "What the renders in this replica's cache count against --render-cache-bytes."},
			func() float64 { b, _ := c.Size(); return float64(b) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_pillar_cache_entries", Help: "Renders in this replica's cache."},
			func() float64 { _, n := c.Size(); return float64(n) }),
	)
}

// registerBuildInfo exports strata_build_info{version, goversion, schema} = 1, so dashboards
// and alerts can tell which build and schema each replica runs.
func registerBuildInfo(reg *prometheus.Registry, version string) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_build_info",
		Help: "The running strata build: its version, the Go version it was built with, and the schema version it knows.",
	}, []string{"version", "goversion", "schema"})
	g.WithLabelValues(version, runtime.Version(), strconv.FormatInt(migrations.Latest(), 10)).Set(1)
	reg.MustRegister(g)
}
