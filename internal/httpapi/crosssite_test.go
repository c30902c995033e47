package httpapi_test

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pgtest"
)

// TestCrossSiteRequestsRefused is finding 8(f) of issue 27: /v1 accepted JSON sent as
// application/x-www-form-urlencoded and advertised Basic, so a cross-site form post could use
// a browser's cached Basic credentials — an admin token was created with
// Origin: https://evil.example. Every /v1 request a browser marks as coming from another site
// (Sec-Fetch-Site cross-site or same-site, an Origin that is not the server's own) is a 403
// naming the header; a form-encoded body is accepted only from clients that are no browser
// and send no Basic credentials (curl -d with a Bearer token). Seen failing before the fix
// (201: the token was created).
func TestCrossSiteRequestsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("x:"+b.admin))
	const form = "application/x-www-form-urlencoded"
	post := func(name string, hdr ...string) response {
		t.Helper()
		req, err := http.NewRequest("POST", b.srv.URL+"/v1/tokens", strings.NewReader(`{"name":"`+name+`","scopes":["admin"]}`))
		require.NoError(t, err)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return response{resp.StatusCode, resp.Header, body}
	}
	tokens := func() string {
		r := b.do(t, "GET", "/v1/tokens", b.admin, nil)
		require.Equal(t, 200, r.status)
		return string(r.body)
	}

	for _, c := range []struct {
		name, header string
		hdr          []string
	}{
		{"evil-form-basic", "Origin", []string{"Authorization", basic, "Content-Type", form, "Origin", "https://evil.example"}},
		{"evil-json-bearer", "Origin", []string{"Authorization", "Bearer " + b.admin, "Content-Type", "application/json", "Origin", "https://evil.example"}},
		{"evil-null-origin", "Origin", []string{"Authorization", basic, "Content-Type", form, "Origin", "null"}},
		{"evil-other-port", "Origin", []string{"Authorization", basic, "Origin", "http://127.0.0.1:1"}},
		{"evil-cross-site", "Sec-Fetch-Site", []string{"Authorization", basic, "Content-Type", form, "Sec-Fetch-Site", "cross-site"}},
		{"evil-same-site", "Sec-Fetch-Site", []string{"Authorization", "Bearer " + b.admin, "Sec-Fetch-Site", "same-site"}},
		// The server's own origin, but a form a browser could send without asking first.
		{"own-form", "Content-Type", []string{"Authorization", "Bearer " + b.admin, "Content-Type", form, "Origin", b.srv.URL}},
		{"own-fetch-form", "Content-Type", []string{"Authorization", "Bearer " + b.admin, "Content-Type", form, "Sec-Fetch-Site", "same-origin"}},
		// No browser headers, but Basic credentials with a form body: a browser with cached
		// Basic credentials that sends neither header must not get through either.
		{"basic-form", "Content-Type", []string{"Authorization", basic, "Content-Type", form}},
	} {
		r := post(c.name, c.hdr...)
		p := problem(t, r, http.StatusForbidden, "forbidden")
		require.Contains(t, p.Detail, c.header, "%s: the refusal names the header", c.name)
		require.NotContains(t, tokens(), c.name, "%s: no token was created", c.name)
	}
	// The refusal offers no Basic either: it is no 401.
	require.Equal(t, 201, post("own-origin", "Authorization", "Bearer "+b.admin, "Content-Type", "application/json", "Origin", b.srv.URL, "Sec-Fetch-Site", "same-origin").status)
	require.Equal(t, 201, post("curl-form", "Authorization", "Bearer "+b.admin, "Content-Type", form).status, "curl -d with a Bearer token")
	require.Equal(t, 201, post("basic-json", "Authorization", basic, "Content-Type", "application/json").status, "Basic with a JSON body, as Terraform sends it")
	require.Equal(t, 201, post("fetch-none", "Authorization", "Bearer "+b.admin, "Sec-Fetch-Site", "none").status, "a request the user typed")

	// Even a GET is refused cross-site (a <script src> or <img> sends cached credentials too).
	r := b.do(t, "GET", "/v1/tokens", b.admin, nil, "Sec-Fetch-Site", "cross-site")
	p := problem(t, r, http.StatusForbidden, "forbidden")
	require.Contains(t, p.Detail, "Sec-Fetch-Site")
	require.NotEmpty(t, r.header.Get("X-Request-Id"))
}

// TestWWWAuthenticateBasicOnlyForStateAndSalt (finding 8(f)): a 401 offers Basic only where
// the clients that need it call (Terraform's http backend under /v1/state, Salt under
// /v1/salt), so a browser never opens a credentials dialog, and caches what was typed in it,
// for any other route. Seen failing before the fix (Basic everywhere).
func TestWWWAuthenticateBasicOnlyForStateAndSalt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for path, basic := range map[string]bool{
		"/v1/orgs":                       false,
		"/v1/tokens":                     false,
		"/v1/nodes/web01/pillar":         false,
		"/v1/no/such/route":              false,
		"/v1/state/net/default":          true,
		"/v1/state/net/default/lock":     true,
		"/v1/salt/credentials":           true,
		"/v1/state/net/default/versions": true,
	} {
		method := "GET"
		if path == "/v1/salt/credentials" {
			method = "POST"
		}
		r := b.do(t, method, path, "", nil)
		require.Equal(t, http.StatusUnauthorized, r.status, path)
		h := r.header.Get("WWW-Authenticate")
		require.Contains(t, h, "Bearer", path)
		require.Equal(t, basic, strings.Contains(h, "Basic"), "%s: %s", path, h)
	}
}

// TestCrossSiteBehindTrustedProxy (finding 8(f)): behind a trusted proxy the server's own
// origin is the one the proxy names (X-Forwarded-Proto and X-Forwarded-Host), and those
// headers from any other peer are ignored. Seen failing before the fix (every origin passed).
func TestCrossSiteBehindTrustedProxy(t *testing.T) {
	t.Parallel()
	d := pgtest.NewDB(t)
	proxied := serveOn(t, d, func(o *httpapi.Options) { o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} })
	direct := serveOn(t, d, nil)
	fwd := []string{"X-Forwarded-Proto", "https", "X-Forwarded-Host", "strata.example"}
	get := func(b *testBundle, hdr ...string) response {
		return b.do(t, "GET", "/v1/orgs", proxied.admin, nil, hdr...)
	}
	require.Equal(t, 200, get(proxied, append(fwd, "Origin", "https://strata.example")...).status)
	require.Equal(t, 200, get(proxied, append(fwd, "Origin", "https://strata.example:443")...).status, "the default port is the same origin")
	require.Equal(t, 200, get(proxied, "Forwarded", `for=192.0.2.1;proto=https;host="strata.example"`, "Origin", "https://strata.example").status, "Forwarded names it too")
	problem(t, get(proxied, append(fwd, "Origin", "http://strata.example")...), 403, "forbidden")
	problem(t, get(proxied, append(fwd, "Origin", proxied.srv.URL)...), 403, "forbidden")
	// A peer that is not trusted cannot name the origin.
	problem(t, get(direct, append(fwd, "Origin", "https://strata.example")...), 403, "forbidden")
	require.Equal(t, 200, get(direct, append(fwd, "Origin", direct.srv.URL)...).status)
}
