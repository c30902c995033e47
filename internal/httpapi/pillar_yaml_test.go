package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// apacheSLS spells what YAML 1.1 and Salt's loader read differently from YAML 1.2 and JSON:
// yes is true, 010 is 10, 1:30 is 90, 1e3 is a string, a quoted 'on' stays a string, and a
// merge key copies an anchored mapping.
const apacheSLS = `apache:
  enabled: yes
  workers: 010
  timeout: 1:30
  ratio: 1e3
  mode: 'on'
  base: &base {user: www, group: www}
  vhost:
    <<: *base
    port: 80
`

// TestPillarPutYAML (issue 29, finding 3): a pillar PUT takes Content-Type: application/yaml
// and reads it with the SLS loader, so the row equals what `pillar import` makes of the same
// file; its problems name the file (?file=) by line and column: a syntax error is a 400, what
// Salt's loader refuses a 422, an alias bomb a 413; a JSON syntax error names its line and
// column too. Seen failing before the fix (415-like 400 "Content-Type must be application/json").
func TestPillarPutYAML(t *testing.T) {
	t.Parallel()
	b := setup(t)
	yamlPut := func(path, body string) response {
		return b.do(t, "PUT", path, b.admin, strings.NewReader(body), "Content-Type", "application/yaml")
	}

	r := yamlPut("/v1/pillars/global/viaset?file=apache.sls", apacheSLS)
	require.Equal(t, 201, r.status, string(r.body))
	var set struct {
		Data json.RawMessage `json:"data"`
	}
	require.NoError(t, json.Unmarshal(r.body, &set))
	require.JSONEq(t, `{"apache":{"enabled":true,"workers":10,"timeout":90,"ratio":"1e3","mode":"on",
		"base":{"user":"www","group":"www"},"vhost":{"user":"www","group":"www","port":80}}}`, string(set.Data))

	// The same file through pillar import gives the same data.
	imp, err := json.Marshal(map[string]any{"files": map[string]string{"top.sls": "base:\n  '*':\n    - apache\n", "apache.sls": apacheSLS}})
	require.NoError(t, err)
	r = b.do(t, "POST", "/v1/pillars:import", b.admin, strings.NewReader(string(imp)))
	require.Equal(t, 200, r.status, string(r.body))
	r = b.do(t, "GET", "/v1/pillars/global/apache", b.admin, nil)
	require.Equal(t, 200, r.status, string(r.body))
	var imported struct {
		Data json.RawMessage `json:"data"`
	}
	require.NoError(t, json.Unmarshal(r.body, &imported))
	require.JSONEq(t, string(imported.Data), string(set.Data))

	// A syntax error: 400, file:line:column (PyYAML: line 2, column 8).
	p := problem(t, yamlPut("/v1/pillars/global/bad?file=bad.yaml", "a: 1\nb: c: d\n"), 400, "validation")
	require.Len(t, p.Errors, 1)
	require.Equal(t, "bad.yaml:2:5", p.Errors[0].Field)
	require.Contains(t, p.Errors[0].Message, "mapping values are not allowed")
	require.Contains(t, p.Detail, "bad.yaml")

	// What Salt reads as something a JSON key cannot be, Jinja, an include, a non-mapping:
	// 422 at the line and column of each.
	for _, c := range []struct{ body, field, reason string }{
		{"a:\n  yes: 1\n", "x.sls:2:3", "boolean True"},
		{"a: 1\nb: {{ grains.id }}\n", "x.sls:2:4", "Jinja"},
		{"include:\n  - common\na: 1\n", "x.sls:1:1", "strata pillar import"},
		{"- a\n- b\n", "x.sls:1:1", "not a mapping"},
		{"a: 1\na: 2\n", "x.sls:2:1", "appears twice"},
	} {
		p := problem(t, yamlPut("/v1/pillars/global/bad?file=x.sls", c.body), 422, "unprocessable")
		require.Len(t, p.Errors, 1, c.body)
		require.Equal(t, c.field, p.Errors[0].Field, c.body)
		require.Contains(t, p.Errors[0].Message, c.reason, c.body)
	}
	// Without ?file= the body is named "body".
	p = problem(t, yamlPut("/v1/pillars/global/bad", "a: [1\n"), 400, "validation")
	require.True(t, strings.HasPrefix(p.Errors[0].Field, "body:"), p.Errors[0].Field)
	problem(t, yamlPut("/v1/pillars/global/bad?file=a%0Ab", "a: 1\n"), 400, "validation")

	// The import's byte budget: aliases expanding past the 64 KiB body limit are a 413.
	p = problem(t, yamlPut("/v1/pillars/global/bomb?file=bomb.sls", aliasBombSLS(3)), 413, "too-large")
	require.Contains(t, p.Detail, "bomb.sls:")
	problem(t, b.do(t, "GET", "/v1/pillars/global/bomb", b.admin, nil), 404, "not-found")

	// JSON still works, and its syntax errors name file:line:column too.
	require.Equal(t, 201, b.do(t, "PUT", "/v1/pillars/global/j", b.admin, strings.NewReader(`{"a":1}`), "Content-Type", "application/json").status)
	p = problem(t, b.do(t, "PUT", "/v1/pillars/global/j?file=j.json", b.admin, strings.NewReader("{\n  \"a\": 1,\n  \"b\" 2\n}"), "Content-Type", "application/json"), 400, "validation")
	require.Equal(t, "j.json:3:7", p.Errors[0].Field, fmt.Sprint(p.Errors))
	problem(t, b.do(t, "PUT", "/v1/pillars/global/j", b.admin, strings.NewReader(`<a/>`), "Content-Type", "text/xml"), 400, "validation")
}
