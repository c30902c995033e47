package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
)

// TestSecretRenderOverHTTP (issue 22): a secret category is masked in the render and its
// explanation for a token without pillars:read-secrets, revealed with it; the two answers
// carry different ETags, and a masked reader's If-None-Match with the revealed ETag is not
// a 304 — an ETag cannot confirm a guess of a value. The category reports itself secret,
// and only pillars:write:* changes that.
func TestSecretRenderOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/orgs", `{"metadata":{"name":"acme"}}`},
		{"POST", "/v1/nodes", `{"metadata":{"name":"web01"},"spec":{"org":"acme"}}`},
		{"PUT", "/v1/nodes/web01/pillars/creds", `{"db":{"password":"pw-HTTP-1"}}`},
		{"PUT", "/v1/orgs/acme/pillars/app", `{"port":8080}`},
	} {
		r := b.do(t, c.method, c.path, b.admin, strings.NewReader(c.body))
		require.Less(t, r.status, 300, "%s %s: %s", c.method, c.path, r.body)
	}
	nodeWriter := b.token(t, "node-writer", "pillars:write:node/*")
	problem(t, b.do(t, "PUT", "/v1/pillar-categories/creds", nodeWriter, strings.NewReader(`{"secret":true}`)), 403, "forbidden")
	r := b.do(t, "PUT", "/v1/pillar-categories/creds", b.admin, strings.NewReader(`{"secret":true}`))
	require.Equal(t, 201, r.status, string(r.body))
	require.Contains(t, string(r.body), `"secret":true`)
	require.Contains(t, string(r.body), `"converted":2`, "the row and its history entry")
	require.Contains(t, string(b.do(t, "GET", "/v1/pillar-categories/creds", b.admin, nil).body), `"secret":true`)

	reader := b.token(t, "reader", "pillars:read:*", "pillars:render:*")
	revealer := b.token(t, "revealer", "pillars:render:node/*", "pillars:read-secrets:node/web01")
	masked := b.do(t, "GET", "/v1/nodes/web01/pillar", reader, nil)
	require.Equal(t, 200, masked.status)
	require.JSONEq(t, `{"port":8080,"db":{"password":"(secret)"}}`, string(masked.body))
	full := b.do(t, "GET", "/v1/nodes/web01/pillar", revealer, nil)
	require.Equal(t, 200, full.status)
	require.JSONEq(t, `{"port":8080,"db":{"password":"pw-HTTP-1"}}`, string(full.body))
	require.NotEqual(t, masked.header.Get("ETag"), full.header.Get("ETag"))
	require.Equal(t, 200, b.do(t, "GET", "/v1/nodes/web01/pillar", reader, nil, "If-None-Match", full.header.Get("ETag")).status)
	require.Equal(t, 304, b.do(t, "GET", "/v1/nodes/web01/pillar", reader, nil, "If-None-Match", masked.header.Get("ETag")).status, "control: the masked ETag does match")
	require.Equal(t, 304, b.do(t, "GET", "/v1/nodes/web01/pillar", revealer, nil, "If-None-Match", full.header.Get("ETag")).status)

	ex := b.do(t, "GET", "/v1/nodes/web01/pillar?explain=true", reader, nil)
	require.Equal(t, 200, ex.status)
	require.NotContains(t, string(ex.body), "pw-HTTP")
	require.Contains(t, string(ex.body), "node/web01")
	require.Contains(t, string(b.do(t, "GET", "/v1/nodes/web01/pillar?explain=true", revealer, nil).body), "pw-HTTP-1")

	for _, path := range []string{"/v1/nodes/web01/pillars/creds", "/v1/nodes/web01/pillars/creds/history"} {
		r := b.do(t, "GET", path, reader, nil)
		require.Equal(t, 200, r.status)
		require.NotContains(t, string(r.body), "pw-HTTP", path)
		require.Contains(t, string(r.body), "(secret)", path)
	}
	audit := b.do(t, "GET", "/v1/audit", b.admin, nil)
	require.NotContains(t, string(audit.body), "pw-HTTP")
	problem(t, b.do(t, "PUT", "/v1/nodes/web01/pillars/creds", b.admin, strings.NewReader(`{"db":{"password":"(secret)"}}`)), 422, "unprocessable")
}

// TestSecretSaltLegacyClient: a Salt 3005 master admitted by --salt-legacy-clients has no
// token, so no pillars:read-secrets: for a minion whose pillar holds a secret category it
// gets the _errors text, never the values and never a masked pillar; a minion without
// secrets still renders.
func TestSecretSaltLegacyClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := pgtest.NewDB(t)
	tokens := auth.NewService(d)
	admin, err := tokens.Bootstrap(ctx, "")
	require.NoError(t, err)
	pillars := pillar.NewService(d)
	pillars.UseKeys(testKeys(t))
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Tokens: tokens, Resources: resource.NewService(d), Pillars: pillars,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxBodyBytes: 1 << 16, SaltLegacyClients: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}))
	t.Cleanup(srv.Close)
	b := &testBundle{srv: srv, admin: admin, tokens: tokens}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/orgs", `{"metadata":{"name":"acme"}}`},
		{"POST", "/v1/nodes", `{"metadata":{"name":"web01"},"spec":{"org":"acme"}}`},
		{"POST", "/v1/nodes", `{"metadata":{"name":"db01"},"spec":{"org":"acme"}}`},
		{"PUT", "/v1/nodes/web01/pillars/creds", `{"pw":"legacy-PW-1"}`},
		{"PUT", "/v1/nodes/db01/pillars/app", `{"port":5432}`},
		{"PUT", "/v1/pillar-categories/creds", `{"secret":true}`},
	} {
		r := b.do(t, c.method, c.path, admin, strings.NewReader(c.body))
		require.Less(t, r.status, 300, "%s %s: %s", c.method, c.path, r.body)
	}
	r := b.do(t, "GET", "/v1/salt/pillar/web01", "", nil)
	data, errText := saltSees(t, r)
	require.Empty(t, data)
	require.Contains(t, errText, "pillars:read-secrets:node/web01")
	require.Contains(t, errText, "legacy client")
	require.NotContains(t, string(r.body), "legacy-PW")
	data, errText = saltSees(t, b.do(t, "GET", "/v1/salt/pillar/db01", "", nil))
	require.Empty(t, errText)
	require.Equal(t, map[string]any{"port": float64(5432)}, data)
}

// TestCategoryPropertiesIfMatch: a category's properties carry an ETag; a PUT with a stale
// If-Match is a 412 and changes nothing, so a client that read them to change one property
// cannot undo another client's change of another (a secret category made plain again).
func TestCategoryPropertiesIfMatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, "GET", "/v1/pillar-categories/creds", b.admin, nil)
	require.Equal(t, 404, r.status)
	r = b.do(t, "PUT", "/v1/pillar-categories/creds", b.admin, strings.NewReader(`{}`), "If-Match", `"none"`)
	require.Equal(t, 201, r.status, string(r.body))
	first := b.do(t, "GET", "/v1/pillar-categories/creds", b.admin, nil).header.Get("ETag")
	require.NotEmpty(t, first)
	require.NotEqual(t, `"none"`, first)
	r = b.do(t, "PUT", "/v1/pillar-categories/creds", b.admin, strings.NewReader(`{"secret":true}`), "If-Match", first)
	require.Equal(t, 200, r.status, string(r.body))
	require.NotEqual(t, first, r.header.Get("ETag"))
	problem(t, b.do(t, "PUT", "/v1/pillar-categories/creds", b.admin, strings.NewReader(`{}`), "If-Match", first), 412, "precondition-failed")
	require.Contains(t, string(b.do(t, "GET", "/v1/pillar-categories/creds", b.admin, nil).body), `"secret":true`, "the stale PUT changed nothing")
}
