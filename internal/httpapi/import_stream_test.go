package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// importLines splits an NDJSON answer into its decoded lines.
func importLines(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		out = append(out, m)
	}
	return out
}

// TestPillarImportStreamsResults: with Accept: application/x-ndjson a tree import answers one
// line per row as it is written, then a summary once committed; an error after the first row
// is an error line (nothing imported), and one before any row the usual problem answer.
func TestPillarImportStreamsResults(t *testing.T) {
	t.Parallel()
	b := setupState(t)
	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"acme"}}`)).status)
	body := `{"files":{"top.sls":"base:\n  '*':\n    - common\n  web01:\n    - web\n","common.sls":"a: yes\n","web/init.sls":"port: 80\n"}}`
	r := b.do(t, "POST", "/v1/pillars:import?org=acme", b.admin, strings.NewReader(body), "Accept", "application/x-ndjson")
	require.Equal(t, 200, r.status, string(r.body))
	require.Equal(t, "application/x-ndjson", r.header.Get("Content-Type"))
	lines := importLines(t, r.body)
	require.Len(t, lines, 3, string(r.body))
	require.Equal(t, map[string]any{"item": 1.0, "of": 2.0, "target": "global", "category": "common", "sources": []any{"common.sls"}, "match": "*", "action": "created"}, lines[0])
	require.Equal(t, 2.0, lines[1]["item"])
	require.Equal(t, "node/web01", lines[1]["target"])
	sum, ok := lines[2]["summary"].(map[string]any)
	require.True(t, ok, string(r.body))
	require.Equal(t, true, sum["applied"])
	require.Equal(t, []any{"web01"}, sum["createdNodes"])
	require.NotContains(t, sum, "rows", "the rows were streamed already")
	require.JSONEq(t, `{"a":true,"port":80}`, string(b.do(t, "GET", "/v1/nodes/web01/pillar", b.admin, nil).body))

	// Without the Accept header: the one JSON report, as before.
	r = b.do(t, "POST", "/v1/pillars:import?org=acme", b.admin, strings.NewReader(body))
	require.Equal(t, 200, r.status, string(r.body))
	require.Contains(t, r.header.Get("Content-Type"), "application/json")
	require.Contains(t, string(r.body), `"action":"unchanged"`)

	// A failure after the first row: an error line, and the transaction rolled back.
	bad := `{"files":{"top.sls":"base:\n  '*':\n    - other\n  db01:\n    - web\n","other.sls":"b: 1\n","web/init.sls":"port: 80\n"}}`
	r = b.do(t, "POST", "/v1/pillars:import?org=nosuch", b.admin, strings.NewReader(bad), "Accept", "application/x-ndjson")
	require.Equal(t, 200, r.status, string(r.body))
	lines = importLines(t, r.body)
	require.Len(t, lines, 2, string(r.body))
	require.Equal(t, "global", lines[0]["target"])
	prob, ok := lines[1]["error"].(map[string]any)
	require.True(t, ok, string(r.body))
	require.Equal(t, 422.0, prob["status"], string(r.body))
	require.Contains(t, string(r.body), `org \"nosuch\" does not exist`)
	problem(t, b.do(t, "GET", "/v1/pillars/global/other", b.admin, nil), 404, "not-found")

	// A failure before any row: the problem answer with its status.
	problem(t, b.do(t, "POST", "/v1/pillars:import?org=acme", b.admin, strings.NewReader(`{"files":{"../x.sls":"a: 1"}}`), "Accept", "application/x-ndjson"), 400, "validation")
}
