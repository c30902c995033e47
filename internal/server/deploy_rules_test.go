package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/stratahq/strata/internal/pgtest"
)

// TestAlertRulesAndDashboard (issue 18, item 5): the alert rules and the Grafana dashboard in
// deploy/ parse, every rule has what Alertmanager needs (for how long where it matters, a
// severity, a summary), and every metric either file names is exported by a running replica
// (/metrics of a real server), so a renamed metric cannot silently turn an alert off.
func TestAlertRulesAndDashboard(t *testing.T) {
	t.Parallel()
	base, err := startServer(t, pgtest.NewDatabaseURL(t))
	require.NoError(t, err)
	warm, err := http.Get(base + "/readyz") // so the per-request metrics have a series
	require.NoError(t, err)
	warm.Body.Close()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	exported := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			f := strings.Fields(name)
			exported[f[0]] = true
			if f[1] == "histogram" {
				exported[f[0]+"_bucket"], exported[f[0]+"_sum"], exported[f[0]+"_count"] = true, true, true
			}
		}
	}
	for _, m := range []string{"strata_ready", "strata_ready_writes", "strata_tf_locks_held", "strata_tf_locks_unprotected", "strata_tf_lock_unprotected_seconds",
		"strata_tf_keeper_up", "strata_watch_subscribers", "strata_watch_lag_versions", "strata_watch_events_total", "strata_watch_cutoffs_total",
		"strata_pillar_cache_invalidations_total", "strata_schema_version", "strata_build_info"} {
		require.True(t, exported[m], "a replica exports %s", m)
	}
	metricRE := regexp.MustCompile(`\bstrata_[a-z_]+`)
	// Prometheus's own series about the scrape: what sees a replica that exports nothing.
	scrapeRE := regexp.MustCompile(`\bup\{job="strata"\}`)
	check := func(where, expr string) {
		t.Helper()
		ms := metricRE.FindAllString(expr, -1)
		require.True(t, len(ms) > 0 || scrapeRE.MatchString(expr), "%s names a strata metric or the strata job's up", where)
		for _, m := range ms {
			require.True(t, exported[m], "%s names %s, which no replica exports", where, m)
		}
	}

	raw, err := os.ReadFile("../../deploy/prometheus-rules.yaml")
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&rules))
	require.NotEmpty(t, rules.Groups)
	n := 0
	exprs := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			exprs[r.Alert] = r.Expr
			require.NotEmpty(t, r.Alert)
			require.Contains(t, []string{"page", "warn"}, r.Labels["severity"], r.Alert)
			require.NotEmpty(t, r.Annotations["summary"], r.Alert)
			check(r.Alert, r.Expr)
		}
	}
	require.GreaterOrEqual(t, n, 5)
	// A dead replica exports nothing (issue 28, item 6): one rule watches the scrape's up
	// (the replica down) and one the absence of any replica up, and they page.
	var down, absent bool
	for _, expr := range exprs {
		down = down || regexp.MustCompile(`^up\{job="strata"\} == 0$`).MatchString(expr)
		absent = absent || regexp.MustCompile(`^absent\(up\{job="strata"\}.*\)$`).MatchString(expr)
	}
	require.True(t, down, "a rule fires on up{job=\"strata\"} == 0")
	require.True(t, absent, "a rule fires when no strata replica is up (absent)")
	// The rules follow the readiness table (docs/operations.md, Readiness): not ready is
	// strata_ready (plain /readyz), a database refusing writes is strata_ready_writes.
	require.Contains(t, exprs["StrataNotReady"], "strata_ready)")
	require.Contains(t, exprs["StrataDatabaseRefusesWrites"], `strata_ready_writes{reason=~"read-only|disk-full"}`)

	raw, err = os.ReadFile("../../deploy/grafana-dashboard.json")
	require.NoError(t, err)
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	require.NotEmpty(t, dash.Panels)
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			check("panel "+p.Title, tg.Expr)
		}
	}
}
