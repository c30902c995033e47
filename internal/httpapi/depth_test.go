package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stratahq/strata/api"
	"github.com/stretchr/testify/require"
)

// deepObject is levels nested objects, each the value of key "a" of the one above; the
// innermost is {"leaf": 1}, at pointer "/a" repeated levels-1 times.
func deepObject(levels int) string {
	return strings.Repeat(`{"a":`, levels-1) + `{"leaf":1}` + strings.Repeat("}", levels-1)
}

// deepYAML is the same value in YAML flow style.
func deepYAML(levels int) string {
	return strings.Repeat("{a: ", levels-1) + "{leaf: 1}" + strings.Repeat("}", levels-1) + "\n"
}

func deepPointer(levels int) string { return strings.Repeat("/a", levels-1) }

// TestDepthLimitOnEveryWritePath (issue 27, finding 7): pillar data, object specs and kind
// defaults nest at most 128 levels. 129 levels is a 422 naming the pointer of the level-129
// value on every write path (a Salt tree's, like its other problems, by file and line with the
// pointer in the reason); 128 levels is accepted.
func TestDepthLimitOnEveryWritePath(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"acme"}}`)).status)
	require.Equal(t, 201, b.do(t, "PUT", "/v1/kinds/Db", b.admin, strings.NewReader(`{"scope":"org","schema":{"type":"object","additionalProperties":true}}`)).status)

	type writePath struct {
		name string
		// do sends a value of the given depth (objects nested levels deep) and answers the
		// response, the pointer a refusal must name and whether the answer is a bulk line.
		do func(t *testing.T, levels int, n int) (r response, pointer string, bulk bool)
	}
	paths := []writePath{
		{"pillar PUT", func(t *testing.T, levels, n int) (response, string, bool) {
			return b.do(t, "PUT", fmt.Sprintf("/v1/orgs/acme/pillars/deep%d", n), b.admin, strings.NewReader(deepObject(levels))), deepPointer(levels), false
		}},
		{"pillar sync import (ndjson)", func(t *testing.T, levels, n int) (response, string, bool) {
			body := `{"type":"header","version":1}` + "\n" + fmt.Sprintf(`{"type":"row","target":"global","category":"sync%d","data":%s}`, n, deepObject(levels)) + "\n"
			return b.do(t, "POST", "/v1/pillars:import?format=ndjson", b.admin, strings.NewReader(body)), deepPointer(levels), false
		}},
		{"pillar sync import, dry run", func(t *testing.T, levels, n int) (response, string, bool) {
			body := `{"type":"header","version":1}` + "\n" + fmt.Sprintf(`{"type":"row","target":"global","category":"dry%d","data":%s}`, n, deepObject(levels)) + "\n"
			return b.do(t, "POST", "/v1/pillars:import?format=ndjson&dryRun=true", b.admin, strings.NewReader(body)), deepPointer(levels), false
		}},
		{"pillar sync import, history entry", func(t *testing.T, levels, n int) (response, string, bool) {
			body := `{"type":"header","version":1}` + "\n" + fmt.Sprintf(`{"type":"row","target":"global","category":"hist%d","data":{},"history":[{"revision":1,"old":null,"new":%s,"actor":"x","at":"2026-01-01T00:00:00Z"}]}`, n, deepObject(levels)) + "\n"
			return b.do(t, "POST", "/v1/pillars:import?format=ndjson", b.admin, strings.NewReader(body)), "/history/0/new" + deepPointer(levels), false
		}},
		{"Salt-tree import", func(t *testing.T, levels, n int) (response, string, bool) {
			body, err := json.Marshal(map[string]any{"files": map[string]string{"top.sls": "base:\n  '*':\n    - tree" + fmt.Sprint(n) + "\n", "tree" + fmt.Sprint(n) + ".sls": "k: " + deepYAML(levels-1)}})
			require.NoError(t, err)
			return b.do(t, "POST", "/v1/pillars:import", b.admin, strings.NewReader(string(body))), fmt.Sprintf("tree%d.sls:1", n), false
		}},
		{"Salt-tree import, dry run", func(t *testing.T, levels, n int) (response, string, bool) {
			body, err := json.Marshal(map[string]any{"files": map[string]string{"top.sls": "base:\n  '*':\n    - drytree" + fmt.Sprint(n) + "\n", "drytree" + fmt.Sprint(n) + ".sls": "k: " + deepYAML(levels-1)}})
			require.NoError(t, err)
			return b.do(t, "POST", "/v1/pillars:import?dryRun=true", b.admin, strings.NewReader(string(body))), fmt.Sprintf("drytree%d.sls:1", n), false
		}},
		{"object create", func(t *testing.T, levels, n int) (response, string, bool) {
			body := fmt.Sprintf(`{"metadata":{"name":"c%d"},"spec":%s}`, n, deepObject(levels))
			return b.do(t, "POST", "/v1/orgs/acme/resources/Db", b.admin, strings.NewReader(body)), "/spec" + deepPointer(levels), false
		}},
		{"object update (PUT)", func(t *testing.T, levels, n int) (response, string, bool) {
			name := fmt.Sprintf("u%d", n)
			require.Equal(t, 201, b.do(t, "POST", "/v1/orgs/acme/resources/Db", b.admin, strings.NewReader(`{"metadata":{"name":"`+name+`"}}`)).status)
			return b.do(t, "PUT", "/v1/orgs/acme/resources/Db/"+name, b.admin, strings.NewReader(`{"spec":`+deepObject(levels)+`}`)), "/spec" + deepPointer(levels), false
		}},
		{"object PATCH", func(t *testing.T, levels, n int) (response, string, bool) {
			name := fmt.Sprintf("p%d", n)
			require.Equal(t, 201, b.do(t, "POST", "/v1/orgs/acme/resources/Db", b.admin, strings.NewReader(`{"metadata":{"name":"`+name+`"}}`)).status)
			return b.do(t, "PATCH", "/v1/orgs/acme/resources/Db/"+name, b.admin, strings.NewReader(`{"spec":`+deepObject(levels)+`}`), "Content-Type", "application/merge-patch+json"), "/spec" + deepPointer(levels), false
		}},
		{"node apply (bulk NDJSON line)", func(t *testing.T, levels, n int) (response, string, bool) {
			line := fmt.Sprintf(`{"metadata":{"name":"deep%d"},"spec":{"org":"acme","a":%s}}`, n, deepObject(levels-1))
			return b.do(t, "POST", "/v1/nodes:apply", b.admin, strings.NewReader(line+"\n"), "Content-Type", "application/x-ndjson"), "/spec" + deepPointer(levels), true
		}},
		{"kind registration default", func(t *testing.T, levels, n int) (response, string, bool) {
			// The default sits three levels down the schema document ({properties: {x:
			// {default: …}}}): the document nests levels deep when the default nests levels-3.
			body := fmt.Sprintf(`{"scope":"org","schema":{"type":"object","properties":{"x":{"type":"object","x-preserve-unknown-fields":true,"default":%s}}}}`, deepObject(levels-3))
			return b.do(t, "PUT", fmt.Sprintf("/v1/kinds/K%d", n), b.admin, strings.NewReader(body)), "/schema/properties/x/default" + deepPointer(levels-3), false
		}},
	}
	for i, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			r, pointer, bulk := p.do(t, 129, 2*i)
			var prob api.Problem
			if bulk {
				res, _ := applyAnswer(t, r)
				prob = lineProblem(t, res, 1, 422, "unprocessable")
			} else {
				prob = problem(t, r, 422, "unprocessable")
			}
			require.NotEmpty(t, prob.Errors, "%s: %s", p.name, prob.Detail)
			require.Equal(t, pointer, prob.Errors[0].Field)
			require.Contains(t, prob.Errors[0].Message, "128")
			if strings.HasSuffix(pointer, ".sls:1") {
				// A tree's problems are named by file and line, the JSON pointer in the reason.
				require.Contains(t, prob.Errors[0].Message, `"/k`+deepPointer(128)+`"`)
			}

			r, _, bulk = p.do(t, 128, 2*i+1)
			if bulk {
				res, _ := applyAnswer(t, r)
				require.NotEqual(t, "error", res[1].Result, "%+v", res[1].Problem)
			} else {
				require.Less(t, r.status, 300, "128 levels are accepted: %s", r.body)
			}
		})
	}
}
