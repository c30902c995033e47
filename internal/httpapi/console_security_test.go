package httpapi_test

import (
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pgtest"
)

// signInRaw signs in with hdr on every request, without a cookie jar (a jar would keep a
// Secure cookie from a plain-HTTP test server), and returns the cookies the server set: the
// sign-in form's and the session's.
func signInRaw(t *testing.T, base, token string, hdr ...string) (login, session *http.Cookie) {
	t.Helper()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequest("GET", base+"/ui/login", nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := noRedirect.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == "strata_login_csrf" {
			login = c
		}
	}
	require.NotNil(t, login, "the sign-in form sets its CSRF cookie")
	form := url.Values{"csrf": {login.Value}, "token": {token}, "next": {"/ui/"}}
	req, err = http.NewRequest("POST", base+"/ui/login", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	req.AddCookie(&http.Cookie{Name: login.Name, Value: login.Value})
	resp, err = noRedirect.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	for _, c := range resp.Cookies() {
		if c.Name == "strata_session" {
			session = c
		}
	}
	require.NotNil(t, session, "signing in sets the session cookie")
	return login, session
}

// TestSessionCookieSecureBehindTLSProxy is finding 8(j) of issue 27: behind a proxy that
// terminates TLS the console's cookies were never Secure, so a browser would send the
// session over plain HTTP. They are Secure when a trusted proxy (--trusted-proxies) says the
// client's connection was TLS (X-Forwarded-Proto: https or Forwarded: proto=https), and the
// header from any other peer changes nothing. Seen failing before the fix (not Secure).
func TestSessionCookieSecureBehindTLSProxy(t *testing.T) {
	t.Parallel()
	d := pgtest.NewDB(t)
	proxied := serveOn(t, d, func(o *httpapi.Options) { o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} })
	direct := serveOn(t, d, nil)

	for _, hdr := range [][]string{{"X-Forwarded-Proto", "https"}, {"Forwarded", "for=192.0.2.7;proto=https"}} {
		login, session := signInRaw(t, proxied.srv.URL, proxied.admin, hdr...)
		require.True(t, login.Secure, "%v: the sign-in form's cookie is Secure", hdr)
		require.True(t, session.Secure, "%v: the session cookie is Secure", hdr)
		require.True(t, session.HttpOnly)
		require.Equal(t, http.SameSiteStrictMode, session.SameSite)
	}
	// The proxy says the client spoke plain HTTP: nothing to mark.
	_, session := signInRaw(t, proxied.srv.URL, proxied.admin, "X-Forwarded-Proto", "http")
	require.False(t, session.Secure)
	// A peer that is not a trusted proxy cannot say so.
	login, session := signInRaw(t, direct.srv.URL, proxied.admin, "X-Forwarded-Proto", "https")
	require.False(t, login.Secure)
	require.False(t, session.Secure)
}
