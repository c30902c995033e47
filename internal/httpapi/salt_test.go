package httpapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
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
// salt-client-behaviour.md §1 and §3a): a 200 JSON object is pillar data, and the texts of
// its _errors are what Salt shows its user when it refuses to apply states; anything else is
// a silently empty pillar, a bare JSON decode error or a crashed compile, which these tests
// must never see.
func saltSees(t *testing.T, r response) (data map[string]any, errText string) {
	t.Helper()
	require.Equal(t, 200, r.status, "a non-2xx answer is a silently empty pillar in Salt: %s", r.body)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	require.NoError(t, json.Unmarshal(r.body, &data), "the answer must be a JSON object (a string or an array crashes Salt's compile, other text shows only a decode error): %s", r.body)
	if errs, ok := data["_errors"]; ok {
		require.Len(t, data, 1, "a failure carries only _errors: %s", r.body)
		list, ok := errs.([]any)
		require.True(t, ok && len(list) == 1, "_errors is a list of one text: %s", r.body)
		text, ok := list[0].(string)
		require.True(t, ok, "_errors holds text: %s", r.body)
		return nil, text
	}
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
	require.Equal(t, `strata: minion "ghost" is not a node in strata, and the pillar setting unknownMinion is "error" — create the node (`+"`strata node create ghost --org ORG`"+`), or set unknownMinion to "empty" (`+"`strata pillar settings set --unknown-minion empty`"+`)`, errText)

	_, errText = saltSees(t, b.do(t, "GET", "/v1/salt/pillar/web01", "", nil))
	require.Equal(t, `strata: cannot render the pillar of minion "web01": the request carries no token — put a token with the scope pillars:render:node/* in the ext_pillar's http_json password (see `+"`strata salt config`"+`)`, errText)
	const wrong = "strata_not-a-token-at-all-not-a-token-at-all1"
	for _, hdr := range [][]string{{"Authorization", "Bearer " + wrong}, {"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("salt:"+wrong))}} {
		r := b.do(t, "GET", "/v1/salt/pillar/web01", "", nil, hdr...)
		_, errText = saltSees(t, r)
		require.Equal(t, `strata: cannot render the pillar of minion "web01": the token is not valid (unknown, revoked or expired) — create one with `+"`strata token create salt-master --scope 'pillars:render:node/*'`"+` and put it in the ext_pillar's http_json password`, errText)
		require.NotContains(t, string(r.body), "not-a-token", "the token is never echoed")
	}
	_, other, err := b.tokens.Create(ctx, auth.AuditActor{Actor: "test"}, auth.CreateParams{Name: "other", Scopes: []string{"pillars:render:node/db*"}})
	require.NoError(t, err)
	r := b.do(t, "GET", "/v1/salt/pillar/web01", other, nil)
	_, errText = saltSees(t, r)
	require.Equal(t, `strata: cannot render the pillar of minion "web01": the token "other" lacks the scope pillars:render:node/web01 — use a token with pillars:render:node/* (or one covering this minion)`, errText)
	require.NotContains(t, string(r.body), other[len("strata_"):], "the token is never echoed")

	// The failures are counted, by reason.
	metrics := string(b.do(t, "GET", "/metrics", "", nil).body)
	for reason, n := range map[string]int{"authentication": 3, "authorization": 1, "unknown minion": 1} {
		require.Contains(t, metrics, fmt.Sprintf(`strata_pillar_render_failures_total{path="salt",reason=%q} %d`, reason, n))
	}
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
	r0 := b.do(t, "GET", "/v1/salt/pillar/web01", secret, nil)
	_, errText := saltSees(t, r0)
	require.Equal(t, `strata: cannot render the pillar of minion "web01": strata's database is not answering — states are refused until it is back; check strata's log and /readyz`, errText)
	require.NotContains(t, string(r0.body), "postgres", "no database error's own words (a URL, a password) reach Salt")
	r := b.do(t, "GET", "/v1/nodes/web01/pillar", secret, nil)
	require.GreaterOrEqual(t, r.status, 500, "the API render answers a failure with a 5xx: %s", r.body)

	// A render slower than the bound (here: any render, with a bound of a nanosecond).
	slow := httptest.NewServer(httpapi.New(httpapi.Options{Tokens: tokens, Resources: resource.NewService(live), Pillars: pillar.NewService(live),
		Logger: quiet, MaxBodyBytes: 1 << 16, SaltRenderTimeout: time.Nanosecond}))
	t.Cleanup(slow.Close)
	b = &testBundle{srv: slow, admin: secret, tokens: tokens}
	_, errText = saltSees(t, b.do(t, "GET", "/v1/salt/pillar/web01", secret, nil))
	require.Equal(t, `strata: cannot render the pillar of minion "web01": the render took longer than 1ns (--salt-render-timeout) — check strata's log and the database's load; raise --salt-render-timeout if such renders are expected`, errText)

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
