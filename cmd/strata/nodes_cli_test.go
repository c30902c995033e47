package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/pgtest"
)

// cliStreams runs the strata binary as a client and returns stdout and stderr apart (the
// node apply progress bar goes to stderr).
func cliStreams(t *testing.T, env []string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// writeInventory writes n apply lines: nodes node-00001…, each with 5 labels and, in turn,
// the groups web+db or web alone.
func writeInventory(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	w := bufio.NewWriter(f)
	for i := 1; i <= n; i++ {
		groups := []string{"web", "db"}
		if i%2 == 0 {
			groups = []string{"web"}
		}
		line := map[string]any{
			"metadata": map[string]any{
				"name": fmt.Sprintf("node-%05d", i),
				"labels": map[string]string{
					"env":            []string{"prod", "staging"}[i%2],
					"rack":           fmt.Sprintf("r%02d", i%40),
					"role":           []string{"web", "db", "cache"}[i%3],
					"dc":             fmt.Sprintf("dc%d", i%4),
					"example.com/id": fmt.Sprint(i),
				},
			},
			"spec":   map[string]any{"org": "acme"},
			"groups": groups,
		}
		b, err := json.Marshal(line)
		require.NoError(t, err)
		_, err = w.Write(append(b, '\n'))
		require.NoError(t, err)
	}
	require.NoError(t, w.Flush())
	require.NoError(t, f.Close())
}

// TestNodeGroupCLI drives the node and group commands through the real binary against a
// running server, including a 10,000-line `node apply` and an org that refuses to go while
// it still has nodes and groups.
func TestNodeGroupCLI(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabaseURL(t)
	token := "strata_" + strings.Repeat("nodeGroupCLIToken", 3)
	s := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--database-url", url, "--data-dir", dataDir(t))
	env := []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + token}
	run := func(args ...string) string {
		t.Helper()
		out, err := cli(t, env, args...)
		require.NoError(t, err, "strata %s", strings.Join(args, " "))
		return out
	}
	getNode := func(name string) client.Object {
		t.Helper()
		var o client.Object
		require.NoError(t, json.Unmarshal([]byte(run("node", "get", name, "-o", "json")), &o))
		return o
	}

	run("org", "create", "acme")
	out := run("node", "create", "web01", "--org", "acme", "--label", "env=prod", "--label", "tier=web")
	require.Contains(t, out, "env=prod,tier=web")
	run("node", "create", "db01", "--org", "acme", "--label", "env=staging")
	_, err := cli(t, env, "node", "create", "lost01", "--org", "nope")
	requireFailsWith(t, err, "--org: org \"nope\" does not exist") // the flag the user gave, not /spec/org (issue 29)
	require.ErrorContains(t, err, `org "nope" does not exist`)
	_, err = cli(t, env, "node", "create", "orphan01")
	require.ErrorContains(t, err, "/spec/org", "a node needs an org")
	o := getNode("web01")
	require.JSONEq(t, `{"org":"acme"}`, string(o.Spec))

	// label: k=v sets, k- removes; annotate likewise.
	out = run("node", "label", "web01", "rack=r1", "tier-")
	require.Contains(t, out, "env=prod,rack=r1")
	require.NotContains(t, out, "tier=")
	run("node", "annotate", "web01", "owner=alice", "note=racked in 2026")
	run("node", "annotate", "web01", "note-")
	o = getNode("web01")
	require.Equal(t, map[string]string{"env": "prod", "rack": "r1"}, o.Metadata.Labels)
	require.Equal(t, map[string]string{"owner": "alice"}, o.Metadata.Annotations)
	_, err = cli(t, env, "node", "label", "web01", "Bad Key!=x")
	requireFailsWith(t, err, "/metadata/labels/Bad Key!: invalid label key")

	// list -l: a label selector.
	var list client.ObjectList
	require.NoError(t, json.Unmarshal([]byte(run("node", "list", "-l", "env=prod", "-o", "json")), &list))
	require.Len(t, list.Items, 1)
	require.Equal(t, "web01", list.Items[0].Metadata.Name)
	require.NoError(t, json.Unmarshal([]byte(run("node", "list", "-l", "env in (prod,staging),!rack", "-o", "json")), &list))
	require.Len(t, list.Items, 1)
	require.Equal(t, "db01", list.Items[0].Metadata.Name)
	_, err = cli(t, env, "node", "list", "-l", "env>1")
	requireFailsWith(t, err, "-l/--selector: invalid label selector \"env>1\"")

	// Groups: priority and a node selector; static members added by name.
	run("group", "--org", "acme", "create", "web", "--priority", "10", "--node-selector", "env=prod")
	run("group", "--org", "acme", "create", "db")
	var g client.Object
	require.NoError(t, json.Unmarshal([]byte(run("group", "--org", "acme", "get", "web", "-o", "json")), &g))
	require.JSONEq(t, `{"priority":10,"selector":"env=prod"}`, string(g.Spec))
	_, err = cli(t, env, "group", "--org", "acme", "create", "bad", "--node-selector", "env>prod")
	require.ErrorContains(t, err, "--node-selector: invalid label selector") // the flag, not /spec/selector (issue 29)
	run("group", "--org", "acme", "add-member", "web", "db01")
	var members struct {
		Items []client.Member `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(run("group", "--org", "acme", "members", "web", "-o", "json")), &members))
	require.Equal(t, []client.Member{{Node: "db01", Static: true}, {Node: "web01", Selected: true}}, members.Items)
	out = run("group", "--org", "acme", "members", "web")
	require.Regexp(t, `db01\s+true\s+false`, out)
	require.Regexp(t, `web01\s+false\s+true`, out)
	run("group", "--org", "acme", "remove-member", "web", "db01")
	require.NoError(t, json.Unmarshal([]byte(run("group", "--org", "acme", "members", "web", "-o", "json")), &members))
	require.Equal(t, []client.Member{{Node: "web01", Selected: true}}, members.Items)
	_, err = cli(t, env, "group", "--org", "acme", "add-member", "web", "ghost01")
	requireFailsWith(t, err, "Node \"ghost01\" not found")

	// node apply: a 10,000-line inventory, with the progress bar on stderr.
	const n = 10000
	inv := filepath.Join(t.TempDir(), "inventory.ndjson")
	writeInventory(t, inv, n)
	start := time.Now()
	stdout, stderr, err := cliStreams(t, env, "node", "apply", "-f", inv, "-o", "json")
	elapsed := time.Since(start)
	require.NoError(t, err, stderr)
	t.Logf("strata node apply of %d new nodes (5 labels, 1-2 groups each): %v", n, elapsed.Round(time.Millisecond))
	var sum client.ApplySummary
	require.NoError(t, json.Unmarshal([]byte(stdout), &sum), stdout)
	require.Equal(t, client.ApplySummary{Lines: n, Created: n}, sum)
	require.Regexp(t, fmt.Sprintf(`(?m)^%d lines applied \(%d of %d, 100%%, [0-9hms]+\)$`, n, n, n), stderr, "written to a pipe, progress is plain lines of counts")
	require.NotContains(t, stderr, "\r", "no bar is drawn into a pipe")

	var nodes client.ObjectList
	require.NoError(t, json.Unmarshal([]byte(run("node", "list", "-o", "json")), &nodes))
	require.Len(t, nodes.Items, n+2, "the applied nodes, web01 and db01")
	o = getNode("node-00042")
	require.Equal(t, map[string]string{"env": "prod", "rack": "r02", "role": "web", "dc": "dc2", "example.com/id": "42"}, o.Metadata.Labels)
	require.NoError(t, json.Unmarshal([]byte(run("group", "--org", "acme", "members", "db", "-o", "json")), &members))
	require.Len(t, members.Items, n/2, "the odd nodes are static members of db")
	require.NoError(t, json.Unmarshal([]byte(run("group", "--org", "acme", "members", "web", "-o", "json")), &members))
	require.Len(t, members.Items, n+1, "every applied node statically, web01 by the selector")

	// The same file again: nothing changes.
	start = time.Now()
	out = run("node", "apply", "-f", inv, "-q")
	t.Logf("strata node apply of the same %d nodes again (all unchanged): %v", n, time.Since(start).Round(time.Millisecond))
	require.Equal(t, fmt.Sprintf("%d lines: 0 failed, %d applied (0 created, 0 updated, %d unchanged)\n", n, n, n), out)
	require.Equal(t, o.Metadata.ResourceVersion, getNode("node-00042").Metadata.ResourceVersion)

	// Bad lines: the good ones are applied, each bad one is named on stderr, and the exit
	// status says the apply was not clean. Input from stdin (-f -).
	cmd := exec.Command(binary, "node", "apply", "-f", "-", "-q")
	cmd.Env = append(os.Environ(), env...)
	// Failed lines are reported one per line, in input order, with the node's name when the
	// line gave one, and each reason once.
	var in strings.Builder
	in.WriteString(`{"metadata":{"name":"late01"},"spec":{"org":"acme"}}` + "\n")
	in.WriteString(`{"metadata":{"name":"late02"},"spec":{"org":"nope"}}` + "\n")
	in.WriteString(`{"metadata":{"name":"late03"` + "\n") // malformed: no name can be read
	for i := 4; i <= 1200; i++ {                          // later batches commit first
		fmt.Fprintf(&in, `{"metadata":{"name":"late%02d"},"spec":{"org":"acme"}}`+"\n", i)
	}
	in.WriteString(`{"metadata":{"name":"late1201"},"spec":{"org":"nope"}}` + "\n")
	cmd.Stdin = strings.NewReader(in.String())
	var cout, cerr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &cout, &cerr
	require.Error(t, cmd.Run())
	require.Contains(t, cout.String(), "1201 lines: 3 failed, 1198 applied (1198 created, 0 updated, 0 unchanged)")
	require.Equal(t, `line 2 (late02): /spec/org: org "nope" does not exist
line 3: the request body ends in the middle of a JSON value
line 1201 (late1201): /spec/org: org "nope" does not exist
error: 3 of 1201 lines failed
`, cerr.String())
	getNode("late01")

	// An org with nodes and groups is not deleted without --cascade (409), and with it
	// goes with everything in it.
	_, err = cli(t, env, "org", "delete", "acme")
	requireFailsWith(t, err, "delete the org with --cascade")
	require.ErrorContains(t, err, "cascade")
	getNode("web01")
	out = run("org", "delete", "acme", "--cascade")
	require.Contains(t, out, "org acme deleted")
	_, err = cli(t, env, "node", "get", "web01")
	requireFailsWith(t, err, "Node \"web01\" not found")
	require.NoError(t, json.Unmarshal([]byte(run("node", "list", "-o", "json")), &nodes))
	require.Empty(t, nodes.Items)
	_, err = cli(t, env, "group", "--org", "acme", "get", "web")
	requireFailsWith(t, err, "Group \"web\" not found in org \"acme\"")
}

// cliEnv is a server on a fresh database with a known admin token, and the CLI pointed at it.
type cliEnv struct {
	t   *testing.T
	s   *server
	url string // the database's
	env []string
	dir string
}

// newCLIEnv starts a server for a CLI test.
func newCLIEnv(t *testing.T) *cliEnv {
	t.Helper()
	url := pgtest.NewDatabaseURL(t)
	token := "strata_" + strings.Repeat("cliEnvTokenXY", 3)
	s := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--database-url", url, "--data-dir", dataDir(t))
	return &cliEnv{t: t, s: s, url: url, env: []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + token}, dir: t.TempDir()}
}

// run runs the CLI and fails the test unless it succeeds; it returns stdout.
func (c *cliEnv) run(args ...string) string {
	c.t.Helper()
	out, errOut, err := cliStreams(c.t, c.env, args...)
	require.NoError(c.t, err, "strata %s: %s%s", strings.Join(args, " "), out, errOut)
	return out
}

// write writes a file for the CLI to read and returns its path.
func (c *cliEnv) write(name, text string) string {
	c.t.Helper()
	p := filepath.Join(c.dir, name)
	require.NoError(c.t, os.MkdirAll(filepath.Dir(p), 0o700))
	require.NoError(c.t, os.WriteFile(p, []byte(text), 0o600))
	return p
}
