package httpapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
)

// saltSees says what Salt 3006's http_json makes of an answer (research
// salt-client-behaviour.md §1): a 200 JSON object is pillar data; a 200 body that is not JSON
// is an entry in _errors (Salt refuses to apply states); anything else is a silently empty
// pillar, which these tests must never see.
func saltSees(t *testing.T, r response) (data map[string]any, errText string) {
	t.Helper()
	require.Equal(t, 200, r.status, "a non-2xx answer is a silently empty pillar in Salt: %s", r.body)
	if !json.Valid(r.body) {
		return nil, string(r.body)
	}
	require.NoError(t, json.Unmarshal(r.body, &data), "a JSON answer must be an object (an array crashes Salt's compile): %s", r.body)
	return data, ""
}

// TestSaltRender: what Salt sees through http_json for a pillar, an unknown minion (both
// settings), missing or wrong credentials, a render slower than the bound, a database that is
// down, and a legacy master without credentials.
func TestSaltRender(t *testing.T) {
	t.Parallel()
	b := setupState(t)
	ctx := context.Background()
	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"acme"}}`)).status)
	require.Equal(t, 201, b.do(t, "POST", "/v1/nodes", b.admin, strings.NewReader(`{"metadata":{"name":"web01"},"spec":{"org":"acme"}}`)).status)
	require.Equal(t, 201, b.do(t, "PUT", "/v1/nodes/web01/pillars/app", b.admin, strings.NewReader(`{"port":80}`)).status)
	_, render, err := b.tokens.Create(ctx, auth.AuditActor{Actor: "test"}, auth.CreateParams{Name: "salt", Scopes: []string{"pillars:render:*"}})
	require.NoError(t, err)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("salt:"+render))

	data, errText := saltSees(t, b.do(t, "GET", "/v1/salt/pillar/web01", "", nil, "Authorization", basic))
	require.Empty(t, errText)
	require.Equal(t, json.Number("80"), json.Number(string(mustJSON(t, data["port"]))))

	data, errText = saltSees(t, b.do(t, "GET", "/v1/salt/pillar/ghost", render, nil))
	require.Empty(t, errText)
	require.Empty(t, data, "by default an unknown minion has an empty pillar")
	require.Equal(t, 200, b.do(t, "PUT", "/v1/pillar-settings", b.admin, strings.NewReader(`{"unknownMinion":"error"}`)).status)
	_, errText = saltSees(t, b.do(t, "GET", "/v1/salt/pillar/ghost", render, nil))
	require.Contains(t, errText, "unknown minion")

	_, errText = saltSees(t, b.do(t, "GET", "/v1/salt/pillar/web01", "", nil))
	require.Contains(t, errText, "authentication")
	_, errText = saltSees(t, b.do(t, "GET", "/v1/salt/pillar/web01", "strata_not-a-token-at-all-not-a-token-at-all1", nil))
	require.Contains(t, errText, "authentication")
	_, other, err := b.tokens.Create(ctx, auth.AuditActor{Actor: "test"}, auth.CreateParams{Name: "other", Scopes: []string{"pillars:render:node/db*"}})
	require.NoError(t, err)
	_, errText = saltSees(t, b.do(t, "GET", "/v1/salt/pillar/web01", other, nil))
	require.Contains(t, errText, "authorization")
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// TestSaltRenderFailures: a database that is down and a render slower than the bound reach
// Salt as error texts (recorded in _errors), and the API render answers them with a 5xx.
func TestSaltRenderFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	live := pgtest.NewDB(t)
	tokens := auth.NewService(live)
	secret, err := tokens.Bootstrap(ctx, "")
	require.NoError(t, err)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	// A database that is down: the resource and pillar services' pool is closed.
	dead := pgtest.NewDB(t)
	dead.Close()
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Tokens: tokens, Resources: resource.NewService(dead), Pillars: pillar.NewService(dead), Logger: quiet, MaxBodyBytes: 1 << 16}))
	t.Cleanup(srv.Close)
	b := &testBundle{srv: srv, admin: secret, tokens: tokens}
	_, errText := saltSees(t, b.do(t, "GET", "/v1/salt/pillar/web01", secret, nil))
	require.Contains(t, errText, "database")
	r := b.do(t, "GET", "/v1/nodes/web01/pillar", secret, nil)
	require.GreaterOrEqual(t, r.status, 500, "the API render answers a failure with a 5xx: %s", r.body)

	// A render slower than the bound (here: any render, with a bound of a nanosecond).
	slow := httptest.NewServer(httpapi.New(httpapi.Options{Tokens: tokens, Resources: resource.NewService(live), Pillars: pillar.NewService(live),
		Logger: quiet, MaxBodyBytes: 1 << 16, SaltRenderTimeout: time.Nanosecond}))
	t.Cleanup(slow.Close)
	b = &testBundle{srv: slow, admin: secret, tokens: tokens}
	_, errText = saltSees(t, b.do(t, "GET", "/v1/salt/pillar/web01", secret, nil))
	require.Contains(t, errText, "timeout")

	// Salt 3005 and older send no credentials: only addresses listed in SaltLegacyClients
	// may render, and only render.
	legacy := httptest.NewServer(httpapi.New(httpapi.Options{Tokens: tokens, Resources: resource.NewService(live), Pillars: pillar.NewService(live),
		Logger: quiet, MaxBodyBytes: 1 << 16, SaltLegacyClients: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}))
	t.Cleanup(legacy.Close)
	b = &testBundle{srv: legacy, admin: secret, tokens: tokens}
	data, errText := saltSees(t, b.do(t, "GET", "/v1/salt/pillar/ghost", "", nil))
	require.Empty(t, errText)
	require.Empty(t, data)
	problem(t, b.do(t, "GET", "/v1/nodes/ghost/pillar", "", nil), 401, "unauthenticated")
}
