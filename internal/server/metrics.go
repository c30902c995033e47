package server

import (
	"context"
	"github.com/stratahq/strata/internal/db/migrations"
	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/resource"
	"github.com/stratahq/strata/internal/tfstate"
	"runtime"
	"strconv"
	"sync"
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

// opsCollector exports, at each scrape, what an operator alerts on: Terraform locks (held,
// unprotected, the oldest unprotected one's age), the lock keeper's session, the watch
// poller, render-cache invalidations by scope, the applied schema version and readiness by
// reason. The database-backed figures cost two small queries and the readiness check per
// scrape.
type opsCollector struct {
	state     *tfstate.Service
	hub       *resource.Hub
	resources *resource.Service
	cache     *pillar.Cache
	d         *db.DB
	readiness func(context.Context) ([]string, error)

	// The lock counts last read: while the database cannot be asked, the lock series carry
	// them (zero before any read) instead of vanishing, so alerts on them neither resolve nor
	// lose their `for:`; an unprotected lock's age keeps growing from its last reading.
	mu                   sync.Mutex
	lastHeld, lastUnprot int64
	lastAge              float64
	lastRead             time.Time
}

var (
	descLocksHeld        = prometheus.NewDesc("strata_tf_locks_held", "Terraform HTTP locks held (all replicas).", nil, nil)
	descLocksUnprotected = prometheus.NewDesc("strata_tf_locks_unprotected", "Terraform HTTP locks whose advisory key no keeper holds: a pg client could take the workspace.", nil, nil)
	descLockUnprotAge    = prometheus.NewDesc("strata_tf_lock_unprotected_seconds", "How long the oldest unprotected Terraform lock has been unprotected (0 when none is).", nil, nil)
	descKeeperUp         = prometheus.NewDesc("strata_tf_keeper_up", "1 when this replica's lock keeper has its database session (pg clients are excluded).", nil, nil)
	descWatchSubs        = prometheus.NewDesc("strata_watch_subscribers", "Watch streams this replica serves.", nil, nil)
	descWatchHead        = prometheus.NewDesc("strata_watch_head_version", "The resourceVersion through which this replica's change poller has fanned out every change.", nil, nil)
	descWatchLag         = prometheus.NewDesc("strata_watch_lag_versions", "How many versions the newest committed change is ahead of what this replica's poller has fanned out.", nil, nil)
	descWatchEvents      = prometheus.NewDesc("strata_watch_events_total", "Change events queued to watch streams.", nil, nil)
	descWatchCutoffs     = prometheus.NewDesc("strata_watch_cutoffs_total", "Watch streams ended by the server: behind (fell more than the buffer behind) or gone (history pruned).", []string{"reason"}, nil)
	descInvalidations    = prometheus.NewDesc("strata_pillar_cache_invalidations_total", "Render-cache invalidations received, by scope: node, org, or all.", []string{"scope"}, nil)
	descSchemaVersion    = prometheus.NewDesc("strata_schema_version", "The database's applied schema version.", nil, nil)
	descReady            = prometheus.NewDesc("strata_ready", "1 when /readyz would answer 200; when 0, reason says why, as /readyz does (connections, unavailable, keys, …; docs/operations.md, Readiness).", []string{"reason"}, nil)
	descReadyWrites      = prometheus.NewDesc("strata_ready_writes", "1 when /readyz?writes=true would answer 200; when 0, reason says why (read-only, disk-full, or any reason strata_ready has).", []string{"reason"}, nil)
)

func (c *opsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLocksHeld, descLocksUnprotected, descLockUnprotAge, descKeeperUp, descWatchSubs, descWatchHead, descWatchLag,
		descWatchEvents, descWatchCutoffs, descInvalidations, descSchemaVersion, descReady, descReadyWrites} {
		ch <- d
	}
}

func (c *opsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	held, unprot, age, err := c.state.LockCounts(ctx)
	c.mu.Lock()
	if err == nil {
		c.lastHeld, c.lastUnprot, c.lastAge, c.lastRead = held, unprot, age, time.Now()
	} else {
		held, unprot, age = c.lastHeld, c.lastUnprot, c.lastAge
		if c.lastUnprot > 0 {
			age += time.Since(c.lastRead).Seconds()
		}
	}
	c.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descLocksHeld, prometheus.GaugeValue, float64(held))
	ch <- prometheus.MustNewConstMetric(descLocksUnprotected, prometheus.GaugeValue, float64(unprot))
	ch <- prometheus.MustNewConstMetric(descLockUnprotAge, prometheus.GaugeValue, age)
	up := 0.0
	if c.state.Readiness(ctx).PGClientsExcluded {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(descKeeperUp, prometheus.GaugeValue, up)
	if c.hub != nil {
		st := c.hub.Stats()
		ch <- prometheus.MustNewConstMetric(descWatchSubs, prometheus.GaugeValue, float64(st.Subscribers))
		ch <- prometheus.MustNewConstMetric(descWatchHead, prometheus.GaugeValue, float64(st.Head))
		if newest, err := c.resources.HeadVersion(ctx); err == nil {
			ch <- prometheus.MustNewConstMetric(descWatchLag, prometheus.GaugeValue, float64(max(newest-st.Head, 0)))
		}
		ch <- prometheus.MustNewConstMetric(descWatchEvents, prometheus.CounterValue, float64(st.Delivered))
		ch <- prometheus.MustNewConstMetric(descWatchCutoffs, prometheus.CounterValue, float64(st.CutBehind), "behind")
		ch <- prometheus.MustNewConstMetric(descWatchCutoffs, prometheus.CounterValue, float64(st.CutGone), "gone")
	}
	if c.cache != nil {
		node, org, all := c.cache.InvalidationsBy()
		ch <- prometheus.MustNewConstMetric(descInvalidations, prometheus.CounterValue, float64(node), "node")
		ch <- prometheus.MustNewConstMetric(descInvalidations, prometheus.CounterValue, float64(org), "org")
		ch <- prometheus.MustNewConstMetric(descInvalidations, prometheus.CounterValue, float64(all), "all")
	}
	if v, err := c.d.SchemaVersion(ctx); err == nil {
		ch <- prometheus.MustNewConstMetric(descSchemaVersion, prometheus.GaugeValue, float64(v))
	}
	// Both series follow /readyz's one table of reasons (httpapi.ReadyReason, WritesOnly).
	ready, reason, writes, writesReason := 1.0, "", 1.0, ""
	if _, err := c.readiness(ctx); err != nil {
		writes, writesReason = 0, httpapi.ReadyReason(err)
		if !httpapi.WritesOnly(writesReason) {
			ready, reason = 0, writesReason
		}
	}
	ch <- prometheus.MustNewConstMetric(descReadyWrites, prometheus.GaugeValue, writes, writesReason)
	ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, ready, reason)
}

func registerOpsMetrics(reg *prometheus.Registry, state *tfstate.Service, hub *resource.Hub, resources *resource.Service, cache *pillar.Cache, d *db.DB, readiness func(context.Context) ([]string, error)) {
	reg.MustRegister(&opsCollector{state: state, hub: hub, resources: resources, cache: cache, d: d, readiness: readiness})
}

// registerListIndexMetrics exposes the list index (resource/index.go): how many lists it
// answered from memory and how many the database answered instead, by reason, and what it
// holds. Read when scraped.
func registerListIndexMetrics(reg *prometheus.Registry, ix *resource.Index) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "strata_list_index_served_total", Help: "Lists answered from this replica's in-memory list index."},
			func() float64 { return float64(ix.Stats().Served) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_list_index_ready", Help: "1 when this replica's list index is loaded and current, 0 while it loads or is off (lists then read the database)."},
			func() float64 {
				if ix.Stats().Ready {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_list_index_objects", Help: "Objects in this replica's list index."},
			func() float64 { return float64(ix.Stats().Objects) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_list_index_bytes", Help: "What the objects in this replica's list index count against --list-index-max-bytes."},
			func() float64 { return float64(ix.Stats().Bytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_list_index_head_version", Help: "The resourceVersion through which this replica's list index holds every change."},
			func() float64 { return float64(ix.Stats().Head) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "strata_list_index_loads_total", Help: "Loads of this replica's list index from the database (at start, and after a 410, a new history epoch or the byte bound)."},
			func() float64 { return float64(ix.Stats().Rebuilds) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "strata_list_index_based_writes_total", Help: "Replaces and patches this replica wrote from its list index's copy of the object, in one round trip, without reading the database first."},
			func() float64 { return float64(ix.Stats().BasedWrites) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "strata_list_index_stale_bases_total", Help: "Replaces and patches whose list index copy had been overtaken (or that failed or changed nothing), written again under the row lock."},
			func() float64 { return float64(ix.Stats().StaleBases) }),
		&listFallbackCollector{ix: ix},
	)
}

var descListFallback = prometheus.NewDesc("strata_list_index_fallback_total",
	"Lists the database answered instead of this replica's list index: not_ready (loading, dropped after a 410 or a new history epoch), timeout (the index did not reach the database's version within --list-index-wait), budget (over --list-index-max-bytes), history (the database's version went back).",
	[]string{"reason"}, nil)

type listFallbackCollector struct{ ix *resource.Index }

func (c *listFallbackCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descListFallback }

func (c *listFallbackCollector) Collect(ch chan<- prometheus.Metric) {
	for reason, n := range c.ix.Stats().Fallback {
		ch <- prometheus.MustNewConstMetric(descListFallback, prometheus.CounterValue, float64(n), reason)
	}
}
