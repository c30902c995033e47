package httpapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
)

// authzCases lists every /v1 route with a request that names things ("acme", "net") the
// scoped token of TestEveryRouteIsAuthorized may not touch. Lists answer 200 and must leave
// those things out instead, from their items and their continue tokens alike.
// TestAuthzCasesCoverRoutes keeps the table complete.
type authzCase struct {
	pattern string
	path    string
	body    string
	list    bool
	// perLine routes stream per-line results: 200, and the line naming an invisible thing
	// is refused with 403 in the stream.
	perLine bool
	// salt routes answer every failure with 200 and {"_errors": [text]}, which Salt shows.
	salt bool
}

var authzCases = []authzCase{
	{"POST /v1/tokens", "/v1/tokens", `{"name":"x","scopes":["admin"]}`, false, false, false},
	{"GET /v1/tokens", "/v1/tokens", "", true, false, false},
	{"DELETE /v1/tokens/{id}", "/v1/tokens/tok_x", "", false, false, false},
	{"GET /v1/audit", "/v1/audit", "", false, false, false},
	{"GET /v1/status", "/v1/status", "", false, false, false},
	{"GET /v1/keys", "/v1/keys", "", false, false, false},
	{"POST /v1/keys:rotate", "/v1/keys:rotate", `{"limit":10}`, false, false, false},
	{"GET /v1/orgs", "/v1/orgs", "", true, false, false},
	{"POST /v1/orgs", "/v1/orgs", `{"metadata":{"name":"acme2"}}`, false, false, false},
	{"GET /v1/orgs/{org}", "/v1/orgs/acme", "", false, false, false},
	{"PUT /v1/orgs/{org}", "/v1/orgs/acme", `{"spec":{}}`, false, false, false},
	{"PATCH /v1/orgs/{org}", "/v1/orgs/acme", `{"spec":{"a":1}}`, false, false, false},
	{"DELETE /v1/orgs/{org}", "/v1/orgs/acme", "", false, false, false},
	{"GET /v1/nodes", "/v1/nodes", "", true, false, false},
	{"POST /v1/nodes", "/v1/nodes", `{"metadata":{"name":"acme2"},"spec":{"org":"other"}}`, false, false, false},
	{"GET /v1/nodes/{node}", "/v1/nodes/acme", "", false, false, false},
	{"PUT /v1/nodes/{node}", "/v1/nodes/acme", `{"spec":{"org":"acme"}}`, false, false, false},
	{"PATCH /v1/nodes/{node}", "/v1/nodes/acme", `{"metadata":{"labels":{"a":"b"}}}`, false, false, false},
	{"DELETE /v1/nodes/{node}", "/v1/nodes/acme", "", false, false, false},
	{"POST /v1/nodes/{node}/rename", "/v1/nodes/acme/rename", `{"name":"acme9"}`, false, false, false},
	{"POST /v1/nodes:apply", "/v1/nodes:apply", `{"metadata":{"name":"acme"},"spec":{"org":"acme"}}`, false, true, false},
	{"GET /v1/orgs/{org}/groups", "/v1/orgs/acme/groups", "", false, false, false},
	{"POST /v1/orgs/{org}/groups", "/v1/orgs/acme/groups", `{"metadata":{"name":"other"}}`, false, false, false},
	{"GET /v1/orgs/{org}/groups/{group}", "/v1/orgs/acme/groups/web", "", false, false, false},
	{"PUT /v1/orgs/{org}/groups/{group}", "/v1/orgs/acme/groups/web", `{"spec":{}}`, false, false, false},
	{"PATCH /v1/orgs/{org}/groups/{group}", "/v1/orgs/acme/groups/web", `{"spec":{"priority":2}}`, false, false, false},
	{"DELETE /v1/orgs/{org}/groups/{group}", "/v1/orgs/acme/groups/web", "", false, false, false},
	{"GET /v1/orgs/{org}/groups/{group}/members", "/v1/orgs/acme/groups/web/members", "", false, false, false},
	{"PUT /v1/orgs/{org}/groups/{group}/members/{node}", "/v1/orgs/acme/groups/web/members/acme", "", false, false, false},
	{"DELETE /v1/orgs/{org}/groups/{group}/members/{node}", "/v1/orgs/acme/groups/web/members/acme", "", false, false, false},
	{"GET /v1/projects", "/v1/projects", "", true, false, false},
	{"PUT /v1/projects/{project}", "/v1/projects/net2", "", false, false, false},
	{"GET /v1/projects/{project}", "/v1/projects/net", "", false, false, false},
	{"DELETE /v1/projects/{project}", "/v1/projects/net", "", false, false, false},
	{"POST /v1/projects/{project}/encrypt", "/v1/projects/net/encrypt", "", false, false, false},
	{"POST /v1/projects/{project}/credentials", "/v1/projects/net/credentials", "", false, false, false},
	{"GET /v1/state/{project}", "/v1/state/net", "", false, false, false},
	{"GET /v1/state/{project}/{workspace}", "/v1/state/net/default", "", false, false, false},
	{"POST /v1/state/{project}/{workspace}", "/v1/state/net/default", stateV1, false, false, false},
	{"PUT /v1/state/{project}/{workspace}", "/v1/state/net/default", stateV1, false, false, false},
	{"DELETE /v1/state/{project}/{workspace}", "/v1/state/net/default", "", false, false, false},
	{"LOCK /v1/state/{project}/{workspace}", "/v1/state/net/default", `{"ID":"Z"}`, false, false, false},
	{"UNLOCK /v1/state/{project}/{workspace}", "/v1/state/net/default", `{"ID":"Z"}`, false, false, false},
	{"GET /v1/state/{project}/{workspace}/lock", "/v1/state/net/default/lock", "", false, false, false},
	{"POST /v1/state/{project}/{workspace}/lock", "/v1/state/net/default/lock", `{"ID":"Z"}`, false, false, false},
	{"DELETE /v1/state/{project}/{workspace}/lock", "/v1/state/net/default/lock", `{"ID":"Z"}`, false, false, false},
	{"GET /v1/state/{project}/{workspace}/versions", "/v1/state/net/default/versions", "", false, false, false},
	{"GET /v1/state/{project}/{workspace}/versions/{n}", "/v1/state/net/default/versions/1", "", false, false, false},
	{"POST /v1/state/{project}/{workspace}/versions/{n}/restore", "/v1/state/net/default/versions/1/restore", "", false, false, false},
}

// The pillar routes of the four targets are alike: one case each, all naming acme (or the
// fixed names global and * the scoped token lacks).
func init() {
	for _, prefix := range []struct{ pattern, path string }{
		{"/v1/pillars/global", "/v1/pillars/global"},
		{"/v1/orgs/{org}/pillars", "/v1/orgs/acme/pillars"},
		{"/v1/orgs/{org}/groups/{group}/pillars", "/v1/orgs/acme/groups/web/pillars"},
		{"/v1/nodes/{node}/pillars", "/v1/nodes/acme/pillars"},
	} {
		for _, c := range []struct{ method, suffix, path, body string }{
			{"GET", "", "", ""},
			{"GET", "/{category}", "/app", ""},
			{"PUT", "/{category}", "/app", `{"a":1}`},
			{"DELETE", "/{category}", "/app", ""},
			{"GET", "/{category}/history", "/app/history", ""},
			{"POST", "/{category}/history/{change}/restore", "/app/history/1/restore", ""},
		} {
			authzCases = append(authzCases, authzCase{pattern: c.method + " " + prefix.pattern + c.suffix, path: prefix.path + c.path, body: c.body})
		}
	}
	authzCases = append(authzCases,
		authzCase{pattern: "GET /v1/nodes/{node}/pillar", path: "/v1/nodes/acme/pillar"},
		authzCase{pattern: "GET /v1/salt/pillar/{minion}", path: "/v1/salt/pillar/acme", salt: true},
		authzCase{pattern: "POST /v1/salt/credentials", path: "/v1/salt/credentials"},
		authzCase{pattern: "POST /v1/pillars:import", path: "/v1/pillars:import?org=acme", body: `{"files":{"top.sls":"base:\n  '*':\n    - app\n","app.sls":"a: 1\n"}}`},
		authzCase{pattern: "GET /v1/pillar-settings", path: "/v1/pillar-settings"},
		authzCase{pattern: "PUT /v1/pillar-settings", path: "/v1/pillar-settings", body: `{"mergeLists":true}`},
		authzCase{pattern: "GET /v1/pillar-categories", path: "/v1/pillar-categories"},
		authzCase{pattern: "GET /v1/pillars:export", path: "/v1/pillars:export?org=acme"},
		authzCase{pattern: "GET /v1/pillar-categories/{category}", path: "/v1/pillar-categories/app"},
		authzCase{pattern: "PUT /v1/pillar-categories/{category}", path: "/v1/pillar-categories/app", body: `{}`},
		authzCase{pattern: "DELETE /v1/pillar-categories/{category}", path: "/v1/pillar-categories/app"},
		// The schema registry and the objects of user kinds (Db lives in orgs, Zone is global).
		authzCase{pattern: "GET /v1/kinds", path: "/v1/kinds"},
		authzCase{pattern: "PUT /v1/kinds/{kind}", path: "/v1/kinds/Db", body: `{"schema":{"type":"object"}}`},
		authzCase{pattern: "GET /v1/kinds/{kind}", path: "/v1/kinds/Db"},
		authzCase{pattern: "GET /v1/kinds/{kind}/revisions", path: "/v1/kinds/Db/revisions"},
		authzCase{pattern: "GET /v1/kinds/{kind}/revisions/{n}", path: "/v1/kinds/Db/revisions/1"},
		authzCase{pattern: "GET /v1/orgs/{org}/resources/{kind}", path: "/v1/orgs/acme/resources/Db"},
		authzCase{pattern: "POST /v1/orgs/{org}/resources/{kind}", path: "/v1/orgs/acme/resources/Db", body: `{"metadata":{"name":"other"}}`},
		authzCase{pattern: "GET /v1/orgs/{org}/resources/{kind}/{name}", path: "/v1/orgs/acme/resources/Db/main"},
		authzCase{pattern: "PUT /v1/orgs/{org}/resources/{kind}/{name}", path: "/v1/orgs/acme/resources/Db/main", body: `{"spec":{}}`},
		authzCase{pattern: "PATCH /v1/orgs/{org}/resources/{kind}/{name}", path: "/v1/orgs/acme/resources/Db/main", body: `{"spec":{"a":2}}`},
		authzCase{pattern: "DELETE /v1/orgs/{org}/resources/{kind}/{name}", path: "/v1/orgs/acme/resources/Db/main"},
		authzCase{pattern: "GET /v1/resources/{kind}", path: "/v1/resources/Zone", list: true},
		authzCase{pattern: "POST /v1/resources/{kind}", path: "/v1/resources/Zone", body: `{"metadata":{"name":"acme2"}}`},
		authzCase{pattern: "GET /v1/resources/{kind}/{name}", path: "/v1/resources/Zone/acme"},
		authzCase{pattern: "PUT /v1/resources/{kind}/{name}", path: "/v1/resources/Zone/acme", body: `{"spec":{}}`},
		authzCase{pattern: "PATCH /v1/resources/{kind}/{name}", path: "/v1/resources/Zone/acme", body: `{"spec":{"a":2}}`},
		authzCase{pattern: "DELETE /v1/resources/{kind}/{name}", path: "/v1/resources/Zone/acme"},
	)
}

// TestAuthzCasesCoverRoutes fails when a route is added to the API's table without a case
// above: it walks the table itself (API.Patterns), so routes derived from kind descriptors
// are covered too.
func TestAuthzCasesCoverRoutes(t *testing.T) {
	t.Parallel()
	have := map[string]bool{}
	for _, c := range authzCases {
		have[c.pattern] = true
	}
	patterns := httpapi.New(httpapi.Options{Resources: resource.NewService(nil), Pillars: pillar.NewService(nil)}).Patterns()
	for _, p := range patterns {
		require.True(t, have[p], "route %q has no authorization case in authzCases", p)
	}
	require.Len(t, patterns, len(authzCases))
}

// invisible are the names the scoped token of TestEveryRouteIsAuthorized must never see:
// the org, the project and the admin token sort before "other", the name it may see, so a
// list that filtered after paging would start its first page with one of them; "zeta"
// things sort after it. ("admin" is quoted: items may say they were created by it.)
var invisible = []string{"acme", "net", `"admin"`, "zeta"}

// TestEveryRouteIsAuthorized: every /v1 route of the table answers 401 without a token (the
// one /v1 route outside it, GET /v1/openapi.json, needs none:
// TestOpenAPIIsTheOnlyV1RouteWithoutAToken), and 403 (or, for
// lists, leaves the item out) to a token whose scopes name other things only. A list's first
// page of one item holds the token's visible item, and neither the body nor the continue
// token, decoded every way base64 allows, names an invisible thing.
func TestEveryRouteIsAuthorized(t *testing.T) {
	t.Parallel()
	b := setupState(t)
	ctx := context.Background()
	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"acme"}}`)).status)
	require.Equal(t, 200, b.do(t, "POST", "/v1/state/net/default", b.admin, strings.NewReader(stateV1)).status)
	_, other, err := b.tokens.Create(ctx, auth.AuditActor{Actor: "test"}, auth.CreateParams{Name: "other", Scopes: []string{"*:*:other", "resources:*:global/other", "resources:*:org/other", "pillars:*:org/other", "pillars:*:node/other"}})
	require.NoError(t, err)
	// What the scoped token may see, after the invisible names in list order, and more
	// invisible things after it, so every list has a page after the first.
	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"other"}}`)).status)
	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"zeta"}}`)).status)
	require.Equal(t, 201, b.do(t, "PUT", "/v1/projects/other", b.admin, nil).status)
	for _, n := range []string{"acme", "other", "zeta"} {
		require.Equal(t, 201, b.do(t, "POST", "/v1/nodes", b.admin, strings.NewReader(`{"metadata":{"name":"`+n+`"},"spec":{"org":"`+n+`"}}`)).status)
	}
	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs/acme/groups", b.admin, strings.NewReader(`{"metadata":{"name":"web"}}`)).status)
	require.Equal(t, 201, b.do(t, "PUT", "/v1/orgs/acme/groups/web/members/acme", b.admin, nil).status)
	require.Equal(t, 201, b.do(t, "PUT", "/v1/projects/zeta", b.admin, nil).status)
	require.Equal(t, 201, b.do(t, "PUT", "/v1/kinds/Db", b.admin, strings.NewReader(`{"scope":"org","schema":{"type":"object","properties":{"a":{"type":"integer"}}}}`)).status)
	require.Equal(t, 201, b.do(t, "PUT", "/v1/kinds/Zone", b.admin, strings.NewReader(`{"scope":"global","schema":{"type":"object","properties":{"a":{"type":"integer"}}}}`)).status)
	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs/acme/resources/Db", b.admin, strings.NewReader(`{"metadata":{"name":"main"},"spec":{"a":1}}`)).status)
	for _, n := range []string{"acme", "other", "zeta"} {
		require.Equal(t, 201, b.do(t, "POST", "/v1/resources/Zone", b.admin, strings.NewReader(`{"metadata":{"name":"`+n+`"},"spec":{"a":1}}`)).status)
	}
	_, _, err = b.tokens.Create(ctx, auth.AuditActor{Actor: "test"}, auth.CreateParams{Name: "zeta", Scopes: []string{"admin"}})
	require.NoError(t, err)

	for _, c := range authzCases {
		method := strings.SplitN(c.pattern, " ", 2)[0]
		body := func() *strings.Reader { return strings.NewReader(c.body) }
		if c.salt {
			for tok, want := range map[string]string{"": "the request carries no token", other: "lacks the scope"} {
				r := b.do(t, method, c.path, tok, body())
				require.Equal(t, 200, r.status, c.pattern)
				var refusal struct {
					Errors []string `json:"_errors"`
				}
				require.NoError(t, json.Unmarshal(r.body, &refusal), "%s: a refusal is a JSON object Salt shows: %s", c.pattern, r.body)
				require.Len(t, refusal.Errors, 1, "%s: a refusal carries _errors, or Salt takes it for a pillar: %s", c.pattern, r.body)
				require.Contains(t, refusal.Errors[0], want, c.pattern)
			}
			continue
		}
		problem(t, b.do(t, method, c.path, "", body()), 401, "unauthenticated")
		r := b.do(t, method, c.path, other, body())
		if c.perLine {
			require.Equal(t, 200, r.status, c.pattern)
			require.Contains(t, string(r.body), `"status":403`, "%s: the line naming acme must be refused: %s", c.pattern, r.body)
			require.Contains(t, string(r.body), `"errors":1`, c.pattern)
			continue
		}
		if c.list {
			require.Equal(t, 200, r.status, c.pattern)
			requireNoInvisible(t, c.pattern, r.body)
			// Page by one: every page holds exactly the visible items in order, and no
			// continue token leaks a name.
			var seen []string
			cont := ""
			for range 10 {
				path := c.path + "?limit=1"
				if cont != "" {
					path += "&continue=" + url.QueryEscape(cont)
				}
				r := b.do(t, method, path, other, nil)
				require.Equal(t, 200, r.status, "%s: %s", path, r.body)
				requireNoInvisible(t, path, r.body)
				var page struct {
					Items []struct {
						Name     string `json:"name"`
						Metadata struct {
							Name string `json:"name"`
						} `json:"metadata"`
					} `json:"items"`
					Continue string `json:"continue"`
				}
				require.NoError(t, json.Unmarshal(r.body, &page))
				if cont == "" {
					require.Len(t, page.Items, 1, "%s: the first page must hold the visible item: %s", path, r.body)
				}
				for _, it := range page.Items {
					seen = append(seen, it.Name+it.Metadata.Name)
				}
				requireNoInvisible(t, path+" continue token", decodings(page.Continue)...)
				if cont = page.Continue; cont == "" {
					break
				}
			}
			require.Empty(t, cont, "%s: paging did not end", c.pattern)
			require.NotEmpty(t, seen, c.pattern)
			for _, n := range seen {
				require.Equal(t, "other", n, c.pattern)
			}
			continue
		}
		require.Equal(t, 403, r.status, "%s answered %d: %s", c.pattern, r.status, r.body)
	}
	// Nothing changed: the admin still sees everything as it was.
	require.Equal(t, 200, b.do(t, "GET", "/v1/orgs/acme", b.admin, nil).status)
	require.Equal(t, 200, b.do(t, "GET", "/v1/state/net/default", b.admin, nil).status)
	r := b.do(t, "GET", "/v1/state/net/default/lock", b.admin, nil)
	require.Contains(t, string(r.body), `"locked":false`)
}

// requireNoInvisible fails when any of texts names an invisible thing.
func requireNoInvisible(t *testing.T, what string, texts ...[]byte) {
	t.Helper()
	for _, text := range texts {
		for _, name := range invisible {
			require.NotContains(t, string(text), name, "%s reveals %q", what, name)
		}
	}
}

// decodings returns a continue token as given and decoded by every base64 alphabet and
// padding, so a name hidden in plain base64 is found whichever the server used.
func decodings(token string) [][]byte {
	out := [][]byte{[]byte(token)}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(token); err == nil {
			out = append(out, b)
		}
	}
	return out
}

// TestContinueTokensAreBound: a continue token opens only on the list that issued it, with
// the same filter parameters; a tampered or made-up one is a 400 problem naming continue.
func TestContinueTokensAreBound(t *testing.T) {
	t.Parallel()
	b := setupState(t)
	for _, name := range []string{"a", "b", "c"} {
		require.Equal(t, 201, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"`+name+`"}}`)).status)
		require.Equal(t, 201, b.do(t, "PUT", "/v1/projects/"+name, b.admin, nil).status)
	}
	_, _, err := b.tokens.Create(context.Background(), auth.AuditActor{Actor: "test"}, auth.CreateParams{Name: "b", Scopes: []string{"admin"}})
	require.NoError(t, err)
	next := func(path string) string {
		t.Helper()
		r := b.do(t, "GET", path, b.admin, nil)
		require.Equal(t, 200, r.status, string(r.body))
		var page struct {
			Continue string `json:"continue"`
		}
		require.NoError(t, json.Unmarshal(r.body, &page))
		require.NotEmpty(t, page.Continue, path)
		return page.Continue
	}
	orgs := next("/v1/orgs?limit=1")
	projects := next("/v1/projects?limit=1")
	audit := next("/v1/audit?limit=1")
	tokens := next("/v1/tokens?limit=1")
	for _, ws := range []string{"w1", "w2", "w3"} {
		require.Equal(t, 200, b.do(t, "POST", "/v1/state/a/"+ws, b.admin, strings.NewReader(stateV1)).status)
	}
	workspaces := next("/v1/state/a?limit=2")
	r := b.do(t, "GET", "/v1/state/a?limit=2&continue="+workspaces, b.admin, nil)
	require.Equal(t, 200, r.status, string(r.body))
	var rest api.WorkspaceList
	require.NoError(t, json.Unmarshal(r.body, &rest))
	require.Len(t, rest.Items, 1, "the second page holds the last workspace")
	require.Equal(t, "w3", rest.Items[0].Name)
	require.Empty(t, rest.Continue)
	require.Equal(t, 200, b.do(t, "GET", "/v1/orgs?limit=1&continue="+orgs, b.admin, nil).status)
	require.Equal(t, 200, b.do(t, "GET", "/v1/audit?limit=1&continue="+audit, b.admin, nil).status)

	tampered := []byte(orgs)
	tampered[len(tampered)/2] ^= 1
	for _, path := range []string{
		"/v1/orgs?continue=" + projects,
		"/v1/projects?continue=" + orgs,
		"/v1/tokens?continue=" + audit,
		"/v1/audit?continue=" + tokens,
		"/v1/audit?action=token.&continue=" + audit,
		"/v1/orgs?continue=" + url.QueryEscape(string(tampered)),
		"/v1/orgs?continue=" + base64.RawURLEncoding.EncodeToString([]byte("a")),
		"/v1/projects?continue=%00%ff",
		"/v1/state/b?continue=" + workspaces,
		"/v1/projects?continue=" + workspaces,
	} {
		p := problem(t, b.do(t, "GET", path, b.admin, nil), 400, "validation")
		require.Equal(t, "continue", p.Errors[0].Field, path)
	}
}
