package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
)

var attributionQueries = db.MustParseQueries(fstest.MapFS{"attribution.sql": {Data: []byte(`
-- name: TestAuditOf
SELECT actor, remote_addr, request_id FROM {{schema}}.audit_log WHERE action = $1 AND target = $2 ORDER BY id DESC LIMIT 1;

-- name: TestChangeOf
SELECT actor, remote_addr, request_id FROM {{schema}}.changes WHERE kind = $1 AND name = $2 ORDER BY resource_version DESC LIMIT 1;
`)}}, "attribution.sql")

// TestObjectWritesAttributed (issue 18, item 1): object writes (orgs, nodes, groups, user
// kinds) were not audited and the changes log named no one. Now a write by a scoped token is
// in the audit log and on its change row with the token, the client's address (no port) and
// the request id (the server's, issue 27). X-Forwarded-For is believed only from a peer in --trusted-proxies, read from
// the right (a client can put anything at its left); from any other peer it is ignored.
func TestObjectWritesAttributed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := pgtest.NewDB(t)
	direct := serveOn(t, d, nil)
	behindProxy := serveOn(t, d, func(o *httpapi.Options) {
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	tokens := direct.tokens
	behindProxy.admin = direct.admin
	tok, secret, err := tokens.Create(ctx, auth.AuditActor{Actor: "test"}, auth.CreateParams{Name: "ops", Scopes: []string{"orgs:write:*", "nodes:write:*", "orgs:attach:*"}})
	require.NoError(t, err)
	r := direct.do(t, "POST", "/v1/orgs", secret, strings.NewReader(`{"metadata":{"name":"acme"}}`), "X-Request-Id", "req-create")
	require.Equal(t, 201, r.status, string(r.body))

	who := func(query, a, b string) [3]string {
		var out [3]string
		require.NoError(t, d.QueryRow(ctx, attributionQueries.Get(query), a, b).Scan(&out[0], &out[1], &out[2]))
		return out
	}
	actor := "ops (" + tok.ID + ")"
	// The request id is the server's (the answer's X-Request-Id), whatever the client sent
	// (issue 27, 8l).
	id := r.header.Get("X-Request-Id")
	require.NotEqual(t, "req-create", id)
	require.Equal(t, [3]string{actor, "127.0.0.1", id}, who("TestAuditOf", "object.create", "Org/acme"))
	require.Equal(t, [3]string{actor, "127.0.0.1", id}, who("TestChangeOf", "Org", "acme"))

	for i, c := range []struct {
		b    *testBundle
		hdr  []string
		want string
	}{
		{direct, []string{"X-Forwarded-For", "203.0.113.9"}, "127.0.0.1"},                 // not a trusted peer: ignored
		{behindProxy, []string{"X-Forwarded-For", "203.0.113.9"}, "203.0.113.9"},          // the proxy's word
		{behindProxy, []string{"X-Forwarded-For", "6.6.6.6, 203.0.113.9"}, "203.0.113.9"}, // the left is the client's to write
		{behindProxy, []string{"Forwarded", `for="203.0.113.7:4711";proto=https`}, "203.0.113.7"},
	} {
		hdr := append([]string{"X-Request-Id", "req-" + c.want}, c.hdr...)
		// Each PATCH changes the label (a no-op write records nothing).
		via := strings.ReplaceAll(c.want, ".", "-") + "-" + strconv.Itoa(i)
		r := c.b.do(t, "PATCH", "/v1/orgs/acme", secret, strings.NewReader(`{"metadata":{"labels":{"via":"`+via+`"}}}`),
			append(hdr, "Content-Type", "application/merge-patch+json")...)
		require.Equal(t, 200, r.status, string(r.body))
		id := r.header.Get("X-Request-Id")
		require.Equal(t, [3]string{actor, c.want, id}, who("TestAuditOf", "object.update", "Org/acme"), "%v", c.hdr)
		require.Equal(t, [3]string{actor, c.want, id}, who("TestChangeOf", "Org", "acme"), "%v", c.hdr)
	}
	r = direct.do(t, "DELETE", "/v1/orgs/acme", secret, nil, "X-Request-Id", "req-delete")
	require.Equal(t, 204, r.status, string(r.body))
	require.Equal(t, [3]string{actor, "127.0.0.1", r.header.Get("X-Request-Id")}, who("TestAuditOf", "object.delete", "Org/acme"))
}

// serveOn serves the API over d: tokens, resources and pillars wired as a replica wires them
// (renames re-key the pillar history); tune adjusts the options. The first server of a
// database gets its admin token.
func serveOn(t *testing.T, d *db.DB, tune func(*httpapi.Options)) *testBundle {
	t.Helper()
	tokens := auth.NewService(d)
	admin, err := tokens.Bootstrap(context.Background(), "")
	require.NoError(t, err)
	res, pil := resource.NewService(d), pillar.NewService(d)
	res.OnRename(pil.Renamed)
	o := httpapi.Options{Tokens: tokens, Resources: res, Pillars: pil, MaxBodyBytes: 1 << 20, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if tune != nil {
		tune(&o)
	}
	srv := httptest.NewServer(httpapi.New(o))
	t.Cleanup(srv.Close)
	return &testBundle{srv: srv, admin: admin, tokens: tokens}
}
