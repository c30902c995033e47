package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/pgtest"
)

// TestPillarCLI drives pillars through the real binary: set rows on several targets, render
// and explain a node, read the history, import a Salt tree (dry run, then for real), and
// create the Salt role's credentials.
func TestPillarCLI(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabaseURL(t)
	token := "strata_" + strings.Repeat("pillarCLItokenXY", 3)
	s := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--database-url", url, "--data-dir", dataDir(t))
	env := []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + token}
	run := func(args ...string) string {
		t.Helper()
		out, errOut, err := cliStreams(t, env, args...)
		require.NoError(t, err, "strata %s: %s%s", strings.Join(args, " "), out, errOut)
		return out
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	run("org", "create", "acme")
	run("node", "create", "web01", "--org", "acme", "--label", "role=web")
	run("group", "--org", "acme", "create", "web", "--node-selector", "role=web", "--priority", "5")
	run("pillar", "set", "app", "--global", "-f", write("g.json", `{"port": 80, "debug": false}`))
	run("pillar", "set", "app", "--org", "acme", "--group", "web", "-f", write("w.json", `{"port": 8080}`))
	run("pillar", "set", "app", "--node", "web01", "-f", write("n.json", `{"debug": true}`))

	var pillar map[string]any
	require.NoError(t, json.Unmarshal([]byte(run("-o", "json", "pillar", "render", "web01")), &pillar))
	require.Equal(t, map[string]any{"port": float64(8080), "debug": true}, pillar)
	// The server serves repeated renders from its cache (the metric proves the cache is
	// wired into the API, not only into the pillar package).
	// The invalidations of the sets above reach the cache asynchronously (NOTIFY), so one
	// may land after the first render and drop its entry: render until a hit, a few times.
	var metrics []byte
	for range 5 {
		run("pillar", "render", "web01")
		resp, err := http.Get(s.url + "/metrics")
		require.NoError(t, err)
		metrics, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if regexp.MustCompile(`(?m)^strata_pillar_cache_hits_total [1-9]`).Match(metrics) {
			break
		}
	}
	require.Regexp(t, `(?m)^strata_pillar_cache_hits_total [1-9]`, string(metrics))
	explain := run("pillar", "explain", "web01")
	require.Regexp(t, `port\s+8080\s+group/acme/web app`, explain, "explain says which row set each leaf")
	require.Contains(t, run("pillar", "history", "app", "--global"), "created")
	require.Contains(t, run("pillar", "list", "--node", "web01"), "app")

	tree := filepath.Join(dir, "tree")
	write("tree/top.sls", "base:\n  '*':\n    - common\n  db01:\n    - db\n")
	write("tree/common.sls", "ntp: pool.example\nmanaged: yes\n")
	write("tree/db/init.sls", "postgres:\n  port: 5432\n")
	out := run("pillar", "import", tree, "--org", "acme", "--dry-run")
	require.Contains(t, out, "dry run")
	_, _, err := cliStreams(t, env, "node", "get", "db01")
	require.Error(t, err, "a dry run creates nothing")
	run("pillar", "import", tree, "--org", "acme")
	require.NoError(t, json.Unmarshal([]byte(run("-o", "json", "pillar", "render", "db01")), &pillar))
	require.Equal(t, map[string]any{"port": float64(80), "debug": false, "ntp": "pool.example", "managed": true, "postgres": map[string]any{"port": float64(5432)}}, pillar)

	creds := run("salt", "credentials")
	require.Contains(t, creds, "node_pillars(%s)")
	require.Contains(t, creds, "as_json: True")

	// Past the server's path budget (here a 2 KB key over 600 leaves: 1.2 MB of whole paths)
	// the explanation comes front-coded, and explain still says where every leaf came from.
	leaves := map[string]int{}
	for i := range 600 {
		leaves["l"+strconv.Itoa(i)] = i
	}
	wide, err := json.Marshal(map[string]any{strings.Repeat("k", 2<<10): leaves})
	require.NoError(t, err)
	run("pillar", "set", "wide", "--node", "web01", "-f", write("wide.json", string(wide)))
	explain = run("pillar", "explain", "web01")
	require.Regexp(t, `:l0\s+0\s+node/web01 wide`, explain)
	require.Regexp(t, `:l599\s+599\s+node/web01 wide`, explain)
	require.Regexp(t, `port\s+8080\s+group/acme/web app`, explain)
}

// TestSaltSetupCLI: `strata pillar settings` changes what Salt gets for an unknown minion
// (seen through the request Salt makes), and `strata salt config` prints a block with this
// server's URL and the token command, which then works as printed.
func TestSaltSetupCLI(t *testing.T) {
	t.Parallel()
	c := newCLIEnv(t)
	s, env, run := c.s, c.env, c.run
	var settings map[string]any
	require.NoError(t, json.Unmarshal([]byte(run("pillar", "settings", "get", "-o", "json")), &settings))
	require.Equal(t, map[string]any{"mergeLists": false, "unknownMinion": "empty"}, settings)
	out := run("pillar", "settings", "set", "--unknown-minion", "error")
	require.Regexp(t, `unknown-minion\s+error`, out)
	_, errOut, err := cliStreams(t, env, "pillar", "settings", "set", "--unknown-minion", "bogus")
	require.Error(t, err)
	require.Contains(t, errOut, "--unknown-minion")

	cfg := run("salt", "config")
	require.Contains(t, cfg, "url: "+s.url+"/v1/salt/pillar/%s")
	line := regexp.MustCompile(`strata --server \S+ token create salt-master --scope 'pillars:render:node/\*'`).FindString(cfg)
	require.NotEmpty(t, line, cfg)
	created := run("token", "create", "salt-master", "--scope", "pillars:render:node/*")
	secret := regexp.MustCompile(`strata_[A-Za-z0-9_-]{32,}`).FindString(created)
	require.NotEmpty(t, secret, created)

	req, err := http.NewRequest("GET", s.url+"/v1/salt/pillar/ghost", nil)
	require.NoError(t, err)
	req.SetBasicAuth("salt", secret)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.JSONEq(t, `{"_errors": ["strata: minion \"ghost\" is not a node in strata, and the pillar setting unknownMinion is \"error\" — create the node (`+"`strata node create ghost --org ORG`"+`), or set unknownMinion to \"empty\" (`+"`strata pillar settings set --unknown-minion empty`"+`)"]}`, string(body))
	run("pillar", "settings", "set", "--unknown-minion", "empty")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.JSONEq(t, `{}`, string(body))
}
