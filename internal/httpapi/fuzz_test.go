package httpapi_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/resource"
)

// FuzzOrgBodies sends arbitrary bodies to the org endpoints: whatever arrives, the answer is
// never a 5xx (bad input is the client's problem and must be named as such).
func FuzzOrgBodies(f *testing.F) {
	d := pgtest.NewDB(f)
	tokens := auth.NewService(d)
	secret, err := tokens.Bootstrap(context.Background(), "")
	if err != nil {
		f.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Tokens: tokens, Resources: resource.NewService(d),
		MaxBodyBytes: 1 << 16, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	f.Cleanup(srv.Close)
	for _, seed := range []string{
		`{"metadata":{"name":"a"}}`, `{"metadata":{"name":"a","labels":{"k":"v"}},"spec":{"n":1e999}}`,
		`{"spec":[]}`, `{"metadata":{"labels":{"":""}}}`, `{"metadata":{"name":"a\u0000b"}}`, `null`, `[]`, `"x"`,
		`{"metadata":{"annotations":{"a":"\ud800"}}}`, `{"spec":{"a":"\u0000"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, req := range []struct{ method, path string }{
			{"POST", "/v1/orgs"}, {"PUT", "/v1/orgs/fuzz"}, {"PATCH", "/v1/orgs/fuzz"},
		} {
			r, _ := http.NewRequest(req.method, srv.URL+req.path, bytes.NewReader(body))
			r.Header.Set("Authorization", "Bearer "+secret)
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode >= 500 {
				t.Fatalf("%s %s with %q: %d %s", req.method, req.path, body, resp.StatusCode, b)
			}
		}
	})
}
