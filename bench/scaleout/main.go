// Command scaleout counts, on a generated data set, which of strata's statements would cross
// shards if its database were split (issue 21 item 6, docs/scale-out.md). It loads a strata
// server with 1,000 Terraform projects × 10 workspaces and 100,000 nodes in 200 orgs (sizes
// skewed: a few large orgs, many small), each org with a selector group and pillars, then runs
// a request mix for -duration — Salt renders of random nodes, label PATCHes, an org's node
// list with a selector, a list of all nodes with a selector, Terraform LOCK/POST/UNLOCK rounds
// on random workspaces, a watch — and reads strata's own per-statement counters
// (strata_db_query_duration_seconds_count{query}) before and after. Each statement name is
// classified by where its rows live under the layout docs/scale-out.md proposes (tenant:
// one org's rows; project: one project's schema; reference: small tables copied to every
// node; all tenants: every shard; coordinator: a global sequence, lock or log), and the counts
// are printed as the table the document shows, with the shards each execution touches out of
// -shards.
//
//	go run ./bench/scaleout -server http://127.0.0.1:7400 -token T
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

var (
	server   = flag.String("server", "http://127.0.0.1:7400", "strata URL")
	token    = flag.String("token", "", "admin token")
	nodes    = flag.Int("nodes", 100000, "nodes")
	orgs     = flag.Int("orgs", 200, "orgs")
	projects = flag.Int("projects", 1000, "Terraform projects")
	spaces   = flag.Int("workspaces", 10, "workspaces per project")
	duration = flag.Duration("duration", 20*time.Second, "how long the request mix runs")
	shards   = flag.Int("shards", 16, "shards the counts assume")
	skipLoad = flag.Bool("skip-load", false, "the data set is loaded already")
)

// class is where a statement's rows live under the proposed layout, and why.
type class struct{ where, why string }

// classes maps strata's statement names (the -- name: of its .sql files) to where they run.
var classes = map[string]class{
	"PillarRender":           {"tenant", "one node's rows, its org's, its groups' (all keyed by the node's org) and the global rows (reference)"},
	"ResourceGet":            {"tenant", "one object by (kind, org, name); a node by name needs the name→org map"},
	"ResourceLockAndGet":     {"tenant", "as ResourceGet, FOR UPDATE"},
	"ResourceInsert":         {"tenant", "one object"},
	"ResourceUpdate":         {"tenant", "one object"},
	"ResourceStamp":          {"coordinator", "draws the global resourceVersion and appends to the changes log"},
	"LabelsReplace":          {"tenant", "one object's labels"},
	"LabelsUpsert":           {"tenant", "one object's labels"},
	"LabelsDelete":           {"tenant", "one object's labels"},
	"AnnotationsReplace":     {"tenant", "one object's annotations"},
	"OrgLockShare":           {"tenant", "the org row a node's write locks"},
	"TargetLock":             {"tenant", "the org, group or node a pillar row hangs off"},
	"PillarGet":              {"tenant", "one row"},
	"PillarGetForUpdate":     {"tenant", "one row"},
	"PillarInsert":           {"tenant", "one row"},
	"PillarUpdate":           {"tenant", "one row"},
	"PillarHistoryAdd":       {"tenant", "one row's history"},
	"PillarCategories":       {"tenant", "one target's rows"},
	"ResourceList":           {"all tenants", "a list of a kind without an org (nodes, orgs): every shard, merged by name"},
	"ResourceListOrg":        {"tenant", "a list inside one org"},
	"SelectorCounts":         {"all tenants", "label statistics the selector planner reads"},
	"GroupSelectorsPending":  {"all tenants", "the selector cache's backlog"},
	"WatchPoll":              {"coordinator", "the changes log in global resourceVersion order"},
	"WatchHead":              {"coordinator", "the changes log's head"},
	"WatchCompacted":         {"coordinator", "one row"},
	"WatchCatchUp":           {"coordinator", "the changes log"},
	"VersionGaps":            {"coordinator", "the changes log's recent key range"},
	"VersionResolved":        {"coordinator", "one row"},
	"VersionResolvedAdvance": {"coordinator", "one row"},
	"VersionFill":            {"coordinator", "the changes log"},
	"ChangesFirstKept":       {"coordinator", "the changes log"},
	"ChangesPrune":           {"coordinator", "the changes log"},
	"AuditInsert":            {"coordinator", "the audit log, one global append order (xid8 follow)"},
	"AuditList":              {"coordinator", "the audit log"},
	"AuditPrune":             {"coordinator", "the audit log"},
	"TokenGetByHash":         {"reference", "tokens: small, read everywhere"},
	"TokenTouch":             {"reference", "tokens"},
	"SessionGet":             {"reference", "console sessions"},
	"KindCurrent":            {"reference", "the kind registry"},
	"KindLockShared":         {"coordinator", "a transaction advisory lock: must be one lock space"},
	"KindRevisionGet":        {"reference", "the kind registry"},
	"KindGet":                {"reference", "the kind registry"},
	"KindList":               {"reference", "the kind registry"},
	"KindRevisions":          {"reference", "the kind registry"},
	"CategoryLockShared":     {"coordinator", "a transaction advisory lock"},
	"CategoryKind":           {"reference", "pillar category properties"},
	"SettingGet":             {"reference", "settings"},
	"ProjectGet":             {"project", "one project (its row in tf_projects, distributed with the project)"},
	"StateGet":               {"project", "the project's schema (a distributed schema)"},
	"StateGetID":             {"project", "the project's schema"},
	"StateInsert":            {"project", "the project's schema"},
	"StateUpdate":            {"project", "the project's schema"},
	"StateRowKey":            {"project", "the project's schema"},
	"StateCreationKeys":      {"project", "the project's schema"},
	"StateProjectExists":     {"project", "tf_projects, keyed by project"},
	"LockGet":                {"project", "tf_locks, keyed by project"},
	"LockInsert":             {"project", "tf_locks"},
	"LockDelete":             {"project", "tf_locks"},
	"LockKeyTake":            {"coordinator", "the pg backend's advisory key: held by the keeper's session on the shard of the project's schema"},
	"KeeperMarkProtected":    {"project", "tf_locks"},
	"VersionInsert":          {"project", "tf_state_versions, keyed by project"},
	"VersionList":            {"project", "tf_state_versions"},
	"VersionGet":             {"project", "tf_state_versions"},
	"WorkspaceList":          {"project", "the project's schema"},
	"ProjectList":            {"all tenants", "every project"},
	"ProjectStateCount":      {"project", "the project's schema"},
	"GroupMembers":           {"tenant", "one group's members, in its org"},
	"LockGetForShare":        {"project", "tf_locks, keyed by project"},
	"LockGetForUpdate":       {"project", "tf_locks"},
	"LockRelease":            {"project", "tf_locks"},
	"LockAcquire":            {"project", "tf_locks"},
	"StateGetForUpdate":      {"project", "the project's schema"},
	"StateSetActor":          {"project", "a setting of the project's transaction"},
	"VersionLatest":          {"project", "tf_state_versions"},
	"PlaceholderStateDelete": {"project", "tf_placeholders, keyed by project"},
	"ServerKeyGetOrCreate":   {"reference", "the cursor-sealing key, one row"},
	"LockCounts":             {"all tenants", "lock statistics for /metrics: every project"},
	"other":                  {"transaction control", "BEGIN and COMMIT: routed with the transaction (one shard, or two-phase commit when it spans shards)"},
}

func call(method, path, body, ct string) (int, []byte) {
	req, _ := http.NewRequest(method, *server+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+*token)
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func must(st int, b []byte, what string) {
	if st/100 != 2 && st != 409 {
		fmt.Fprintf(os.Stderr, "%s: %d %s\n", what, st, b)
		os.Exit(1)
	}
}

// orgOf gives node i its org: skewed, org k gets about twice the nodes of org 2k.
func orgOf(i int) int {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	return int(float64(*orgs) * r.Float64() * r.Float64())
}

func load() {
	for o := range *orgs {
		st, b := call("POST", "/v1/orgs", fmt.Sprintf(`{"metadata":{"name":"o%03d"}}`, o), "application/json")
		must(st, b, "org")
		st, b = call("POST", fmt.Sprintf("/v1/orgs/o%03d/groups", o), `{"metadata":{"name":"web"},"spec":{"selector":"role=web"}}`, "application/json")
		must(st, b, "group")
		st, b = call("PUT", fmt.Sprintf("/v1/orgs/o%03d/pillars/app", o), fmt.Sprintf(`{"org":"o%03d","port":80}`, o), "application/json")
		must(st, b, "org pillar")
		st, b = call("PUT", fmt.Sprintf("/v1/orgs/o%03d/groups/web/pillars/web", o), `{"port":8080}`, "application/json")
		must(st, b, "group pillar")
	}
	st, b := call("PUT", "/v1/pillars/global/base", `{"ntp":["pool.ntp.org"]}`, "application/json")
	must(st, b, "global pillar")
	for start := 0; start < *nodes; start += 10000 {
		var body bytes.Buffer
		for i := start; i < min(start+10000, *nodes); i++ {
			role := []string{"web", "db", "cache"}[i%3]
			fmt.Fprintf(&body, `{"metadata":{"name":"n%06d","labels":{"role":%q,"env":"e%d"}},"spec":{"org":"o%03d"}}`+"\n", i, role, i%5, orgOf(i))
		}
		st, b := call("POST", "/v1/nodes:apply", body.String(), "application/x-ndjson")
		must(st, b, "apply")
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for p := range *projects {
		st, b := call("PUT", fmt.Sprintf("/v1/projects/p%04d", p), "", "")
		must(st, b, "project")
		for w := range *spaces {
			wg.Add(1)
			sem <- struct{}{}
			go func(p, w int) {
				defer wg.Done()
				defer func() { <-sem }()
				st, b := call("POST", fmt.Sprintf("/v1/state/p%04d/w%d", p, w), `{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"l","outputs":{},"resources":[]}`, "application/json")
				must(st, b, "state")
			}(p, w)
		}
	}
	wg.Wait()
}

func counters() map[string]float64 {
	resp, err := http.Get(*server + "/metrics")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "strata_db_query_duration_seconds_count{") {
			continue
		}
		i := strings.Index(line, `query="`)
		j := strings.Index(line[i+7:], `"`)
		name := line[i+7 : i+7+j]
		v, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		out[name] += v
	}
	return out
}

func main() {
	flag.Parse()
	if !*skipLoad {
		t := time.Now()
		load()
		fmt.Printf("loaded %d nodes in %d orgs and %d×%d workspaces in %.0f s\n", *nodes, *orgs, *projects, *spaces, time.Since(t).Seconds())
	}
	before := counters()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	kinds := map[string]int{}
	var mu sync.Mutex
	worker := func(name string, f func(r *rand.Rand)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(len(name)), uint64(time.Now().UnixNano())))
			for {
				select {
				case <-stop:
					return
				default:
				}
				f(r)
				mu.Lock()
				kinds[name]++
				mu.Unlock()
			}
		}()
	}
	for range 3 {
		worker("render", func(r *rand.Rand) { call("GET", fmt.Sprintf("/v1/nodes/n%06d/pillar", r.IntN(*nodes)), "", "") })
	}
	worker("patch", func(r *rand.Rand) {
		call("PATCH", fmt.Sprintf("/v1/nodes/n%06d", r.IntN(*nodes)), fmt.Sprintf(`{"metadata":{"labels":{"env":"e%d"}}}`, r.IntN(5)), "application/merge-patch+json")
	})
	worker("org list", func(r *rand.Rand) {
		call("GET", fmt.Sprintf("/v1/orgs/o%03d/groups/web/members?limit=50", r.IntN(*orgs)), "", "")
	})
	worker("all-nodes list", func(r *rand.Rand) { call("GET", "/v1/nodes?limit=50&labelSelector=role%3Dweb,env%3De1", "", "") })
	worker("terraform round", func(r *rand.Rand) {
		ws := fmt.Sprintf("/v1/state/p%04d/w%d", r.IntN(*projects), r.IntN(*spaces))
		id := fmt.Sprintf("L%d", r.Int64())
		lock := fmt.Sprintf(`{"ID":%q,"Operation":"OperationTypeApply","Who":"b@h","Version":"1.11.4","Created":"2026-11-25T00:00:00Z"}`, id)
		if st, _ := call("LOCK", ws, lock, "application/json"); st == 200 {
			call("GET", ws, "", "")
			call("POST", ws+"?ID="+id, fmt.Sprintf(`{"version":4,"terraform_version":"1.11.4","serial":%d,"lineage":"l","outputs":{},"resources":[]}`, 2+r.IntN(1000000)), "application/json")
			call("UNLOCK", ws, lock, "application/json")
		}
	})
	time.Sleep(*duration)
	close(stop)
	wg.Wait()
	after := counters()

	type row struct {
		name string
		n    float64
		c    class
	}
	var rows []row
	total := 0.0
	byClass := map[string]float64{}
	touched := 0.0
	for name, v := range after {
		d := v - before[name]
		if d <= 0 {
			continue
		}
		c, ok := classes[name]
		if !ok {
			c = class{"unclassified", "not in the map: read its query"}
		}
		rows = append(rows, row{name, d, c})
		total += d
		byClass[c.where] += d
		if c.where == "all tenants" {
			touched += d * float64(*shards)
		} else {
			touched += d
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].n > rows[j].n })
	fmt.Printf("request mix over %s: %v\n", *duration, kinds)
	fmt.Printf("| statement | executions | where its rows live | shards touched (of %d) | why |\n|---|---|---|---|---|\n", *shards)
	for _, r := range rows {
		s := "1"
		if r.c.where == "all tenants" {
			s = strconv.Itoa(*shards)
		}
		fmt.Printf("| %s | %.0f | %s | %s | %s |\n", r.name, r.n, r.c.where, s, r.c.why)
	}
	fmt.Printf("\n| where | executions | share |\n|---|---|---|\n")
	for _, k := range []string{"tenant", "project", "reference", "coordinator", "all tenants", "transaction control", "unclassified"} {
		fmt.Printf("| %s | %.0f | %.1f %% |\n", k, byClass[k], 100*byClass[k]/total)
	}
	fmt.Printf("\nshard visits per statement, on average: %.2f (1.00 would be every statement on one shard)\n", touched/total)
}
