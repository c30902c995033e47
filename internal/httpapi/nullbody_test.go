package httpapi_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNullBodyIsRefused: a JSON body that is null is no object. It decoded into the zero
// request, so PUT /v1/orgs/acme with the body null replaced the org with an empty one (200),
// and the other JSON writes took null as {}; the OpenAPI conformance check found it (the
// document says a body is an object). Each is a 400 naming the problem now, and the org
// keeps its labels.
func TestNullBodyIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"acme","labels":{"env":"prod"}}}`)).status)
	for _, c := range []struct{ method, path string }{
		{"PUT", "/v1/orgs/acme"},
		{"POST", "/v1/orgs"},
		{"POST", "/v1/tokens"},
		{"PUT", "/v1/pillar-settings"},
		{"PUT", "/v1/kinds/Db"},
		{"PUT", "/v1/pillar-categories/app"},
	} {
		p := problem(t, b.do(t, c.method, c.path, b.admin, strings.NewReader(" null\n")), 400, "validation")
		require.Contains(t, p.Detail, "expected a JSON object, got JSON null", c.method+" "+c.path)
	}
	r := b.do(t, "GET", "/v1/orgs/acme", b.admin, nil)
	require.Equal(t, 200, r.status)
	require.Contains(t, string(r.body), `"env":"prod"`)
}
