package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
)

// oasSchemas are the vendored OpenAPI 3.1 meta-schemas by $id (testdata/oas3.1/README.md).
var oasSchemas = map[string]string{
	"https://spec.openapis.org/oas/3.1/schema/2022-10-07":      "schema.json",
	"https://spec.openapis.org/oas/3.1/schema-base/2022-10-07": "schema-base.json",
	"https://spec.openapis.org/oas/3.1/dialect/base":           "dialect/base.schema.json",
	"https://spec.openapis.org/oas/3.1/meta/base":              "meta/base.schema.json",
}

// oasValidator compiles the official schema of OpenAPI 3.1 documents that also validates
// every Schema Object against the OAS dialect (schema-base), offline.
func oasValidator(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	for id, file := range oasSchemas {
		f, err := os.Open(filepath.Join("testdata", "oas3.1", file))
		require.NoError(t, err)
		doc, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		require.NoError(t, err)
		require.NoError(t, c.AddResource(id, doc))
	}
	s, err := c.Compile("https://spec.openapis.org/oas/3.1/schema-base/2022-10-07")
	require.NoError(t, err)
	return s
}

func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	return v
}

// TestOpenAPIDocumentIsValid: GET /v1/openapi.json answers without a token, the document
// validates as OpenAPI 3.1 (and each of its schemas against the OAS dialect), every route of
// the table is in it (LOCK and UNLOCK as x-strata-methods beside their …/lock twins), and
// each of its schemas compiles.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, "GET", "/v1/openapi.json", "", nil)
	require.Equal(t, 200, r.status, string(r.body))
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	require.NoError(t, oasValidator(t).Validate(decodeAny(t, r.body)))

	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Info    struct{ Version string }             `json:"info"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(r.body, &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)
	require.Equal(t, "test", doc.Info.Version)
	patterns := httpapi.New(httpapi.Options{Resources: resource.NewService(nil), Pillars: pillar.NewService(nil)}).Patterns()
	for _, p := range patterns {
		method, path, _ := strings.Cut(p, " ")
		switch method {
		case "LOCK", "UNLOCK":
			x := doc.Paths[path+"/lock"]["x-strata-methods"][method].(map[string]any)
			require.Equal(t, path, x["path"], p)
			require.Equal(t, map[string]string{"LOCK": "post", "UNLOCK": "delete"}[method], x["sameAs"], p)
			require.NotNil(t, doc.Paths[path+"/lock"][x["sameAs"].(string)], p)
		default:
			op := doc.Paths[path][strings.ToLower(method)]
			require.NotNil(t, op, "route %s is not in the document", p)
			require.Contains(t, op["responses"], "401", "%s needs a token: the document says it may answer 401", p)
		}
	}
	// Every schema the operations name compiles (the conformance check compiles them lazily).
	c, err := newConformanceFromBody(r.body)
	require.NoError(t, err)
	for path, item := range doc.Paths {
		for method, op := range item {
			if method == "x-strata-methods" {
				continue
			}
			for status, resp := range op["responses"].(map[string]any) {
				obj, ptr := c.resolve(resp.(map[string]any), pointer("paths", path, method, "responses", status))
				for ct := range mapOf(obj["content"]) {
					_, err := c.schema(ptr + pointer("content", ct, "schema"))
					require.NoError(t, err, "%s %s %s %s", method, path, status, ct)
				}
			}
		}
	}
}

func mapOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func newConformanceFromBody(b []byte) (*conformance, error) { return newConformance(b) }

// TestOpenAPIMetaSchemaRefusesAWrongDocument: the validation above is not vacuous — a
// schema with a type JSON Schema does not have, or an operation without responses, is
// refused by the vendored meta-schemas.
func TestOpenAPIMetaSchemaRefusesAWrongDocument(t *testing.T) {
	t.Parallel()
	v := oasValidator(t)
	for name, spoil := range map[string]func(doc map[string]any){
		"a schema of type strnig": func(doc map[string]any) {
			obj := doc["components"].(map[string]any)["schemas"].(map[string]any)["ObjectMeta"].(map[string]any)
			obj["properties"].(map[string]any)["name"] = map[string]any{"type": "strnig"}
		},
		"a response without a description": func(doc map[string]any) {
			op := doc["paths"].(map[string]any)["/v1/orgs"].(map[string]any)["get"].(map[string]any)
			delete(op["responses"].(map[string]any)["200"].(map[string]any), "description")
		},
		"a path parameter that is not required": func(doc map[string]any) {
			op := doc["paths"].(map[string]any)["/v1/orgs/{org}"].(map[string]any)["get"].(map[string]any)
			op["parameters"].([]any)[0].(map[string]any)["required"] = false
		},
	} {
		var doc map[string]any
		require.NoError(t, json.Unmarshal(openAPIDoc(), &doc))
		spoil(doc)
		b, err := json.Marshal(doc)
		require.NoError(t, err)
		require.Error(t, v.Validate(decodeAny(t, b)), name)
	}
}

// TestOpenAPIConformanceCatchesDrift: the conformance check of every test's exchanges
// (TestMain) fails on a document that does not say what the server does: the same real
// answers, checked against a document whose Object schema wants an integer kind, whose
// GET /v1/orgs/{org} lists no 404, and whose org list takes no labelSelector, are refused,
// while the real document accepts them.
func TestOpenAPIConformanceCatchesDrift(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"acme"}}`)).status)

	var doc map[string]any
	require.NoError(t, json.Unmarshal(openAPIDoc(), &doc))
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	schemas["Object"].(map[string]any)["properties"].(map[string]any)["kind"] = map[string]any{"type": "integer"}
	paths := doc["paths"].(map[string]any)
	delete(paths["/v1/orgs/{org}"].(map[string]any)["get"].(map[string]any)["responses"].(map[string]any), "404")
	list := paths["/v1/orgs"].(map[string]any)["get"].(map[string]any)
	var kept []any
	for _, p := range list["parameters"].([]any) {
		if p.(map[string]any)["name"] != "labelSelector" {
			kept = append(kept, p)
		}
	}
	list["parameters"] = kept
	wrongDoc, err := json.Marshal(doc)
	require.NoError(t, err)

	exchanges := func(c *conformance) {
		rt := &recordingTransport{base: http.DefaultTransport.(*recordingTransport).base, c: c}
		hc := &http.Client{Transport: rt}
		for _, path := range []string{"/v1/orgs/acme", "/v1/orgs/nothing", "/v1/orgs?labelSelector=env%3Dprod"} {
			req, err := http.NewRequest("GET", b.srv.URL+path, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+b.admin)
			resp, err := hc.Do(req)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	wrong, err := newConformance(wrongDoc)
	require.NoError(t, err)
	exchanges(wrong)
	report := wrong.report()
	require.Contains(t, report, "GET /v1/orgs/{org} 200 (application/json)", report)
	require.Contains(t, report, "GET /v1/orgs/{org} answered 404, which the document does not list", report)
	require.Contains(t, report, `GET /v1/orgs 200 took query parameter "labelSelector"`, report)

	right, err := newConformance(openAPIDoc())
	require.NoError(t, err)
	exchanges(right)
	require.Empty(t, right.report())
}

// TestOpenAPIIsTheOnlyV1RouteWithoutAToken: every path of the document under /v1 answers
// 401 without a token, except the document itself.
func TestOpenAPIIsTheOnlyV1RouteWithoutAToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(openAPIDoc(), &doc))
	open := 0
	for path, item := range doc.Paths {
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		concrete := paramRE.ReplaceAllString(path, "x")
		for method, op := range item {
			if method == "x-strata-methods" {
				continue
			}
			sec, hasSec := op.(map[string]any)["security"]
			r := b.do(t, strings.ToUpper(method), (&url.URL{Path: concrete}).EscapedPath(), "", nil)
			if path == "/v1/openapi.json" {
				open++
				require.Equal(t, 200, r.status)
				require.True(t, hasSec)
				require.Empty(t, sec, "the document's own operation needs no security")
				continue
			}
			if strings.HasPrefix(path, "/v1/salt/pillar/") {
				// Salt's ext_pillar sees only 200s: the refusal is its _errors member.
				require.Equal(t, 200, r.status)
				require.Contains(t, string(r.body), `"_errors":["strata: `, string(r.body))
				require.Contains(t, string(r.body), "token", string(r.body))
			} else {
				require.Equal(t, 401, r.status, "%s %s without a token", method, path)
			}
			require.NotEqual(t, []any{}, sec, "%s %s is documented as needing no token", method, path)
		}
	}
	require.Equal(t, 1, open)
}

// TestOpenAPIConformanceSkipsNothing: an exchange the conformance check cannot judge is a
// failure of the run, not a silent pass. An answer the test closes without reading is read
// to its end by the recorder and checked (the wrong document's integer kind is caught); a
// body sent to an operation that documents none is a mismatch; and an answer never closed,
// so never checked, is listed.
func TestOpenAPIConformanceSkipsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"acme"}}`)).status)

	var doc map[string]any
	require.NoError(t, json.Unmarshal(openAPIDoc(), &doc))
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	schemas["Object"].(map[string]any)["properties"].(map[string]any)["kind"] = map[string]any{"type": "integer"}
	delete(doc["paths"].(map[string]any)["/v1/orgs/{org}"].(map[string]any)["patch"].(map[string]any), "requestBody")
	wrongDoc, err := json.Marshal(doc)
	require.NoError(t, err)
	wrong, err := newConformance(wrongDoc)
	require.NoError(t, err)
	hc := &http.Client{Transport: &recordingTransport{base: http.DefaultTransport.(*recordingTransport).base, c: wrong}}
	send := func(method, path, body string) *http.Response {
		req, err := http.NewRequest(method, b.srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+b.admin)
		if body != "" {
			req.Header.Set("Content-Type", "application/merge-patch+json")
		}
		resp, err := hc.Do(req)
		require.NoError(t, err)
		return resp
	}
	// Closed unread.
	require.NoError(t, send("GET", "/v1/orgs/acme", "").Body.Close())
	// A body where the document lists none.
	resp := send("PATCH", "/v1/orgs/acme", `{"metadata":{"labels":{"a":"b"}}}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	// Never closed.
	open := send("GET", "/v1/orgs", "")
	t.Cleanup(func() { open.Body.Close() })

	report := wrong.report()
	require.Contains(t, report, "GET /v1/orgs/{org} 200 (application/json)", report)
	require.Contains(t, report, "PATCH /v1/orgs/{org} 200 took a body, which the document does not list", report)
	require.Contains(t, report, "GET /v1/orgs: the answer was never closed, so never checked", report)
}
