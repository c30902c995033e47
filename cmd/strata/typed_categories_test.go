package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTypedCategoryCLI drives a typed category through the real binary and its HTTP API: a
// kind registered with `strata kind apply`, the category bound with `strata pillar category
// set --kind`, a write that violates the schema refused with a 422 naming the pointer (and
// the CLI printing it), defaults filled in, and the binding shown by get and list. A token
// that may write only one node's pillars cannot change a category's properties.
func TestTypedCategoryCLI(t *testing.T) {
	t.Parallel()
	c := newCLIEnv(t)
	c.run("org", "create", "acme")
	c.run("node", "create", "web01", "--org", "acme")
	c.run("kind", "apply", "-f", c.write("ntp.yaml", `kind: NtpFormula
scope: global
schema:
  type: object
  additionalProperties: false
  properties:
    servers: {type: array, minItems: 1, items: {type: string}}
    iburst: {type: boolean, default: true}
`))
	out := c.run("pillar", "category", "set", "ntp", "--kind", "NtpFormula")
	require.Contains(t, out, "NtpFormula")

	_, errOut, err := cliStreams(t, c.env, "pillar", "set", "ntp", "--node", "web01", "-f", c.write("bad.json", `{"servers": []}`))
	require.Error(t, err)
	require.Contains(t, errOut, "/servers")
	require.Contains(t, errOut, "NtpFormula")

	token := strings.TrimPrefix(c.env[1], "STRATA_TOKEN=")
	a := callAs(t, c.s.url, token, "PUT", "/v1/nodes/web01/pillars/ntp", `{"servers": "one"}`)
	require.Equal(t, 422, a.status, a.body)
	var problem struct {
		Errors []struct{ Field, Message string } `json:"errors"`
	}
	require.NoError(t, json.Unmarshal([]byte(a.body), &problem))
	require.Equal(t, "/servers", problem.Errors[0].Field, a.body)

	c.run("pillar", "set", "ntp", "--node", "web01", "-f", c.write("ok.json", `{"servers": ["pool.ntp.org"]}`))
	var rendered map[string]any
	require.NoError(t, json.Unmarshal([]byte(c.run("-o", "json", "pillar", "render", "web01")), &rendered))
	require.Equal(t, map[string]any{"servers": []any{"pool.ntp.org"}, "iburst": true}, rendered)

	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(c.run("-o", "json", "pillar", "category", "get", "ntp")), &got))
	require.Equal(t, "NtpFormula", got["kind"])
	require.EqualValues(t, 1, got["rows"])
	require.Contains(t, c.run("pillar", "category", "list"), "NtpFormula")

	// Properties apply at every target: a token for one node's pillars may not change them.
	var tok struct {
		Secret string `json:"secret"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.run("-o", "json", "token", "create", "web01-only", "--scope", "pillars:write:node/web01")), &tok))
	a = callAs(t, c.s.url, tok.Secret, "PUT", "/v1/pillar-categories/ntp", `{}`)
	require.Equal(t, 403, a.status, a.body)
	// A token that may change every pillar but not read the kind may not bind to it: the
	// kind named in the body is authorized as a path naming it would be.
	require.NoError(t, json.Unmarshal([]byte(c.run("-o", "json", "token", "create", "pillar-admin", "--scope", "pillars:*:*")), &tok))
	a = callAs(t, c.s.url, tok.Secret, "PUT", "/v1/pillar-categories/other", `{"kind":"NtpFormula"}`)
	require.Equal(t, 403, a.status, a.body)
	require.Contains(t, a.body, "kinds:read")
	require.Equal(t, 200, callAs(t, c.s.url, tok.Secret, "PUT", "/v1/nodes/web01/pillars/ntp", `{"servers": ["a"]}`).status)

	c.run("pillar", "category", "delete", "ntp")
	require.Equal(t, 200, callAs(t, c.s.url, token, "PUT", "/v1/nodes/web01/pillars/ntp", `{"servers": "one"}`).status, "unbound: anything goes")
}

// TestPillarExportCLI: `strata pillar export DIR` writes a tree through the real binary with
// its nodegroups; `strata pillar import DIR` on a second server whose nodes carry the same
// labels (labels are not pillar data: the export does not carry them) reads it back, finding
// the nodegroups beside the exported top.sls, to the same merged pillars and a selector group
// as a selector group; a non-empty DIR is refused.
func TestPillarExportCLI(t *testing.T) {
	t.Parallel()
	a := newCLIEnv(t)
	a.run("org", "create", "acme")
	a.run("node", "create", "web01.example.com", "--org", "acme", "--label", "role=web")
	a.run("node", "create", "db01", "--org", "acme", "--label", "role=db")
	a.run("group", "--org", "acme", "create", "web", "--node-selector", "role=web", "--priority", "5")
	a.run("pillar", "set", "app", "--global", "-f", a.write("g.json", `{"port": 80, "debug": false, "tmpl": "{{ not jinja }}"}`))
	a.run("pillar", "set", "app", "--org", "acme", "--group", "web", "-f", a.write("w.json", `{"port": 8080}`))
	a.run("pillar", "set", "app.tls", "--node", "web01.example.com", "-f", a.write("n.json", `{"tls": {"on": "yes"}}`))
	dir := filepath.Join(t.TempDir(), "tree")
	out := a.run("pillar", "export", dir, "-q")
	require.Contains(t, out, "exported 3 rows")
	for _, f := range []string{"top.sls", "nodegroups.conf", "nodegroups.json"} {
		_, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err, f)
	}
	_, errOut, err := cliStreams(t, a.env, "pillar", "export", dir)
	require.Error(t, err)
	require.Contains(t, errOut, "is not empty")

	b := newCLIEnv(t)
	b.run("org", "create", "acme")
	b.run("node", "create", "web01.example.com", "--org", "acme", "--label", "role=web")
	b.run("node", "create", "db01", "--org", "acme", "--label", "role=db")
	_, errOut, err = cliStreams(t, b.env, "pillar", "import", dir, "-q")
	require.NoError(t, err, errOut)
	require.Contains(t, errOut, "nodegroups.json")
	for _, n := range []string{"web01.example.com", "db01"} {
		require.JSONEq(t, a.run("-o", "json", "pillar", "render", n), b.run("-o", "json", "pillar", "render", n), n)
	}
	var g map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.run("-o", "json", "group", "--org", "acme", "get", "web")), &g))
	require.Equal(t, "role=web", g["spec"].(map[string]any)["selector"])

	// The ndjson sync stream carries nodes with their labels too: an empty strata gets the
	// same renders; a dry run first changes nothing; a second sync changes nothing.
	stream := filepath.Join(t.TempDir(), "pillars.ndjson")
	a.run("pillar", "export", "--format", "ndjson", stream)
	c := newCLIEnv(t)
	require.Contains(t, c.run("pillar", "import", "--format", "ndjson", stream, "--dry-run"), "dry run: nothing was changed")
	_, _, err = cliStreams(t, c.env, "node", "get", "db01")
	require.Error(t, err, "a dry run creates nothing")
	require.Contains(t, c.run("pillar", "import", "--format", "ndjson", stream), "synced")
	for _, n := range []string{"web01.example.com", "db01"} {
		require.JSONEq(t, a.run("-o", "json", "pillar", "render", n), c.run("-o", "json", "pillar", "render", n), n)
	}
	again := c.run("pillar", "import", "--format", "ndjson", stream)
	require.NotContains(t, again, "created")
	require.NotContains(t, again, "updated")
}
