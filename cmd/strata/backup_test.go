package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/pgtest"
)

// TestBackupUnderLoadRestores (issue 21): strata on its embedded default with a Terraform
// workspace (applied through the http backend, then locked), a pillar and nodes; a writer
// PATCHes a label with an increasing value while `strata backup create` runs beside the
// server. The backup restored into a new data dir holds every write acknowledged before the
// backup began; the restored server answers the workspace's lock as released (and says why in
// the audit log), and Terraform plans no changes against it. A restore into a non-empty data
// dir, or into a database that has strata's schema, is refused.
func TestBackupUnderLoadRestores(t *testing.T) {
	t.Parallel()
	token := "strata_" + strings.Repeat("backupTokenXYZab", 3)
	dir := dataDir(t)
	a := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--data-dir", dir)
	env := []string{"STRATA_SERVER=" + a.url, "STRATA_TOKEN=" + token}
	run := func(env []string, args ...string) string {
		t.Helper()
		out, errOut, err := cliStreams(t, env, args...)
		require.NoError(t, err, "strata %s: %s%s", strings.Join(args, " "), out, errOut)
		return out
	}
	run(env, "org", "create", "acme")
	run(env, "node", "create", "n0", "--org", "acme")
	echo := filepath.Join(t.TempDir(), "p.json")
	require.NoError(t, os.WriteFile(echo, []byte(`{"app": {"port": 8080}}`), 0o600))
	run(env, "pillar", "set", "app", "--node", "n0", "-f", echo)
	run(env, "project", "create", "net")
	tf := newTF(t, httpBackendConfig(a.url, "net", "default", "one"), "TF_HTTP_PASSWORD="+token)
	tf.ok("init", "-no-color")
	tf.ok("apply", "-auto-approve", "-no-color")
	run(env, "state", "lock", "net", "default")

	// The writer: acknowledged values with the time of their acknowledgement.
	type ack struct {
		v  int
		at time.Time
	}
	var (
		mu    sync.Mutex
		acks  []ack
		stop  = make(chan struct{})
		wdone = make(chan struct{})
	)
	go func() {
		defer close(wdone)
		for v := 1; ; v++ {
			select {
			case <-stop:
				return
			default:
			}
			req, _ := http.NewRequest("PATCH", a.url+"/v1/nodes/n0", strings.NewReader(fmt.Sprintf(`{"metadata":{"labels":{"v":"%d"}}}`, v)))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/merge-patch+json")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					mu.Lock()
					acks = append(acks, ack{v, time.Now()})
					mu.Unlock()
				}
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	file := filepath.Join(t.TempDir(), "strata.backup")
	began := time.Now()
	out := run(nil, "backup", "create", file, "--data-dir", dir, "-q")
	require.Contains(t, out, "backed up")
	time.Sleep(200 * time.Millisecond)
	close(stop)
	<-wdone
	lastBefore := 0
	for _, a := range acks {
		if a.at.Before(began) {
			lastBefore = a.v
		}
	}
	require.Positive(t, lastBefore, "the writer had writes acknowledged before the backup began")

	restored := dataDir(t)
	require.NoError(t, os.Remove(restored)) // a new data dir: restore makes it
	out = run(nil, "backup", "restore", file, "--data-dir", restored, "-q")
	require.Contains(t, out, "1 Terraform lock of the old installation released")
	_, errOut, err := cliStreams(t, nil, "backup", "restore", file, "--data-dir", restored)
	require.Error(t, err)
	require.Contains(t, errOut, "already holds a PostgreSQL cluster")
	_, errOut, err = cliStreams(t, nil, "backup", "restore", file, "--database-url", pgtest.NewDatabaseURL(t))
	require.Error(t, err)
	require.Contains(t, errOut, "restore only into an empty database")

	b := startServer(t, nil, "--data-dir", restored)
	envB := []string{"STRATA_SERVER=" + b.url, "STRATA_TOKEN=" + token}
	// docs/operations.md (issue 29, finding 9): a restored data dir has no admin-token (the
	// restored database has its admin already); the source's tokens work, and make new ones.
	_, err = os.Stat(filepath.Join(restored, "admin-token"))
	require.ErrorIs(t, err, os.ErrNotExist, "a restored data dir has no admin-token")
	fresh := strings.TrimSpace(run(envB, "token", "create", "ops-after-restore", "--scope", "admin", "-q"))
	require.NoError(t, os.WriteFile(filepath.Join(restored, "admin-token"), []byte(fresh+"\n"), 0o600))
	require.Contains(t, run([]string{"STRATA_SERVER=" + b.url, "STRATA_DATA_DIR=" + restored}, "token", "list"), "ops-after-restore",
		"the new token, written as the data dir's admin-token, is the CLI's default")
	var node struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal([]byte(run(envB, "-o", "json", "node", "get", "n0")), &node))
	v, _ := strconv.Atoi(node.Metadata.Labels["v"])
	require.GreaterOrEqual(t, v, lastBefore, "a write acknowledged before the backup began is missing from it")
	require.JSONEq(t, `{"app":{"port":8080}}`, run(envB, "-o", "json", "pillar", "render", "n0"))
	lock := callAs(t, b.url, token, "GET", "/v1/state/net/default/lock", "")
	require.Equal(t, 200, lock.status)
	require.JSONEq(t, `{"locked":false,"protected":false}`, lock.body, "a restored lock is not held")
	require.Contains(t, run(envB, "audit", "--action", "state.force-unlock"), "strata backup restore")

	// Terraform, pointed at the restored server, finds nothing to change.
	tf2 := newTF(t, httpBackendConfig(b.url, "net", "default", "one"), "TF_HTTP_PASSWORD="+token)
	tf2.ok("init", "-no-color")
	plan, err := tf2.run("plan", "-no-color", "-detailed-exitcode")
	require.NoError(t, err, "plan against the restored state: exit 0 is no changes (2 would be changes):\n%s", plan)
	require.Contains(t, plan, "No changes")
}

// TestBackupExternalDatabase: a backup of strata on an external database restores into an
// empty database, which a server then serves as it was (objects, pillars, Terraform versions).
func TestBackupExternalDatabase(t *testing.T) {
	t.Parallel()
	c := newCLIEnv(t)
	c.run("org", "create", "acme")
	c.run("node", "create", "web01", "--org", "acme", "--label", "role=web")
	c.run("pillar", "set", "app", "--org", "acme", "-f", c.write("p.json", `{"port": 80}`))
	c.run("project", "create", "net")
	c.run("state", "push", "net", "default", c.write("s.json", `{"version":4,"terraform_version":"1.11.4","serial":3,"lineage":"l-9","outputs":{},"resources":[]}`))
	file := filepath.Join(t.TempDir(), "ext.backup")
	out, errOut, err := cliStreams(t, nil, "backup", "create", file, "--database-url", c.url, "-q")
	require.NoError(t, err, errOut)
	require.Contains(t, out, "backed up")
	empty := pgtest.NewEmptyDatabaseURL(t)
	out, errOut, err = cliStreams(t, nil, "backup", "restore", file, "--database-url", empty, "-q")
	require.NoError(t, err, errOut)
	require.Contains(t, out, "restored")
	token := strings.TrimPrefix(c.env[1], "STRATA_TOKEN=")
	b := startServer(t, nil, "--database-url", empty, "--data-dir", dataDir(t))
	envB := []string{"STRATA_SERVER=" + b.url, "STRATA_TOKEN=" + token}
	got, errOut, err := cliStreams(t, envB, "-o", "json", "pillar", "render", "web01")
	require.NoError(t, err, errOut)
	require.JSONEq(t, `{"port":80}`, got)
	got, errOut, err = cliStreams(t, envB, "state", "versions", "net", "default")
	require.NoError(t, err, errOut)
	require.Contains(t, got, "l-9")
}

// TestRestoreIsNewHistory (issue 28, finding 5): a restore into a second database of the same
// cluster keeps the source's system identifier and timeline, so the history epoch of
// migration 0024 alone would not see it as a new history. The source goes on writing past the
// restore point; on the restored copy every watch from a source version is a 410 (list again),
// and the first version it hands out exceeds every version the source issued, so no version
// names two different changes.
func TestRestoreIsNewHistory(t *testing.T) {
	t.Parallel()
	c := newCLIEnv(t)
	token := strings.TrimPrefix(c.env[1], "STRATA_TOKEN=")
	call := func(base, method, path, body string) answer {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		if method == "PATCH" {
			req.Header.Set("Content-Type", "application/merge-patch+json")
		}
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf) // a watch answers with its first bytes; enough to see the status
		return answer{status: resp.StatusCode, body: string(buf[:n])}
	}
	rv := func(a answer) int64 {
		t.Helper()
		var o struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		require.NoError(t, json.Unmarshal([]byte(a.body), &o), a.body)
		v, err := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
		require.NoError(t, err)
		return v
	}
	patch := func(base, v string) int64 {
		t.Helper()
		a := call(base, "PATCH", "/v1/nodes/n0", `{"metadata":{"labels":{"v":"`+v+`"}}}`)
		require.Equal(t, 200, a.status, a.body)
		return rv(a)
	}
	require.Equal(t, 201, call(c.s.url, "POST", "/v1/orgs", `{"metadata":{"name":"acme"}}`).status)
	require.Equal(t, 201, call(c.s.url, "POST", "/v1/nodes", `{"metadata":{"name":"n0"},"spec":{"org":"acme"}}`).status)
	atBackup := patch(c.s.url, "at-backup")
	file := filepath.Join(t.TempDir(), "fork.backup")
	_, errOut, err := cliStreams(t, nil, "backup", "create", file, "--database-url", c.url, "-q")
	require.NoError(t, err, errOut)
	// The source goes on past the restore point: these versions exist only there.
	var sourceMax int64
	for i := 0; i < 20; i++ {
		sourceMax = patch(c.s.url, fmt.Sprintf("source-%d", i))
	}
	require.Greater(t, sourceMax, atBackup)

	second := pgtest.NewEmptyDatabaseURL(t) // same cluster: same system identifier and timeline
	_, errOut, err = cliStreams(t, nil, "backup", "restore", file, "--database-url", second, "-q")
	require.NoError(t, err, errOut)
	b := startServer(t, nil, "--database-url", second, "--data-dir", dataDir(t))

	for _, from := range []int64{sourceMax, sourceMax - 5, atBackup} {
		w := call(b.url, "GET", fmt.Sprintf("/v1/nodes?watch=true&resourceVersion=%d", from), "")
		require.Equal(t, 410, w.status, "a watch from source version %d on the restored copy lists again: %s", from, w.body)
		require.Contains(t, w.body, "restored")
	}
	first := patch(b.url, "restored-copy")
	require.Greater(t, first, sourceMax+900_000_000, "the restored copy's first version lies past every version the source issued")
	// Restoring the same backup again is one more new history: again past everything.
	third := pgtest.NewEmptyDatabaseURL(t)
	_, errOut, err = cliStreams(t, nil, "backup", "restore", file, "--database-url", third, "-q")
	require.NoError(t, err, errOut)
	c3 := startServer(t, nil, "--database-url", third, "--data-dir", dataDir(t))
	require.Equal(t, 410, call(c3.url, "GET", fmt.Sprintf("/v1/nodes?watch=true&resourceVersion=%d", sourceMax), "").status)
	require.Greater(t, patch(c3.url, "third"), sourceMax+900_000_000)
	list := call(b.url, "GET", "/v1/nodes", "")
	require.Equal(t, 200, list.status)
	require.Contains(t, list.body, `"v":"restored-copy"`)
}
