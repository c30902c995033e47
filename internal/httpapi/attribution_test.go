package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/netip"
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
// the request id. X-Forwarded-For is believed only from a peer in --trusted-proxies, read from
// the right (a client can put anything at its left); from any other peer it is ignored.
func TestObjectWritesAttributed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := pgtest.NewDB(t)
	tokens := auth.NewService(d)
	admin, err := tokens.Bootstrap(ctx, "")
	require.NoError(t, err)
	serve := func(trusted ...string) *testBundle {
		var prefixes []netip.Prefix
		for _, p := range trusted {
			prefixes = append(prefixes, netip.MustParsePrefix(p))
		}
		srv := httptest.NewServer(httpapi.New(httpapi.Options{Tokens: tokens, Resources: resource.NewService(d), Pillars: pillar.NewService(d),
			MaxBodyBytes: 64 << 10, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TrustedProxies: prefixes}))
		t.Cleanup(srv.Close)
		return &testBundle{srv: srv, admin: admin, tokens: tokens}
	}
	direct, behindProxy := serve(), serve("127.0.0.1/32")
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
	require.Equal(t, [3]string{actor, "127.0.0.1", "req-create"}, who("TestAuditOf", "object.create", "Org/acme"))
	require.Equal(t, [3]string{actor, "127.0.0.1", "req-create"}, who("TestChangeOf", "Org", "acme"))

	for _, c := range []struct {
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
		r := c.b.do(t, "PATCH", "/v1/orgs/acme", secret, strings.NewReader(`{"metadata":{"labels":{"via":"`+strings.ReplaceAll(c.want, ".", "-")+`"}}}`),
			append(hdr, "Content-Type", "application/merge-patch+json")...)
		require.Equal(t, 200, r.status, string(r.body))
		require.Equal(t, [3]string{actor, c.want, "req-" + c.want}, who("TestAuditOf", "object.update", "Org/acme"), "%v", c.hdr)
		require.Equal(t, [3]string{actor, c.want, "req-" + c.want}, who("TestChangeOf", "Org", "acme"), "%v", c.hdr)
	}
	r = direct.do(t, "DELETE", "/v1/orgs/acme", secret, nil, "X-Request-Id", "req-delete")
	require.Equal(t, 204, r.status, string(r.body))
	require.Equal(t, [3]string{actor, "127.0.0.1", "req-delete"}, who("TestAuditOf", "object.delete", "Org/acme"))
}
