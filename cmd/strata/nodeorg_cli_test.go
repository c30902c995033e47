package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
)

// TestPillarExportOrgCLI: `strata pillar export DIR --org ORG` writes the tree of one org
// (with the global rows) and leaves the other orgs' rows out. The client once appended the
// query to the path, and the server answered "no route for GET /v1/pillars:export?org=acme"
// (issue 29, finding 11).
func TestPillarExportOrgCLI(t *testing.T) {
	t.Parallel()
	c := newCLIEnv(t)
	c.run("org", "create", "acme")
	c.run("org", "create", "globex")
	c.run("pillar", "set", "app", "--global", "-f", c.write("g.json", `{"port": 80}`))
	c.run("pillar", "set", "app", "--org", "acme", "-f", c.write("a.json", `{"owner": "acme-ops"}`))
	c.run("pillar", "set", "app", "--org", "globex", "-f", c.write("x.json", `{"owner": "globex-ops"}`))

	dir := filepath.Join(t.TempDir(), "acme")
	c.run("pillar", "export", dir, "--org", "acme", "-q")
	var all []byte
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		all = append(all, b...)
		return err
	}))
	require.Contains(t, string(all), "acme-ops")
	require.Contains(t, string(all), `"port": 80`, "the global rows come with one org's tree")
	require.NotContains(t, string(all), "globex-ops", "another org's rows stay out")
}

// TestNodeListByOrgCLI is item 3 of issue 29 through the real binary: `node list` and `get
// node` take --org (the server filters) and -A/--all-orgs (every org the token sees, also
// the default), the node table has an ORG column, -o wide adds org and annotations, and a
// flag a command does not use is an error, never ignored. Seen failing before the change
// (`node list --org` was an unknown flag; `get node --org nosuch` listed every org's nodes).
func TestNodeListByOrgCLI(t *testing.T) {
	t.Parallel()
	c := newCLIEnv(t)
	c.run("org", "create", "acme")
	c.run("org", "create", "globex")
	c.run("node", "create", "web01", "--org", "acme", "--label", "env=prod")
	c.run("node", "create", "web02", "--org", "acme", "--label", "env=dev")
	c.run("node", "create", "db01", "--org", "globex", "--label", "env=prod")
	names := func(args ...string) []string {
		t.Helper()
		var l client.ObjectList
		require.NoError(t, json.Unmarshal([]byte(c.run(append(args, "-o", "json")...)), &l))
		out := []string{}
		for _, o := range l.Items {
			out = append(out, o.Metadata.Name)
		}
		return out
	}
	fails := func(want string, args ...string) {
		t.Helper()
		_, errOut, err := cliStreams(t, c.env, args...)
		require.Error(t, err, "strata %s", strings.Join(args, " "))
		require.Contains(t, errOut, want, "strata %s", strings.Join(args, " "))
	}

	require.Equal(t, []string{"web01", "web02"}, names("node", "list", "--org", "acme"))
	require.Equal(t, []string{"web01"}, names("node", "list", "--org", "acme", "-l", "env=prod"))
	require.Equal(t, []string{"db01"}, names("get", "node", "--org", "globex"))
	require.Equal(t, []string{"db01"}, names("get", "nodes", "--org", "globex", "-l", "env=prod"))
	require.Equal(t, []string{"db01", "web01", "web02"}, names("node", "list"), "without --org: every org, as before")
	require.Equal(t, []string{"db01", "web01", "web02"}, names("node", "list", "-A"))
	require.Equal(t, []string{"db01", "web01", "web02"}, names("get", "node", "--all-orgs"))

	// The table has ORG; -o wide adds annotations (and ORG for every kind with an org).
	out := c.run("node", "list")
	require.Regexp(t, `(?m)^NAME\s+ORG\s+LABELS\s+RESOURCE VERSION\s+AGE$`, out)
	require.Regexp(t, `(?m)^db01\s+globex\s+env=prod\s`, out)
	require.Regexp(t, `(?m)^web01\s+acme\s+env=prod\s`, out)
	out = c.run("get", "node", "--org", "acme", "-o", "wide")
	require.Regexp(t, `(?m)^NAME\s+ORG\s+LABELS\s+ANNOTATIONS\s+RESOURCE VERSION\s+AGE$`, out)
	require.NotContains(t, out, "db01")
	c.run("group", "--org", "acme", "create", "web")
	out = c.run("group", "--org", "acme", "list", "-o", "wide")
	require.Regexp(t, `(?m)^web\s+acme\s`, out, "groups show their org in the wide table")
	out = c.run("node", "get", "web01")
	require.Regexp(t, `(?m)^web01\s+acme\s+env=prod\s`, out)

	// Errors, never silence.
	fails(`Org "nosuch" not found`, "get", "node", "--org", "nosuch")
	fails(`Org "nosuch" not found`, "node", "list", "--org", "nosuch")
	fails("exclude each other", "node", "list", "--org", "acme", "-A")
	fails(`node "db01" is in org "globex", not "acme"`, "get", "node", "db01", "--org", "acme")
	fails("drop -A", "get", "node", "db01", "-A")
	fails("orgs belong to no org: drop --org", "get", "org", "--org", "acme")
	fails("-A/--all-orgs applies to kinds whose objects belong to an org", "get", "group", "--org", "acme", "-A")
	fails("unknown shorthand flag: 'A'", "group", "--org", "acme", "list", "-A")
	fails("unknown flag: --org", "org", "list", "--org", "acme")
	fails("-o wide: strata token list has no wide table", "token", "list", "-o", "wide")
	fails("orgs belong to no org: drop --org", "delete", "org", "acme", "--org", "acme")
	fails(`node "db01" is in org "globex", not "acme"`, "delete", "node", "db01", "--org", "acme")
	require.Contains(t, names("node", "list", "--org", "globex"), "db01", "not deleted")
	c.run("node", "create", "tmp01", "--org", "acme")
	c.run("delete", "node", "tmp01", "--org", "acme")
	require.NotContains(t, names("node", "list"), "tmp01")
	out, _, err := cliStreams(t, c.env, "org", "create", "initech", "-o", "wide")
	require.NoError(t, err, "create prints the object table, which has a wide form")
	require.Contains(t, out, "initech")

	// A token that may read org acme's nodes only: globex answers as a missing org.
	var tok client.Token
	require.NoError(t, json.Unmarshal([]byte(c.run("-o", "json", "token", "create", "acme-nodes",
		"--scope", "nodes:read:*", "--scope", "orgs:read:acme")), &tok))
	reader := []string{c.env[0], "STRATA_TOKEN=" + tok.Secret}
	_, errOut, err := cliStreams(t, reader, "get", "node", "--org", "globex")
	require.Error(t, err)
	require.Contains(t, errOut, `Org "globex" not found`)
	out, _, err = cliStreams(t, reader, "node", "list", "--org", "acme")
	require.NoError(t, err)
	require.Contains(t, out, "web02")
	require.NotContains(t, out, "db01")

	// strata watch node --org: acme's nodes only, and a node leaving acme as DELETED.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "watch", "node", "--org", "acme", "-o", "json")
	cmd.Env = append(os.Environ(), c.env...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	event := func() string {
		t.Helper()
		for {
			require.True(t, lines.Scan(), "the watch ended")
			var ev client.Event
			require.NoError(t, json.Unmarshal(lines.Bytes(), &ev))
			if ev.Type != client.EventBookmark {
				return ev.Type + " " + ev.Object.Metadata.Name
			}
		}
	}
	require.Equal(t, "ADDED web01", event())
	require.Equal(t, "ADDED web02", event())
	c.run("node", "label", "db01", "seen=no")
	c.run("node", "apply", "-q", "-f", c.write("move.ndjson", `{"metadata":{"name":"web02","labels":{"env":"dev"}},"spec":{"org":"globex"}}`+"\n"))
	require.Equal(t, "DELETED web02", event())
	c.run("node", "create", "web03", "--org", "acme")
	require.Equal(t, "ADDED web03", event())
}
