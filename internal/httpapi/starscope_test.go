package httpapi_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStarFamilyPlainPrefixCrossesNoTarget is finding 1 of issue 27: a scope of family "*"
// whose name is a plain prefix (*:*:node*, *:read:o*, *:*:g*, *:*:gl*) matched the
// target-qualified names of pillars and resources (node/vdb01, org/victim, group/…, global)
// as raw text, so "everything about nodes named node…" read every node's pillars and
// secrets, "o…" every org's pillars and objects, "g…" the global layer and every group's
// pillars. Each such request is a 403 naming the scope it needed, and the plain families
// the scope was written for stay granted. Seen failing (200s) before the fix.
func TestStarFamilyPlainPrefixCrossesNoTarget(t *testing.T) {
	t.Parallel()
	b := setupIsolation(t)
	must := func(status int, method, path, body string) {
		t.Helper()
		r := b.do(t, method, path, b.admin, strings.NewReader(body))
		require.Equal(t, status, r.status, "%s %s: %s", method, path, r.body)
	}
	must(201, "POST", "/v1/nodes", `{"metadata":{"name":"node7"},"spec":{"org":"acme"}}`)
	must(201, "PUT", "/v1/nodes/vdb01/pillars/creds", `{"node_key":"`+victimSecret+`"}`)
	must(201, "PUT", "/v1/orgs/victim/pillars/app", `{"app":"`+victimSecret+`"}`)
	must(201, "PUT", "/v1/pillars/global/base", `{"globalKey":"`+victimSecret+`"}`)
	must(201, "PUT", "/v1/kinds/Database", `{"scope":"org","schema":{"type":"object","properties":{"password":{"type":"string"}}}}`)
	must(201, "POST", "/v1/orgs/victim/resources/Database", `{"metadata":{"name":"main"},"spec":{"password":"`+victimSecret+`"}}`)

	type attempt struct{ method, path, body, needs string }
	cases := []struct {
		scope   string
		refused []attempt
		granted []attempt
	}{
		{
			scope: "*:*:node*",
			refused: []attempt{
				{"GET", "/v1/nodes/vdb01/pillar", "", "pillars:render:node/vdb01"},
				{"GET", "/v1/nodes/vdb01/pillars/creds", "", "pillars:read:node/vdb01"},
				{"GET", "/v1/nodes/vdb01/pillars", "", "pillars:read:node/vdb01"},
				{"PUT", "/v1/nodes/vdb01/pillars/creds", `{"node_key":"x"}`, "pillars:write:node/vdb01"},
				{"GET", "/v1/nodes/node7/pillars", "", "pillars:read:node/node7"},
			},
			// A plain family by its plain name: the node called node7.
			granted: []attempt{{"GET", "/v1/nodes/node7", "", ""}, {"PATCH", "/v1/nodes/node7", `{"metadata":{"labels":{"a":"b"}}}`, ""}},
		},
		{
			scope: "*:read:o*",
			refused: []attempt{
				{"GET", "/v1/orgs/victim/pillars/app", "", "pillars:read:org/victim"},
				{"GET", "/v1/orgs/victim/pillars", "", "pillars:read:org/victim"},
				{"GET", "/v1/orgs/victim/resources/Database/main", "", "resources:read:org/victim"},
				{"GET", "/v1/orgs/victim/resources/Database", "", "resources:read:org/victim"},
			},
		},
		{
			scope: "*:*:g*",
			refused: []attempt{
				{"GET", "/v1/pillars/global/base", "", "pillars:read:global"},
				{"GET", "/v1/pillars/global", "", "pillars:read:global"},
				{"PUT", "/v1/pillars/global/base", `{"globalKey":"x"}`, "pillars:write:global"},
				{"PUT", "/v1/orgs/victim/groups/dbs/pillars/db", `{"password":"x"}`, "pillars:write:group/victim/dbs"},
				{"GET", "/v1/orgs/victim/groups/dbs/pillars/db", "", "pillars:read:group/victim/dbs"},
			},
		},
		{
			scope: "*:*:gl*",
			refused: []attempt{
				{"GET", "/v1/pillars/global/base", "", "pillars:read:global"},
				{"DELETE", "/v1/pillars/global/base", "", "pillars:delete:global"},
			},
		},
	}
	for _, c := range cases {
		tok := b.token(t, "star-"+strings.NewReplacer("*", "x", ":", "-").Replace(c.scope), c.scope)
		for _, at := range c.refused {
			r := b.do(t, at.method, at.path, tok, strings.NewReader(at.body))
			what := c.scope + ": " + at.method + " " + at.path
			p := problem(t, r, 403, "forbidden")
			require.Contains(t, p.Detail, at.needs, what)
			require.NotContains(t, string(r.body), victimSecret, what)
		}
		for _, at := range c.granted {
			r := b.do(t, at.method, at.path, tok, strings.NewReader(at.body))
			require.Less(t, r.status, 300, "%s: %s %s: %s", c.scope, at.method, at.path, r.body)
		}
	}
	// Salt's route renders nothing of vdb01 for *:*:node* either.
	r := b.do(t, "GET", "/v1/salt/pillar/vdb01", b.token(t, "star-salt", "*:*:node*"), nil)
	require.Equal(t, 200, r.status)
	require.Contains(t, string(r.body), "_errors")
	require.NotContains(t, string(r.body), victimSecret)
	// Nothing was written: victim's rows and the global layer are as the admin left them.
	for _, path := range []string{"/v1/nodes/vdb01/pillars/creds", "/v1/orgs/victim/groups/dbs/pillars/db", "/v1/pillars/global/base"} {
		r := b.do(t, "GET", path, b.admin, nil)
		require.Equal(t, 200, r.status, path)
		require.Contains(t, string(r.body), victimSecret, path)
	}
	// The plain families keep their plain names: *:read:o* reads orgs named o…, not victim.
	b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"ops"}}`))
	o := b.token(t, "star-read-o", "*:read:o*")
	require.Equal(t, 200, b.do(t, "GET", "/v1/orgs/ops", o, nil).status)
	problem(t, b.do(t, "GET", "/v1/orgs/victim", o, nil), 403, "forbidden")
}
