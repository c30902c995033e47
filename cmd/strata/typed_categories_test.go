package main_test

import (
	"encoding/json"
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
	require.Equal(t, 200, callAs(t, c.s.url, tok.Secret, "PUT", "/v1/nodes/web01/pillars/ntp", `{"servers": ["a"]}`).status)

	c.run("pillar", "category", "delete", "ntp")
	require.Equal(t, 200, callAs(t, c.s.url, token, "PUT", "/v1/nodes/web01/pillars/ntp", `{"servers": "one"}`).status, "unbound: anything goes")
}
