package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
	"github.com/stratahq/strata/internal/secret"
)

type testBundle struct {
	srv    *httptest.Server
	admin  string
	tokens *auth.Service
}

func setup(t testing.TB) *testBundle {
	t.Helper()
	d := pgtest.NewDB(t)
	tokens := auth.NewService(d)
	secret, err := tokens.Bootstrap(context.Background(), "")
	require.NoError(t, err)
	require.NotEmpty(t, secret)
	pillars := pillar.NewService(d)
	keys := testKeys(t)
	pillars.UseKeys(keys)
	resources := resource.NewService(d)
	api := httpapi.New(httpapi.Options{
		Tokens:       tokens,
		Resources:    resources,
		Pillars:      pillars,
		Keys:         keys,
		MaxBodyBytes: 64 << 10,
		Version:      "test",
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	serveListsFromIndex(t, resources)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &testBundle{srv: srv, admin: secret, tokens: tokens}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (b *testBundle) do(t testing.TB, method, path, token string, body io.Reader, hdr ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, body)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b2, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{resp.StatusCode, resp.Header, b2}
}

func problem(t *testing.T, r response, status int, typ string) api.Problem {
	t.Helper()
	require.Equal(t, status, r.status, string(r.body))
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
	var p api.Problem
	require.NoError(t, json.Unmarshal(r.body, &p))
	require.Equal(t, status, p.Status)
	require.Equal(t, httpapi.ProblemTypeBase+typ, p.Type)
	require.NotEmpty(t, p.Detail)
	return p
}

func TestProblems(t *testing.T) {
	t.Parallel()
	b := setup(t)

	problem(t, b.do(t, "GET", "/v1/orgs", "", nil), 401, "unauthenticated")
	problem(t, b.do(t, "GET", "/v1/orgs", "strata_nottherightone0000000000000000000000000", nil), 401, "unauthenticated")
	problem(t, b.do(t, "GET", "/v1/nothing-here", "", nil), 401, "unauthenticated")
	problem(t, b.do(t, "GET", "/v1/version", "", nil), 401, "unauthenticated")
	require.Equal(t, 200, b.do(t, "GET", "/version", "", nil).status)
	require.Equal(t, 200, b.do(t, "GET", "/v1/orgs", "", nil, "Authorization", "bearer "+b.admin).status, "the scheme is case-insensitive")
	problem(t, b.do(t, "GET", "/v1/nothing-here", b.admin, nil), 404, "not-found")
	problem(t, b.do(t, "GET", "/nothing", "", nil), 404, "not-found")
	r := b.do(t, "PATCH", "/v1/orgs", b.admin, nil)
	problem(t, r, 405, "method-not-allowed")
	require.Contains(t, r.header.Get("Allow"), "GET")

	p := problem(t, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":`)), 400, "validation")
	require.Contains(t, p.Detail, "ends in the middle")
	p = problem(t, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"a"},"bogus":1}`)), 400, "validation")
	require.Equal(t, "/bogus", p.Errors[0].Field)
	p = problem(t, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"a", "labels":{"Bad Key!":"x"}}}`)), 422, "unprocessable")
	require.Equal(t, "/metadata/labels/Bad Key!", p.Errors[0].Field)
	problem(t, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"a"}} {}`)), 400, "validation")
	problem(t, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"a"}}`), "Content-Type", "text/xml"), 400, "validation")
	// curl -d sends application/x-www-form-urlencoded; a JSON body is still accepted.
	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"curl"}}`), "Content-Type", "application/x-www-form-urlencoded").status)
	problem(t, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":7}}`)), 400, "validation")
	problem(t, b.do(t, "GET", "/v1/orgs?limit=x", b.admin, nil), 400, "validation")
	problem(t, b.do(t, "GET", "/v1/orgs?limit=5000", b.admin, nil), 400, "validation")
	p = problem(t, b.do(t, "GET", "/v1/orgs?continue=zzz", b.admin, nil), 400, "validation")
	require.Equal(t, "continue", p.Errors[0].Field)
	p = problem(t, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`[]`)), 400, "validation")
	require.Contains(t, p.Detail, "expected a JSON object")
	p = problem(t, b.do(t, "POST", "/v1/tokens", b.admin, strings.NewReader(`{"name":"x","scopes":["admin"],"expiresAt":"tomorrow"}`)), 400, "validation")
	require.Contains(t, p.Detail, "RFC 3339")
	problem(t, b.do(t, "DELETE", "/v1/orgs/curl?resourceVersion=abc", b.admin, nil), 400, "validation")

	big := `{"metadata":{"name":"big"},"spec":{"blob":"` + strings.Repeat("x", 70<<10) + `"}}`
	problem(t, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(big)), 413, "too-large")
	problem(t, b.do(t, "GET", "/v1/orgs/big", b.admin, nil), 404, "not-found")
}

func TestOrgsEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"acme","labels":{"env":"prod"}},"spec":{"id":123456789012345678901234567890}}`))
	require.Equal(t, 201, r.status, string(r.body))
	require.Equal(t, "/v1/orgs/acme", r.header.Get("Location"))
	require.Contains(t, string(r.body), "123456789012345678901234567890", "JSON numbers keep their precision")
	var created api.Object
	require.NoError(t, json.Unmarshal(r.body, &created))

	problem(t, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"acme"}}`)), 409, "conflict")

	r = b.do(t, "GET", "/v1/orgs/acme", b.admin, nil)
	require.Equal(t, 200, r.status)
	require.Contains(t, string(r.body), `"id":123456789012345678901234567890`)

	// PUT with the current resourceVersion succeeds; the same request again is stale.
	cur := `{"metadata":{"name":"acme","resourceVersion":"` + created.Metadata.ResourceVersion + `"},"spec":{"x":1}}`
	r = b.do(t, "PUT", "/v1/orgs/acme", b.admin, strings.NewReader(cur))
	require.Equal(t, 200, r.status, string(r.body))
	problem(t, b.do(t, "PUT", "/v1/orgs/acme", b.admin, strings.NewReader(cur)), 409, "conflict")
	r = b.do(t, "PUT", "/v1/orgs/fresh", b.admin, strings.NewReader(`{"spec":{}}`))
	require.Equal(t, 201, r.status, string(r.body))
	require.Equal(t, "/v1/orgs/fresh", r.header.Get("Location"))

	r = b.do(t, "PATCH", "/v1/orgs/acme", b.admin, strings.NewReader(`{"metadata":{"labels":{"env":null,"team":"a"}}}`), "Content-Type", "application/merge-patch+json")
	require.Equal(t, 200, r.status, string(r.body))
	require.Contains(t, string(r.body), `"labels":{"team":"a"}`)

	r = b.do(t, "GET", "/v1/orgs?limit=1", b.admin, nil)
	require.Equal(t, 200, r.status)
	var list api.ObjectList
	require.NoError(t, json.Unmarshal(r.body, &list))
	require.Len(t, list.Items, 1)
	require.NotEmpty(t, list.Continue)
	require.NotEmpty(t, list.ResourceVersion)

	r = b.do(t, "DELETE", "/v1/orgs/acme", b.admin, nil)
	require.Equal(t, 204, r.status)
	problem(t, b.do(t, "GET", "/v1/orgs/acme", b.admin, nil), 404, "not-found")
}

func TestScopes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sys := auth.AuditActor{Actor: "test"}
	_, reader, err := b.tokens.Create(ctx, sys, auth.CreateParams{Name: "reader", Scopes: []string{"orgs:read:acme"}})
	require.NoError(t, err)
	_, writer, err := b.tokens.Create(ctx, sys, auth.CreateParams{Name: "writer", Scopes: []string{"orgs:write:ac*"}})
	require.NoError(t, err)
	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"acme"}}`)).status)
	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"other"}}`)).status)

	require.Equal(t, 200, b.do(t, "GET", "/v1/orgs/acme", reader, nil).status)
	problem(t, b.do(t, "GET", "/v1/orgs/other", reader, nil), 403, "forbidden")
	problem(t, b.do(t, "DELETE", "/v1/orgs/acme", reader, nil), 403, "forbidden")
	r := b.do(t, "GET", "/v1/orgs", reader, nil)
	require.Equal(t, 200, r.status)
	require.Contains(t, string(r.body), "acme")
	require.NotContains(t, string(r.body), "other", "a scoped token lists only what it may read")

	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs", writer, strings.NewReader(`{"metadata":{"name":"acme2"}}`)).status)
	problem(t, b.do(t, "POST", "/v1/orgs", writer, strings.NewReader(`{"metadata":{"name":"zeta"}}`)), 403, "forbidden")
	problem(t, b.do(t, "POST", "/v1/tokens", writer, strings.NewReader(`{"name":"x","scopes":["admin"]}`)), 403, "forbidden")
	problem(t, b.do(t, "GET", "/v1/audit", writer, nil), 403, "forbidden")

	// Basic auth with the token as password works too (Terraform, Salt).
	req, _ := http.NewRequest("GET", b.srv.URL+"/v1/orgs/acme", nil)
	req.SetBasicAuth("anything", reader)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
}

func TestTokensAndAudit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, "POST", "/v1/tokens", b.admin, strings.NewReader(`{"name":"ci","scopes":["orgs:read:*"]}`))
	require.Equal(t, 201, r.status, string(r.body))
	var tok api.Token
	require.NoError(t, json.Unmarshal(r.body, &tok))
	require.True(t, strings.HasPrefix(tok.Secret, auth.TokenPrefix))
	require.Equal(t, 200, b.do(t, "GET", "/v1/orgs", tok.Secret, nil).status)

	p := problem(t, b.do(t, "POST", "/v1/tokens", b.admin, strings.NewReader(`{"name":"x","scopes":["orgs:fly:*"]}`)), 400, "validation")
	require.Equal(t, "/scopes/0", p.Errors[0].Field)

	r = b.do(t, "GET", "/v1/tokens", b.admin, nil)
	require.Equal(t, 200, r.status)
	require.NotContains(t, string(r.body), tok.Secret, "secrets are never listed")

	require.Equal(t, 204, b.do(t, "DELETE", "/v1/tokens/"+tok.ID, b.admin, nil).status)
	problem(t, b.do(t, "GET", "/v1/orgs", tok.Secret, nil), 401, "unauthenticated")
	problem(t, b.do(t, "DELETE", "/v1/tokens/tok_missing", b.admin, nil), 404, "not-found")

	r = b.do(t, "GET", "/v1/audit?action=token.", b.admin, nil)
	require.Equal(t, 200, r.status)
	var audit api.AuditList
	require.NoError(t, json.Unmarshal(r.body, &audit))
	var actions []string
	for _, a := range audit.Items {
		actions = append(actions, a.Action+" "+a.Target)
	}
	require.Contains(t, actions, "token.revoke "+tok.ID)
	require.Contains(t, actions, "token.create "+tok.ID)
	require.NotContains(t, string(r.body), tok.Secret)
}

func TestOpsEndpoints(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, 200, b.do(t, "GET", "/healthz", "", nil).status)
	require.Equal(t, 200, b.do(t, "GET", "/readyz", "", nil).status)
	b.do(t, "GET", "/v1/orgs/x", b.admin, nil)
	r := b.do(t, "GET", "/metrics", "", nil)
	require.Equal(t, 200, r.status)
	require.Contains(t, string(r.body), `strata_http_requests_total{code="404",route="GET /v1/orgs/{org}"}`)
}

// TestConcurrentPutCreates: many clients PUT the same new org at once; one creates it, the
// others replace it; nobody gets an error and exactly one org exists.
func TestConcurrentPutCreates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 16
	var wg sync.WaitGroup
	codes := make(chan int, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("PUT", b.srv.URL+"/v1/orgs/race", bytes.NewReader([]byte(`{"spec":{}}`)))
			req.Header.Set("Authorization", "Bearer "+b.admin)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	wg.Wait()
	close(codes)
	created := 0
	for c := range codes {
		require.Contains(t, []int{200, 201}, c)
		if c == 201 {
			created++
		}
	}
	require.Equal(t, 1, created)
}

// TestReadyz: a failing readiness check is a 503 problem naming the reason; warnings are
// listed in a 200.
func TestReadyz(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var fail error
	var warnings []string
	api := httpapi.New(httpapi.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Ready: func(context.Context) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			return warnings, fail
		}})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	b := &testBundle{srv: srv}

	mu.Lock()
	fail = errors.New("database schema is at version 3, this strata expects 2")
	mu.Unlock()
	p := problem(t, b.do(t, "GET", "/readyz", "", nil), 503, "unavailable")
	require.Contains(t, p.Detail, "version 3")
	mu.Lock()
	fail, warnings = nil, []string{"terraform state: no lock-keeper session"}
	mu.Unlock()
	r := b.do(t, "GET", "/readyz", "", nil)
	require.Equal(t, 200, r.status)
	require.Contains(t, string(r.body), "no lock-keeper session")
}

// TestPanicIsA500Problem: a handler that panics (here: an API built without its resource
// state service, a programming error) answers a 500 problem document, logs the stack, and leaves
// the server serving.
func TestPanicIsA500Problem(t *testing.T) {
	t.Parallel()
	d := pgtest.NewDB(t)
	tokens := auth.NewService(d)
	secret, err := tokens.Bootstrap(context.Background(), "")
	require.NoError(t, err)
	var logs syncBuffer
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Tokens: tokens, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}))
	t.Cleanup(srv.Close)
	b := &testBundle{srv: srv, admin: secret}
	p := problem(t, b.do(t, "GET", "/v1/projects/acme", secret, nil), 500, "internal")
	require.NotContains(t, p.Detail, "nil pointer", "the cause is logged, not shown")
	require.Contains(t, logs.String(), "panic serving request")
	require.Equal(t, 200, b.do(t, "GET", "/healthz", "", nil).status)
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// testKeys is a keyring of one random key, for secret categories.
func testKeys(t testing.TB) *secret.Keyring {
	t.Helper()
	raw := make([]byte, secret.KeySize)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	k, err := secret.NewKey(raw)
	require.NoError(t, err)
	r, err := secret.NewKeyring(k)
	require.NoError(t, err)
	return r
}
