package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
)

// The HTTP tests of this package are the OpenAPI document's conformance suite: TestMain puts
// a recording transport under every client the tests use (http.DefaultClient and the Go
// client both go through http.DefaultTransport), and each request and answer is checked
// against the document the server serves. An answer must be one the matched operation
// documents (status, media type, body schema; a watch's or an apply's NDJSON line by line),
// a successful request's query parameters and body must be documented, and a request that
// matches no operation must have been refused (401, 404 or 405 problem). After the run,
// every mismatch is listed and the test binary fails, so the document cannot drift from the
// handlers: a handler that starts answering a status, a member or a parameter the document
// does not know fails the suite that exercises it.

// docURL is where the document lives for the schema compiler (never fetched).
const docURL = "https://strata.test/openapi.json"

func TestMain(m *testing.M) {
	c, err := newConformance(openAPIDoc())
	if err != nil {
		fmt.Fprintln(os.Stderr, "openapi conformance:", err)
		os.Exit(1)
	}
	base := http.DefaultTransport
	http.DefaultTransport = &recordingTransport{base: base, c: c}
	code := pgtest.Run(m)
	http.DefaultTransport = base
	if os.Getenv("STRATA_OPENAPI_COVERAGE") != "" {
		fmt.Fprint(os.Stderr, c.coverage())
	}
	if report := c.report(); report != "" {
		fmt.Fprint(os.Stderr, report)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// openAPIDoc is the document of a full API (every built-in kind's routes), as served.
func openAPIDoc() []byte {
	api := httpapi.New(httpapi.Options{Resources: resource.NewService(nil), Pillars: pillar.NewService(nil), Version: "test"})
	doc, err := api.OpenAPIDocument()
	if err != nil {
		panic(err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	return b
}

// conformance checks exchanges against one document.
type conformance struct {
	doc map[string]any
	mux *http.ServeMux

	mu       sync.Mutex
	compiler *jsonschema.Compiler
	schemas  map[string]*jsonschema.Schema
	failures map[string]*failure
	checked  int
	// used counts the exchanges of each operation ("GET /v1/orgs/{org}").
	used map[string]int
	// open holds the exchanges whose answer is not closed yet: one still open when the
	// report is made was never checked, and is listed as a failure.
	open map[*exchange]struct{}
}

type failure struct {
	count   int
	example string
}

func newConformance(raw []byte) (*conformance, error) {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	sdoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	comp := jsonschema.NewCompiler()
	if err := comp.AddResource(docURL, sdoc); err != nil {
		return nil, err
	}
	c := &conformance{doc: doc, mux: http.NewServeMux(), compiler: comp, schemas: map[string]*jsonschema.Schema{}, failures: map[string]*failure{}, used: map[string]int{}, open: map[*exchange]struct{}{}}
	for path, item := range doc["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			switch method {
			case "get", "put", "post", "delete", "patch":
				c.mux.Handle(strings.ToUpper(method)+" "+path, http.NotFoundHandler())
			case "x-strata-methods":
				for m, x := range item.(map[string]any)[method].(map[string]any) {
					x := x.(map[string]any)
					// LOCK /v1/state/{p}/{w} is served as POST …/lock: recorded under the twin.
					c.mux.Handle(m+" "+x["path"].(string), http.NotFoundHandler())
				}
			}
		}
	}
	return c, nil
}

// exchange is one recorded request and answer.
type exchange struct {
	method     string
	url        *url.URL
	reqHeader  http.Header
	reqBody    *capped
	status     int
	respHeader http.Header
	respBody   *capped
	complete   bool
	// length is the answer's Content-Length (-1: unknown, e.g. a stream).
	length int64
}

// capped keeps the first maxCapture bytes written to it.
type capped struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	truncated bool
}

const maxCapture = 8 << 20

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf.Len()+len(p) > maxCapture {
		c.truncated = true
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (c *capped) bytes() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes()), !c.truncated
}

type recordingTransport struct {
	base http.RoundTripper
	c    *conformance
}

func (t *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ex := &exchange{method: req.Method, url: req.URL, reqHeader: req.Header.Clone(), reqBody: &capped{}, respBody: &capped{}}
	if req.Body != nil && req.Body != http.NoBody {
		r2 := req.Clone(req.Context())
		r2.Body = &teeBody{r: io.TeeReader(req.Body, ex.reqBody), c: req.Body}
		req = r2
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	ex.status, ex.respHeader, ex.length = resp.StatusCode, resp.Header.Clone(), resp.ContentLength
	t.c.mu.Lock()
	t.c.open[ex] = struct{}{}
	t.c.mu.Unlock()
	resp.Body = &recBody{rc: resp.Body, ex: ex, c: t.c}
	return resp, nil
}

type teeBody struct {
	r io.Reader
	c io.Closer
}

func (b *teeBody) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b *teeBody) Close() error               { return b.c.Close() }

// recBody records an answer's body as the test reads it and checks the exchange on Close.
type recBody struct {
	rc   io.ReadCloser
	ex   *exchange
	c    *conformance
	eof  bool
	once sync.Once
}

func (b *recBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	_, _ = b.ex.respBody.Write(p[:n])
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// Close checks the exchange. An answer of known length the test did not read to its end
// (it read only the status, or decoded the first value) is read to its end first, so it is
// checked like any other; a stream of unknown length is checked as far as it was read.
func (b *recBody) Close() error {
	b.once.Do(func() {
		if !b.eof && b.ex.length >= 0 && b.ex.length <= maxCapture {
			_, _ = io.Copy(io.Discard, b)
		}
		b.ex.complete = b.eof
		b.c.mu.Lock()
		delete(b.c.open, b.ex)
		b.c.mu.Unlock()
		b.c.check(b.ex)
	})
	return b.rc.Close()
}

func (c *conformance) fail(key, example string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.failures[key]
	if f == nil {
		f = &failure{example: example}
		c.failures[key] = f
	}
	f.count++
}

// report lists the mismatches ("" when there are none), and the exchanges whose answer was
// never closed: those were never checked.
func (c *conformance) report() string {
	open := make([]*exchange, 0)
	c.mu.Lock()
	for ex := range c.open {
		open = append(open, ex)
	}
	c.mu.Unlock()
	for _, ex := range open {
		c.fail(fmt.Sprintf("%s %s: the answer was never closed, so never checked", ex.method, ex.url.Path), ex.method+" "+ex.url.RequestURI())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.failures) == 0 {
		return ""
	}
	keys := make([]string, 0, len(c.failures))
	for k := range c.failures {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "\nopenapi conformance: %d of the %d exchanges the tests made do not match the document (internal/httpapi/openapi.go):\n", sumCounts(c.failures), c.checked)
	for _, k := range keys {
		fmt.Fprintf(&b, "- %s (%d×; e.g. %s)\n", k, c.failures[k].count, c.failures[k].example)
	}
	return b.String()
}

// coverage lists the operations of the document no exchange of the run reached
// (STRATA_OPENAPI_COVERAGE=1 go test ./internal/httpapi prints it).
func (c *conformance) coverage() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var missing []string
	total := 0
	for path, item := range c.doc["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			if method == "x-strata-methods" {
				continue
			}
			total++
			if key := strings.ToUpper(method) + " " + path; c.used[key] == 0 {
				missing = append(missing, key)
			}
		}
	}
	sort.Strings(missing)
	return fmt.Sprintf("openapi coverage: %d of %d operations exercised; never: %s\n", total-len(missing), total, strings.Join(missing, ", "))
}

func sumCounts(m map[string]*failure) int {
	n := 0
	for _, f := range m {
		n += f.count
	}
	return n
}

// schema compiles (once) the schema at the document's JSON pointer ptr.
func (c *conformance) schema(ptr string) (*jsonschema.Schema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.schemas[ptr]; ok {
		return s, nil
	}
	s, err := c.compiler.Compile(docURL + "#" + ptr)
	if err != nil {
		return nil, err
	}
	c.schemas[ptr] = s
	return s, nil
}

// pointer joins JSON pointer tokens, escaped for a URI fragment.
func pointer(tokens ...string) string {
	var b strings.Builder
	for _, t := range tokens {
		t = strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
		b.WriteString("/" + url.PathEscape(t))
	}
	return b.String()
}

// resolve follows a local $ref of a response object; it returns the object and its pointer.
func (c *conformance) resolve(obj map[string]any, ptr string) (map[string]any, string) {
	ref, ok := obj["$ref"].(string)
	if !ok {
		return obj, ptr
	}
	var cur any = c.doc
	var toks []string
	for _, t := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		t = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
		toks = append(toks, t)
		cur = cur.(map[string]any)[t]
	}
	return cur.(map[string]any), pointer(toks...)
}

func mediaType(h string) string {
	mt, _, err := mime.ParseMediaType(h)
	if err != nil {
		return strings.TrimSpace(strings.ToLower(h))
	}
	return mt
}

// validate checks body against the schema at ptr: one JSON value, or NDJSON lines (whole
// lines only when the body was not read to its end).
func (c *conformance) validate(ptr, ct string, body []byte, complete, request bool) error {
	if ct != "application/x-ndjson" && ct != "application/json" && !strings.HasSuffix(ct, "+json") {
		return nil // text (metrics), YAML: no JSON to check
	}
	sch, err := c.schema(ptr)
	if err != nil {
		return fmt.Errorf("compile %s: %w", ptr, err)
	}
	if ct == "application/x-ndjson" {
		lines := bytes.Split(body, []byte("\n"))
		if !complete || len(lines[len(lines)-1]) > 0 {
			lines = lines[:len(lines)-1] // the last line may be cut short
		}
		for i, line := range lines {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
			if err != nil && request {
				continue // a stream's bad line is refused on its own, in the answer's lines
			}
			if err != nil {
				return fmt.Errorf("line %d is not JSON: %v", i+1, err)
			}
			if err := sch.Validate(v); err != nil {
				return fmt.Errorf("line %d: %v", i+1, err)
			}
		}
		return nil
	}
	if !complete {
		return nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	return sch.Validate(v)
}

func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}

// check compares one exchange with the document.
func (c *conformance) check(ex *exchange) {
	path := ex.url.Path
	if path == "/ui" || strings.HasPrefix(path, "/ui/") {
		return // the web console: HTML pages, not the API
	}
	c.mu.Lock()
	c.checked++
	c.mu.Unlock()
	example := ex.method + " " + ex.url.RequestURI()
	method := ex.method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	probe := &http.Request{Method: method, URL: ex.url, Host: "strata.test", Header: http.Header{}}
	_, pattern := c.mux.Handler(probe)
	body, whole := ex.respBody.bytes()
	complete := ex.complete && whole && ex.method != http.MethodHead
	ct := mediaType(ex.respHeader.Get("Content-Type"))
	if pattern == "" {
		switch ex.status {
		case 401, 404, 405:
			if ct != "application/problem+json" {
				c.fail(fmt.Sprintf("an unknown route answered %d as %q, not a problem", ex.status, ct), example)
				return
			}
			if err := c.validate(pointer("components", "schemas", "Problem"), ct, body, complete, false); err != nil {
				c.fail(fmt.Sprintf("an unknown route's %d problem: %s", ex.status, short(err.Error())), example)
			}
		case 301, 307, 308: // ServeMux's path cleaning
		default:
			c.fail(fmt.Sprintf("%s %s matches no operation of the document but answered %d", ex.method, path, ex.status), example)
		}
		return
	}
	m, p, _ := strings.Cut(pattern, " ")
	if m == "LOCK" || m == "UNLOCK" {
		m, p = map[string]string{"LOCK": "POST", "UNLOCK": "DELETE"}[m], p+"/lock"
	}
	opPtr := pointer("paths", p, strings.ToLower(m))
	op := c.doc["paths"].(map[string]any)[p].(map[string]any)[strings.ToLower(m)].(map[string]any)
	key := m + " " + p
	c.mu.Lock()
	c.used[key]++
	c.mu.Unlock()
	resps := op["responses"].(map[string]any)
	resp, ok := resps[fmt.Sprint(ex.status)].(map[string]any)
	if !ok {
		c.fail(fmt.Sprintf("%s answered %d, which the document does not list", key, ex.status), example)
		return
	}
	resp, respPtr := c.resolve(resp, opPtr+pointer("responses", fmt.Sprint(ex.status)))
	for h := range mapOf(resp["headers"]) {
		if ex.respHeader.Get(h) == "" {
			c.fail(fmt.Sprintf("%s %d came without the %s header the document lists", key, ex.status, h), example)
		}
	}
	content, _ := resp["content"].(map[string]any)
	switch {
	case content == nil:
		if len(body) > 0 && ex.method != http.MethodHead {
			c.fail(fmt.Sprintf("%s %d: the document lists no body, the answer had %d bytes", key, ex.status, len(body)), example)
		}
	case content[ct] == nil:
		c.fail(fmt.Sprintf("%s %d answered %q, which the document does not list", key, ex.status, ct), example)
	default:
		if err := c.validate(respPtr+pointer("content", ct, "schema"), ct, body, complete, false); err != nil {
			c.fail(fmt.Sprintf("%s %d (%s): %s", key, ex.status, ct, short(err.Error())), example)
		}
	}
	if ex.status >= 300 {
		return // the server refused the request: whatever it sent, the document need not allow
	}
	documented := map[string]bool{}
	params, _ := op["parameters"].([]any)
	for _, prm := range params {
		prm := prm.(map[string]any)
		if prm["in"] == "query" {
			documented[prm["name"].(string)] = true
		}
	}
	for q := range ex.url.Query() {
		if !documented[q] {
			c.fail(fmt.Sprintf("%s %d took query parameter %q, which the document does not list", key, ex.status, q), example)
		}
	}
	reqBody, whole := ex.reqBody.bytes()
	if len(bytes.TrimSpace(reqBody)) == 0 || !whole {
		return
	}
	rb, ok := op["requestBody"].(map[string]any)
	if !ok {
		c.fail(fmt.Sprintf("%s %d took a body, which the document does not list", key, ex.status), example)
		return
	}
	rct := mediaType(ex.reqHeader.Get("Content-Type"))
	rcontent := rb["content"].(map[string]any)
	if rcontent[rct] == nil && rct != "application/x-ndjson" {
		// JSON bodies may come as any …+json type, without a type, or as curl's default.
		for k := range rcontent {
			if k == "application/json" || strings.HasSuffix(k, "+json") || (rct == "" && len(rcontent) == 1) {
				rct = k
			}
		}
	}
	if rcontent["application/x-ndjson"] != nil && !json.Valid(reqBody) {
		rct = "application/x-ndjson" // a stream sent without its type (format=ndjson)
	}
	if rcontent[rct] == nil {
		c.fail(fmt.Sprintf("%s %d took a %q body, which the document does not list", key, ex.status, rct), example)
		return
	}
	if err := c.validate(opPtr+pointer("requestBody", "content", rct, "schema"), rct, reqBody, true, true); err != nil {
		c.fail(fmt.Sprintf("%s %d: its request body: %s", key, ex.status, short(err.Error())), example)
	}
}
