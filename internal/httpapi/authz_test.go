package httpapi_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
)

// authzCases lists every /v1 route with a request that names things ("acme", "net") the
// scoped token of TestEveryRouteIsAuthorized may not touch. Lists answer 200 and must leave
// those things out instead. TestAuthzCasesCoverRoutes keeps the table complete.
var authzCases = []struct {
	pattern string
	path    string
	body    string
	list    bool
}{
	{"POST /v1/tokens", "/v1/tokens", `{"name":"x","scopes":["admin"]}`, false},
	{"GET /v1/tokens", "/v1/tokens", "", false},
	{"DELETE /v1/tokens/{id}", "/v1/tokens/tok_x", "", false},
	{"GET /v1/audit", "/v1/audit", "", false},
	{"GET /v1/orgs", "/v1/orgs", "", true},
	{"POST /v1/orgs", "/v1/orgs", `{"metadata":{"name":"acme2"}}`, false},
	{"GET /v1/orgs/{org}", "/v1/orgs/acme", "", false},
	{"PUT /v1/orgs/{org}", "/v1/orgs/acme", `{"spec":{}}`, false},
	{"PATCH /v1/orgs/{org}", "/v1/orgs/acme", `{"spec":{"a":1}}`, false},
	{"DELETE /v1/orgs/{org}", "/v1/orgs/acme", "", false},
	{"GET /v1/projects", "/v1/projects", "", true},
	{"PUT /v1/projects/{project}", "/v1/projects/net2", "", false},
	{"GET /v1/projects/{project}", "/v1/projects/net", "", false},
	{"DELETE /v1/projects/{project}", "/v1/projects/net", "", false},
	{"POST /v1/projects/{project}/credentials", "/v1/projects/net/credentials", "", false},
	{"GET /v1/state/{project}", "/v1/state/net", "", false},
	{"GET /v1/state/{project}/{workspace}", "/v1/state/net/default", "", false},
	{"POST /v1/state/{project}/{workspace}", "/v1/state/net/default", stateV1, false},
	{"PUT /v1/state/{project}/{workspace}", "/v1/state/net/default", stateV1, false},
	{"DELETE /v1/state/{project}/{workspace}", "/v1/state/net/default", "", false},
	{"LOCK /v1/state/{project}/{workspace}", "/v1/state/net/default", `{"ID":"Z"}`, false},
	{"UNLOCK /v1/state/{project}/{workspace}", "/v1/state/net/default", `{"ID":"Z"}`, false},
	{"GET /v1/state/{project}/{workspace}/lock", "/v1/state/net/default/lock", "", false},
	{"POST /v1/state/{project}/{workspace}/lock", "/v1/state/net/default/lock", `{"ID":"Z"}`, false},
	{"DELETE /v1/state/{project}/{workspace}/lock", "/v1/state/net/default/lock", `{"ID":"Z"}`, false},
	{"GET /v1/state/{project}/{workspace}/versions", "/v1/state/net/default/versions", "", false},
	{"GET /v1/state/{project}/{workspace}/versions/{n}", "/v1/state/net/default/versions/1", "", false},
	{"POST /v1/state/{project}/{workspace}/versions/{n}/restore", "/v1/state/net/default/versions/1/restore", "", false},
}

// TestAuthzCasesCoverRoutes fails when a /v1 route is added to routes.go without a case above.
func TestAuthzCasesCoverRoutes(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("routes.go")
	require.NoError(t, err)
	have := map[string]bool{}
	for _, c := range authzCases {
		have[c.pattern] = true
	}
	re := regexp.MustCompile(`mux\.Handle\("([A-Z]+ /v1/[^"]*)"`)
	var n int
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		n++
		require.True(t, have[m[1]], "route %q has no authorization case in authzCases", m[1])
	}
	require.Equal(t, len(authzCases), n)
}

// TestEveryRouteIsAuthorized: every /v1 route answers 401 without a token, and 403 (or, for
// lists, leaves the item out) to a token whose scopes name other things only.
func TestEveryRouteIsAuthorized(t *testing.T) {
	t.Parallel()
	b := setupState(t)
	ctx := context.Background()
	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"acme"}}`)).status)
	require.Equal(t, 200, b.do(t, "POST", "/v1/state/net/default", b.admin, strings.NewReader(stateV1)).status)
	_, other, err := b.tokens.Create(ctx, auth.AuditActor{Actor: "test"}, auth.CreateParams{Name: "other", Scopes: []string{"*:*:other"}})
	require.NoError(t, err)

	for _, c := range authzCases {
		method := strings.SplitN(c.pattern, " ", 2)[0]
		body := func() *strings.Reader { return strings.NewReader(c.body) }
		problem(t, b.do(t, method, c.path, "", body()), 401, "unauthenticated")
		r := b.do(t, method, c.path, other, body())
		if c.list {
			require.Equal(t, 200, r.status, c.pattern)
			require.NotContains(t, string(r.body), "acme", c.pattern)
			require.NotContains(t, string(r.body), `"net"`, c.pattern)
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
