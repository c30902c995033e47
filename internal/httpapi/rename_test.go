package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pgtest"
)

var renameQueries = db.MustParseQueries(fstest.MapFS{"rename.sql": {Data: []byte(`
-- name: TestNodeChanges
SELECT type || ' ' || name FROM {{schema}}.changes WHERE kind = 'Node' ORDER BY resource_version;
`)}}, "rename.sql")

// TestNodeRename (issue 19, item 1): a minion's id changed; a node was deleted and created
// again, losing its labels, memberships, pillars and their history. POST …/rename keeps all of
// them (they hang off the row), re-keys the pillar history, refuses a taken name (409 naming
// /name), shows watchers the old name DELETED and the new one ADDED, and is one audit record.
func TestNodeRename(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := pgtest.NewDB(t)
	b := serveOn(t, d, nil)
	admin := b.admin
	must := func(status int, method, path, body string) string {
		t.Helper()
		r := b.do(t, method, path, admin, strings.NewReader(body))
		require.Equal(t, status, r.status, "%s %s: %s", method, path, r.body)
		return string(r.body)
	}
	must(201, "POST", "/v1/orgs", `{"metadata":{"name":"acme"}}`)
	must(201, "POST", "/v1/nodes", `{"metadata":{"name":"web01","labels":{"role":"web"}},"spec":{"org":"acme"}}`)
	must(201, "POST", "/v1/orgs/acme/groups", `{"metadata":{"name":"web"}}`)
	must(201, "PUT", "/v1/orgs/acme/groups/web/members/web01", "")
	must(201, "PUT", "/v1/nodes/web01/pillars/app", `{"port":1}`)
	must(200, "PUT", "/v1/nodes/web01/pillars/app", `{"port":2}`)
	must(201, "POST", "/v1/nodes", `{"metadata":{"name":"web02"},"spec":{"org":"acme"}}`)

	taken := b.do(t, "POST", "/v1/nodes/web01/rename", admin, strings.NewReader(`{"name":"web02"}`))
	require.Equal(t, 409, taken.status, string(taken.body))
	require.Contains(t, string(taken.body), `"/name"`)
	require.Equal(t, 400, b.do(t, "POST", "/v1/nodes/web01/rename", admin, strings.NewReader(`{"name":"Bad Name!"}`)).status)

	before := must(200, "GET", "/v1/nodes/web01", "")
	uid := jsonField(t, before, "metadata", "uid")
	require.NotEmpty(t, uid, "objects carry a uid")
	out := must(200, "POST", "/v1/nodes/web01/rename", `{"name":"web03"}`)
	require.Equal(t, uid, jsonField(t, out, "metadata", "uid"), "a rename keeps the uid: consumers tell it from a replacement")
	require.NotEqual(t, uid, jsonField(t, must(200, "GET", "/v1/nodes/web02", ""), "metadata", "uid"))
	bad := b.do(t, "PATCH", "/v1/nodes/web03", admin, strings.NewReader(`{"metadata":{"uid":"u-other"}}`), "Content-Type", "application/merge-patch+json")
	require.Equal(t, 400, bad.status, "the uid is read-only: %s", bad.body)
	require.Contains(t, string(bad.body), "/metadata/uid")
	require.Equal(t, 400, b.do(t, "POST", "/v1/nodes", admin, strings.NewReader(`{"metadata":{"name":"web09","uid":"u1"},"spec":{"org":"acme"}}`)).status)
	require.Contains(t, out, `"name":"web03"`)
	require.Contains(t, out, `"role":"web"`, "labels follow")
	require.Equal(t, 404, b.do(t, "GET", "/v1/nodes/web01", admin, nil).status)
	must(200, "GET", "/v1/nodes/web03", "")
	require.Contains(t, must(200, "GET", "/v1/nodes/web03/pillar", ""), `"port":2`, "pillars follow")
	require.Contains(t, must(200, "GET", "/v1/orgs/acme/groups/web/members", ""), `"node":"web03"`, "memberships follow")
	hist := must(200, "GET", "/v1/nodes/web03/pillars/app/history", "")
	require.Equal(t, 2, strings.Count(hist, `"revision"`), "the pillar history follows: %s", hist)
	audit := must(200, "GET", "/v1/audit?action=object.rename", "")
	require.Contains(t, audit, `"target":"Node/web01"`)
	require.Contains(t, audit, `Node/web03`)

	rows, err := d.Query(ctx, renameQueries.Get("TestNodeChanges"))
	require.NoError(t, err)
	var changes []string
	for rows.Next() {
		var c string
		require.NoError(t, rows.Scan(&c))
		changes = append(changes, c)
	}
	rows.Close()
	require.Equal(t, []string{"DELETED web01", "ADDED web03"}, changes[len(changes)-2:], "watchers see the old name go and the new one come: %v", changes)
}

// jsonField reads a string at path from a JSON document.
func jsonField(t *testing.T, doc string, path ...string) string {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(doc), &v))
	for _, p := range path {
		m, ok := v.(map[string]any)
		require.True(t, ok, "%s in %s", p, doc)
		v = m[p]
	}
	s, _ := v.(string)
	return s
}
