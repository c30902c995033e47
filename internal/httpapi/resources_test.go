package httpapi_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/stratahq/strata/api"
	"github.com/stretchr/testify/require"
)

// TestNodesAndGroupsOverHTTP walks the node and group routes: statuses, Location headers,
// 422s naming fields, 400s naming labelSelector with the position, memberships, and the
// org deletion that is refused until ?cascade=true.
func TestNodesAndGroupsOverHTTP(t *testing.T) {
	t.Parallel()
	b := setupState(t)
	post := func(path, body string) response {
		return b.do(t, "POST", path, b.admin, strings.NewReader(body))
	}
	require.Equal(t, 201, post("/v1/orgs", `{"metadata":{"name":"acme"}}`).status)
	r := post("/v1/nodes", `{"metadata":{"name":"web01","labels":{"env":"prod","example.com/tier":"web"}},"spec":{"org":"acme"}}`)
	require.Equal(t, 201, r.status, string(r.body))
	require.Equal(t, "/v1/nodes/web01", r.header.Get("Location"))
	require.Equal(t, 201, post("/v1/nodes", `{"metadata":{"name":"db01","labels":{"env":"dev"}},"spec":{"org":"acme"}}`).status)

	p := problem(t, post("/v1/nodes", `{"metadata":{"name":"x","labels":{"Bad Key":"v","ok":"bad value!","strata.io/x":"y"}},"spec":{"org":"acme"}}`), 422, "unprocessable")
	var fields []string
	for _, e := range p.Errors {
		fields = append(fields, e.Field)
	}
	require.ElementsMatch(t, []string{"/metadata/labels/Bad Key", "/metadata/labels/ok", "/metadata/labels/strata.io~1x"}, fields, "every offending key is named")
	problem(t, post("/v1/nodes", `{"metadata":{"name":"x"},"spec":{"org":"nope"}}`), 422, "unprocessable")
	problem(t, post("/v1/nodes", `{"metadata":{"name":"web01"},"spec":{"org":"acme"}}`), 409, "conflict")

	r = post("/v1/orgs/acme/groups", `{"metadata":{"name":"web"},"spec":{"selector":"env=prod"}}`)
	require.Equal(t, 201, r.status, string(r.body))
	require.Equal(t, "/v1/orgs/acme/groups/web", r.header.Get("Location"))
	problem(t, post("/v1/orgs/nope/groups", `{"metadata":{"name":"web"}}`), 404, "not-found")
	problem(t, b.do(t, "GET", "/v1/orgs/nope/groups", b.admin, nil), 404, "not-found")

	require.Equal(t, 201, b.do(t, "PUT", "/v1/orgs/acme/groups/web/members/db01", b.admin, nil).status)
	require.Equal(t, 204, b.do(t, "PUT", "/v1/orgs/acme/groups/web/members/db01", b.admin, nil).status)
	r = b.do(t, "GET", "/v1/orgs/acme/groups/web/members", b.admin, nil)
	require.Equal(t, 200, r.status)
	var ms api.MemberList
	require.NoError(t, json.Unmarshal(r.body, &ms))
	require.Equal(t, []api.Member{{Node: "db01", Static: true}, {Node: "web01", Selected: true}}, ms.Items)
	require.Equal(t, 204, b.do(t, "DELETE", "/v1/orgs/acme/groups/web/members/db01", b.admin, nil).status)
	require.Equal(t, 204, b.do(t, "DELETE", "/v1/orgs/acme/groups/web/members/db01", b.admin, nil).status)

	list := func(sel string) []string {
		r := b.do(t, "GET", "/v1/nodes?labelSelector="+url.QueryEscape(sel), b.admin, nil)
		require.Equal(t, 200, r.status, string(r.body))
		var l api.ObjectList
		require.NoError(t, json.Unmarshal(r.body, &l))
		var out []string
		for _, o := range l.Items {
			out = append(out, o.Metadata.Name)
		}
		return out
	}
	require.Equal(t, []string{"web01"}, list("env = prod"))
	require.Equal(t, []string{"db01"}, list("!example.com/tier"))
	require.Equal(t, []string{"db01", "web01"}, list(""))
	p = problem(t, b.do(t, "GET", "/v1/nodes?labelSelector="+url.QueryEscape("env in (prod"), b.admin, nil), 400, "validation")
	require.Equal(t, "labelSelector", p.Errors[0].Field)
	require.Contains(t, p.Errors[0].Message, "position 12")

	// A continue token is bound to its selector.
	r = b.do(t, "GET", "/v1/nodes?limit=1&labelSelector=env", b.admin, nil)
	var page api.ObjectList
	require.NoError(t, json.Unmarshal(r.body, &page))
	require.NotEmpty(t, page.Continue)
	require.Equal(t, 200, b.do(t, "GET", "/v1/nodes?limit=1&labelSelector=env&continue="+url.QueryEscape(page.Continue), b.admin, nil).status)
	problem(t, b.do(t, "GET", "/v1/nodes?limit=1&labelSelector=!x&continue="+url.QueryEscape(page.Continue), b.admin, nil), 400, "validation")

	// PATCH merges; null deletes.
	r = b.do(t, "PATCH", "/v1/nodes/web01", b.admin, strings.NewReader(`{"metadata":{"labels":{"env":null,"new":""}}}`), "Content-Type", "application/merge-patch+json")
	require.Equal(t, 200, r.status, string(r.body))
	var n api.Object
	require.NoError(t, json.Unmarshal(r.body, &n))
	require.Equal(t, map[string]string{"example.com/tier": "web", "new": ""}, n.Metadata.Labels)

	problem(t, b.do(t, "DELETE", "/v1/orgs/acme", b.admin, nil), 409, "conflict")
	problem(t, b.do(t, "DELETE", "/v1/orgs/acme?cascade=maybe", b.admin, nil), 400, "validation")
	require.Equal(t, 204, b.do(t, "DELETE", "/v1/orgs/acme?cascade=true", b.admin, nil).status)
	problem(t, b.do(t, "GET", "/v1/nodes/web01", b.admin, nil), 404, "not-found")
}
