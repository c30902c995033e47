package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/resource"
)

// fuzzServer starts an API on a fresh database for a fuzz target and returns it with an
// admin token.
func fuzzServer(f *testing.F) (*httptest.Server, string) {
	d := pgtest.NewDB(f)
	tokens := auth.NewService(d)
	secret, err := tokens.Bootstrap(context.Background(), "")
	if err != nil {
		f.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Tokens: tokens, Resources: resource.NewService(d),
		MaxBodyBytes: 1 << 16, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	f.Cleanup(srv.Close)
	return srv, secret
}

// FuzzOrgBodies sends arbitrary bodies to the write endpoints of every built-in kind (orgs,
// nodes, groups; they share one code path) and to the bulk apply: whatever arrives, the
// answer is never a 5xx (bad input is the client's problem and must be named as such).
func FuzzOrgBodies(f *testing.F) {
	srv, secret := fuzzServer(f)
	for _, setup := range []struct{ path, body string }{
		{"/v1/orgs", `{"metadata":{"name":"acme"}}`},
		{"/v1/orgs", `{"metadata":{"name":"other"}}`},
		{"/v1/nodes", `{"metadata":{"name":"fuzz"},"spec":{"org":"acme"}}`},
		{"/v1/orgs/acme/groups", `{"metadata":{"name":"fuzz"}}`},
		{"/v1/kinds/Db", `{"scope":"org","schema":{"type":"object","required":["engine"],"properties":{"engine":{"type":"string","enum":["pg","my"]},"size":{"type":"integer","maximum":100},"tags":{"type":"array","items":{"type":"string"}},"old":{"type":"string","x-removed":true},"name":{"type":"string","x-aliases":["title"]},"extra":{"type":"object","x-preserve-unknown-fields":true}}}}`},
		{"/v1/orgs/acme/resources/Db", `{"metadata":{"name":"fuzz"},"spec":{"engine":"pg","size":5}}`},
	} {
		method := "POST"
		if strings.HasPrefix(setup.path, "/v1/kinds/") {
			method = "PUT"
		}
		r, _ := http.NewRequest(method, srv.URL+setup.path, bytes.NewReader([]byte(setup.body)))
		r.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(r)
		if err != nil || resp.StatusCode != 201 {
			f.Fatalf("setup %s: %v %v", setup.path, err, resp)
		}
		resp.Body.Close()
	}
	// A node operator of acme: whatever its bodies say, no node of its may end up in other.
	operator := fuzzToken(f, srv.URL, secret, `{"name":"operator","scopes":["nodes:write:*","orgs:attach:acme","groups:write:acme","resources:write:org/acme"]}`)
	for _, seed := range []string{
		`{"spec":{"org":"other"}}`, `{"metadata":{"name":"fuzz"},"spec":{"org":"other"}}`, `{"spec":{"org":"other","org ":"acme"}}`,
		`{"metadata":{"name":"n"},"spec":{"org":"acme"}}`, `{"spec":{"org":"acme","x":[1]}}`, `{"spec":{"priority":3,"selector":"a in (b)"}}`,
		`{"spec":{"selector":"a>1"}}`, `{"metadata":{"labels":{"strata.io/x":"y"}}}`, `{"spec":{"org":null}}`,
		`{"metadata":{"name":"x"},"spec":{"org":"acme"},"groups":["fuzz","nope"]}` + "\n" + `{"metadata":{"name":"y"}}`,
		`{"metadata":{"name":"a"}}`, `{"metadata":{"name":"a","labels":{"k":"v"}},"spec":{"n":1e999}}`,
		`{"spec":[]}`, `{"metadata":{"labels":{"":""}}}`, `{"metadata":{"name":"a\u0000b"}}`, `null`, `[]`, `"x"`,
		`{"metadata":{"annotations":{"a":"\ud800"}}}`, `{"spec":{"a":"\u0000"}}`,
		`{"spec":{"engine":"pg","size":1.0,"title":"x","old":"y","extra":{"z":[1]}}}`, `{"spec":{"size":1e10000000}}`,
		`{"scope":"org","schema":{"type":"object","properties":{"a":{"type":"integer","default":1}}}}`,
		`{"schema":{"type":"object","required":["engine"],"properties":{"engine":{"type":"integer"}}},"acknowledge":[{"path":"/properties/engine","rule":"x"}]}`,
		`{"schema":{"$ref":"#/x"}}`, `{"schema":{"type":"object","properties":{"a":{"type":"string","pattern":"(("}}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, req := range []struct{ method, path string }{
			{"POST", "/v1/orgs"}, {"PUT", "/v1/orgs/fuzz"}, {"PATCH", "/v1/orgs/fuzz"},
			{"POST", "/v1/nodes"}, {"PUT", "/v1/nodes/fuzz"}, {"PATCH", "/v1/nodes/fuzz"},
			{"POST", "/v1/orgs/acme/groups"}, {"PUT", "/v1/orgs/acme/groups/fuzz"}, {"PATCH", "/v1/orgs/acme/groups/fuzz"},
			{"POST", "/v1/nodes:apply"},
			{"POST", "/v1/orgs/acme/resources/Db"}, {"PUT", "/v1/orgs/acme/resources/Db/fuzz"}, {"PATCH", "/v1/orgs/acme/resources/Db/fuzz"},
			{"PUT", "/v1/kinds/Fz?dryRun=true"}, {"PUT", "/v1/kinds/Db?dryRun=true"},
		} {
			for _, tok := range []string{operator, secret} {
				r, _ := http.NewRequest(req.method, srv.URL+req.path, bytes.NewReader(body))
				r.Header.Set("Authorization", "Bearer "+tok)
				resp, err := http.DefaultClient.Do(r)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode >= 500 || bytes.Contains(b, []byte(`"status":5`)) {
					t.Fatalf("%s %s with %q: %d %s", req.method, req.path, body, resp.StatusCode, b)
				}
				if tok == operator && strings.HasPrefix(req.path, "/v1/nodes") && resp.StatusCode < 300 && bytes.Contains(b, []byte(`"org":"other"`)) {
					t.Fatalf("the operator of acme placed a node in other: %s %s with %q: %s", req.method, req.path, body, b)
				}
			}
			// The admin's writes may move fuzz into other; put it back for the next operator request.
			r, _ := http.NewRequest("PUT", srv.URL+"/v1/nodes/fuzz", strings.NewReader(`{"spec":{"org":"acme"}}`))
			r.Header.Set("Authorization", "Bearer "+secret)
			if resp, err := http.DefaultClient.Do(r); err == nil {
				resp.Body.Close()
			}
		}
	})
}

// fuzzToken creates a token through the API and returns its secret.
func fuzzToken(f *testing.F, base, admin, body string) string {
	f.Helper()
	r, _ := http.NewRequest("POST", base+"/v1/tokens", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(r)
	if err != nil || resp.StatusCode != 201 {
		f.Fatalf("create token: %v %v", err, resp)
	}
	defer resp.Body.Close()
	var tok struct {
		Secret string `json:"secret"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil {
		f.Fatal(err)
	}
	return tok.Secret
}

// FuzzLabelSelector sends arbitrary label selectors to the lists: the answer is a 200 or a
// 400 problem naming labelSelector, never a 5xx.
func FuzzLabelSelector(f *testing.F) {
	srv, secret := fuzzServer(f)
	for _, seed := range []string{"", "env=prod", "env in (a,b),!x", "a.b/c notin (,x)", "x>1", "!", "a in (", "a=b,", strings.Repeat("a,", 51) + "a", "\x00", "é=é"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, sel string) {
		resp, err := http.DefaultClient.Do(func() *http.Request {
			r, _ := http.NewRequest("GET", srv.URL+"/v1/nodes?labelSelector="+url.QueryEscape(sel), nil)
			r.Header.Set("Authorization", "Bearer "+secret)
			return r
		}())
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case 200:
		case 400:
			if !bytes.Contains(b, []byte(`"field":"labelSelector"`)) {
				t.Fatalf("%q: 400 without naming labelSelector: %s", sel, b)
			}
		default:
			t.Fatalf("%q: %d %s", sel, resp.StatusCode, b)
		}
	})
}
