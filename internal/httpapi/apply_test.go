package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/httpapi"
)

// applyLineJSON renders one line of POST /v1/nodes:apply. groups nil leaves the "groups" key
// out (memberships untouched); an empty non-nil slice sends "groups": [].
func applyLineJSON(t *testing.T, name string, spec map[string]any, labels, annotations map[string]string, groups []string) string {
	t.Helper()
	meta := map[string]any{"name": name}
	if labels != nil {
		meta["labels"] = labels
	}
	if annotations != nil {
		meta["annotations"] = annotations
	}
	line := map[string]any{"metadata": meta, "spec": spec}
	if groups != nil {
		line["groups"] = groups
	}
	b, err := json.Marshal(line)
	require.NoError(t, err)
	return string(b)
}

// applyAnswer parses the NDJSON answer of a bulk apply: one result per line (each line at most
// once), then the summary, and nothing after it.
func applyAnswer(t *testing.T, r response) (map[int]api.ApplyResult, api.ApplySummary) {
	t.Helper()
	require.Equal(t, 200, r.status, string(r.body))
	require.Equal(t, "application/x-ndjson", r.header.Get("Content-Type"))
	results := map[int]api.ApplyResult{}
	var sum *api.ApplySummary
	dec := json.NewDecoder(bytes.NewReader(r.body))
	for {
		var line struct {
			api.ApplyResult
			Summary *api.ApplySummary `json:"summary"`
		}
		err := dec.Decode(&line)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		require.Nil(t, sum, "nothing follows the summary")
		if line.Summary != nil {
			sum = line.Summary
			continue
		}
		_, dup := results[line.Line]
		require.False(t, dup, "line %d is reported twice", line.Line)
		results[line.Line] = line.ApplyResult
	}
	require.NotNil(t, sum, "the answer ends with a summary")
	return results, *sum
}

// lineProblem checks that a line failed with the given status and problem type.
func lineProblem(t *testing.T, res map[int]api.ApplyResult, line, status int, typ string) api.Problem {
	t.Helper()
	r, ok := res[line]
	require.True(t, ok, "line %d has a result", line)
	require.Equal(t, "error", r.Result, "line %d: %+v", line, r)
	require.NotNil(t, r.Problem, "line %d", line)
	require.Equal(t, status, r.Problem.Status, "line %d: %+v", line, r.Problem)
	require.Equal(t, httpapi.ProblemTypeBase+typ, r.Problem.Type, "line %d", line)
	require.NotEmpty(t, r.Problem.Detail, "line %d", line)
	return *r.Problem
}

// nodeVersions lists every node and returns name → object, and the list's resourceVersion.
func nodeVersions(t *testing.T, c *client.Client) (map[string]api.Object, string) {
	t.Helper()
	all, err := c.Nodes().ListAll(context.Background(), client.ListOptions{})
	require.NoError(t, err)
	out := map[string]api.Object{}
	for _, o := range all.Items {
		out[o.Metadata.Name] = o
	}
	require.Len(t, out, len(all.Items))
	return out, all.ResourceVersion
}

// staticMembers returns the sorted static members of group in org.
func staticMembers(t *testing.T, c *client.Client, org, group string) []string {
	t.Helper()
	ms, err := c.Groups(org).Members(context.Background(), group)
	require.NoError(t, err)
	out := []string{}
	for _, m := range ms {
		require.False(t, m.Selected, "group %s has no selector", group)
		if m.Static {
			out = append(out, m.Node)
		}
	}
	sort.Strings(out)
	return out
}

// TestNodeApply applies an inventory of 1,200 lines (three batches of the server's 500, so
// the per-line fallback runs inside a batch and batches commit on their own) holding every
// kind of bad line among the good ones, then the same inventory again (nothing changes), then
// label and membership changes, and checks per-line authorization.
func TestNodeApply(t *testing.T) {
	t.Parallel()
	b := setup(t) // MaxBodyBytes 64 KiB: a line above that is refused on its own
	ctx := context.Background()
	c, err := client.New(b.srv.URL, b.admin, nil)
	require.NoError(t, err)
	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"acme"}}`)).status)
	for _, g := range []string{"web", "db"} {
		r := b.do(t, "POST", "/v1/orgs/acme/groups", b.admin, strings.NewReader(`{"metadata":{"name":"`+g+`"}}`))
		require.Equal(t, 201, r.status, string(r.body))
	}
	apply := func(token, body string) response {
		t.Helper()
		return b.do(t, "POST", "/v1/nodes:apply", token, strings.NewReader(body), "Content-Type", "application/x-ndjson")
	}

	const total = 1200
	acme := map[string]any{"org": "acme"}
	name := func(i int) string { return fmt.Sprintf("web-%04d", i) }
	labels := func(i int) map[string]string {
		env := "prod"
		if i%2 == 0 {
			env = "staging"
		}
		return map[string]string{"env": env, "rack": fmt.Sprint(i % 10), "example.com/line": fmt.Sprint(i)}
	}
	annotations := func(i int) map[string]string { return map[string]string{"note": fmt.Sprintf("line %d", i)} }
	groups := func(i int) []string {
		switch i % 3 {
		case 0:
			return []string{"web"}
		case 1:
			return []string{"db", "web"}
		}
		return nil // no "groups" key
	}
	huge := strings.Repeat("x", 70<<10)
	// The bad lines: batch 1 (lines 1-500) holds three that fail inside its transaction,
	// batch 2 one; lines that do not parse never reach a batch.
	bad := map[int]string{
		7:   applyLineJSON(t, name(7), acme, map[string]string{"Bad Key!": "x"}, nil, nil),
		499: applyLineJSON(t, name(499), map[string]any{}, labels(499), nil, nil),
		500: applyLineJSON(t, name(500), map[string]any{"org": "nope"}, labels(500), nil, nil),
		501: `{"metadata":{"name":"` + name(501) + `","labels":{"env":"prod"}},"spec":{"org":"acme"`,
		502: "",
		777: applyLineJSON(t, name(777), acme, labels(777), nil, []string{"web", "ghost"}),
		900: applyLineJSON(t, name(900), acme, labels(900), map[string]string{"huge": huge}, nil),
		// The last line is too long too, and has no newline after it.
		total: applyLineJSON(t, name(total), acme, labels(total), map[string]string{"huge": huge}, nil),
	}
	lines := make([]string, 0, total)
	good := map[string]int{} // node name → line
	for i := 1; i <= total; i++ {
		if l, ok := bad[i]; ok {
			lines = append(lines, l)
			continue
		}
		lines = append(lines, applyLineJSON(t, name(i), acme, labels(i), annotations(i), groups(i)))
		good[name(i)] = i
	}
	body := strings.Join(lines, "\n")
	require.Greater(t, len(body), 256<<10, "the body is larger than what net/http discards on its own after a handler starts answering")

	checkFirst := func(res map[int]api.ApplyResult, sum api.ApplySummary, want string) {
		t.Helper()
		require.Equal(t, api.ApplySummary{Lines: total - 1, Created: map[string]int{"created": len(good)}[want],
			Unchanged: map[string]int{"unchanged": len(good)}[want], Errors: len(bad) - 1}, sum)
		require.Len(t, res, total-1, "one result for every line but the empty one")
		_, ok := res[502]
		require.False(t, ok, "an empty line has no result")
		for n, i := range good {
			require.Equal(t, api.ApplyResult{Line: i, Name: n, Result: want}, res[i], "line %d", i)
		}
		p := lineProblem(t, res, 7, 422, "unprocessable")
		require.Equal(t, name(7), res[7].Name)
		require.Equal(t, "/metadata/labels/Bad Key!", p.Errors[0].Field, "the problem names the key")
		p = lineProblem(t, res, 499, 422, "unprocessable")
		require.Equal(t, "/spec/org", p.Errors[0].Field)
		p = lineProblem(t, res, 500, 422, "unprocessable")
		require.Equal(t, "/spec/org", p.Errors[0].Field)
		require.Contains(t, p.Errors[0].Message, `"nope"`)
		lineProblem(t, res, 501, 400, "validation")
		p = lineProblem(t, res, 777, 422, "unprocessable")
		require.Equal(t, name(777), res[777].Name)
		require.Equal(t, "/groups", p.Errors[0].Field)
		require.Contains(t, p.Errors[0].Message, "ghost")
		lineProblem(t, res, 900, 413, "too-large")
		lineProblem(t, res, total, 413, "too-large")
	}
	res, sum := applyAnswer(t, apply(b.admin, body))
	checkFirst(res, sum, "created")

	// Every good line's node exists as given; no bad line left a node behind.
	nodes, rv := nodeVersions(t, c)
	require.Len(t, nodes, len(good))
	for n, i := range good {
		o, ok := nodes[n]
		require.True(t, ok, "node %s of line %d exists", n, i)
		require.Equal(t, labels(i), o.Metadata.Labels, n)
		require.Equal(t, annotations(i), o.Metadata.Annotations, n)
		require.Equal(t, "acme", nodeOrgOf(t, o), n)
	}
	var wantWeb, wantDB []string
	for n, i := range good {
		for _, g := range groups(i) {
			if g == "web" {
				wantWeb = append(wantWeb, n)
			} else {
				wantDB = append(wantDB, n)
			}
		}
	}
	sort.Strings(wantWeb)
	sort.Strings(wantDB)
	require.Equal(t, wantWeb, staticMembers(t, c, "acme", "web"))
	require.Equal(t, wantDB, staticMembers(t, c, "acme", "db"))

	// The same inventory again: every good line is unchanged, and nothing was written (no
	// node has a new resourceVersion, and no change was recorded at all).
	res, sum = applyAnswer(t, apply(b.admin, body))
	checkFirst(res, sum, "unchanged")
	again, rv2 := nodeVersions(t, c)
	require.Equal(t, rv, rv2, "applying the same inventory records no change")
	require.Len(t, again, len(nodes))
	for n, o := range nodes {
		require.Equal(t, o.Metadata.ResourceVersion, again[n].Metadata.ResourceVersion, n)
		g, err := c.Nodes().Get(ctx, n)
		require.NoError(t, err)
		require.Equal(t, o.Metadata.ResourceVersion, g.Metadata.ResourceVersion, n)
		if good[n] > 30 {
			break // GET a sample; the list covered every node
		}
	}
	require.Equal(t, wantWeb, staticMembers(t, c, "acme", "web"))
	require.Equal(t, wantDB, staticMembers(t, c, "acme", "db"))

	// Changes: labels (web-0001), the groups list (web-0003: web → db), "groups": [] clears
	// (web-0004: db, web → none); "groups": [] on a node without memberships (web-0005) and a
	// line without "groups" (web-0006, a web member) change nothing.
	canary := map[string]string{"env": "canary"}
	change := strings.Join([]string{
		applyLineJSON(t, name(1), acme, canary, annotations(1), groups(1)),
		applyLineJSON(t, name(3), acme, labels(3), annotations(3), []string{"db"}),
		applyLineJSON(t, name(4), acme, labels(4), annotations(4), []string{}),
		applyLineJSON(t, name(5), acme, labels(5), annotations(5), []string{}),
		applyLineJSON(t, name(6), acme, labels(6), annotations(6), nil),
	}, "\n") + "\n"
	res, sum = applyAnswer(t, apply(b.admin, change))
	require.Equal(t, api.ApplySummary{Lines: 5, Updated: 3, Unchanged: 2}, sum)
	for line, want := range map[int]string{1: "updated", 2: "updated", 3: "updated", 4: "unchanged", 5: "unchanged"} {
		require.Equal(t, want, res[line].Result, "line %d: %+v", line, res[line])
	}
	o, err := c.Nodes().Get(ctx, name(1))
	require.NoError(t, err)
	require.Equal(t, canary, o.Metadata.Labels)
	require.NotEqual(t, nodes[name(1)].Metadata.ResourceVersion, o.Metadata.ResourceVersion)
	for _, i := range []int{5, 6} {
		o, err := c.Nodes().Get(ctx, name(i))
		require.NoError(t, err)
		require.Equal(t, nodes[name(i)].Metadata.ResourceVersion, o.Metadata.ResourceVersion, "unchanged line %d", i)
	}
	web, db := staticMembers(t, c, "acme", "web"), staticMembers(t, c, "acme", "db")
	require.NotContains(t, web, name(3))
	require.Contains(t, db, name(3))
	require.NotContains(t, web, name(4), `"groups": [] clears`)
	require.NotContains(t, db, name(4), `"groups": [] clears`)
	require.Contains(t, web, name(6), "a line without groups keeps the memberships")
	require.Contains(t, web, name(1))
	require.Contains(t, db, name(1))
	require.Len(t, web, len(wantWeb)-2)
	require.Len(t, db, len(wantDB))
	_, sum = applyAnswer(t, apply(b.admin, change))
	require.Equal(t, api.ApplySummary{Lines: 5, Unchanged: 5}, sum, "the changes, applied again, change nothing")

	// Authorization, line by line: nodes:write:web* may write web… nodes only (and place
	// them in acme with orgs:attach:acme), and a line with groups needs groups:write on the
	// node's org too.
	sys := auth.AuditActor{Actor: "test"}
	_, webOnly, err := b.tokens.Create(ctx, sys, auth.CreateParams{Name: "web-writer", Scopes: []string{"nodes:write:web*", "orgs:attach:acme"}})
	require.NoError(t, err)
	_, webGroups, err := b.tokens.Create(ctx, sys, auth.CreateParams{Name: "web-grouper", Scopes: []string{"nodes:write:web*", "orgs:attach:acme", "groups:write:acme"}})
	require.NoError(t, err)
	_, noNodes, err := b.tokens.Create(ctx, sys, auth.CreateParams{Name: "org-reader", Scopes: []string{"orgs:read:*", "groups:write:acme"}})
	require.NoError(t, err)
	authBody := strings.Join([]string{
		applyLineJSON(t, "web-auth-1", acme, nil, nil, nil),
		applyLineJSON(t, "db-auth-1", acme, nil, nil, nil),
		applyLineJSON(t, "web-auth-2", acme, nil, nil, []string{"web"}),
		applyLineJSON(t, name(10), acme, map[string]string{"env": "hijacked"}, nil, nil),
	}, "\n")
	res, sum = applyAnswer(t, apply(webOnly, authBody))
	require.Equal(t, api.ApplySummary{Lines: 4, Created: 1, Updated: 1, Errors: 2}, sum)
	require.Equal(t, "created", res[1].Result)
	require.Equal(t, "db-auth-1", res[2].Name)
	lineProblem(t, res, 2, 403, "forbidden")
	require.Equal(t, "web-auth-2", res[3].Name)
	lineProblem(t, res, 3, 403, "forbidden")
	require.Equal(t, "updated", res[4].Result, "web-0010 is in the token's scope")
	problem(t, b.do(t, "GET", "/v1/nodes/db-auth-1", b.admin, nil), 404, "not-found")
	problem(t, b.do(t, "GET", "/v1/nodes/web-auth-2", b.admin, nil), 404, "not-found")

	res, sum = applyAnswer(t, apply(webGroups, authBody))
	require.Equal(t, api.ApplySummary{Lines: 4, Created: 1, Unchanged: 2, Errors: 1}, sum)
	lineProblem(t, res, 2, 403, "forbidden")
	require.Equal(t, "created", res[3].Result, "with groups:write:acme the line with groups passes")
	require.Contains(t, staticMembers(t, c, "acme", "web"), "web-auth-2")

	// No nodes scope at all: the request as a whole is refused, and nothing is applied.
	problem(t, apply(noNodes, applyLineJSON(t, "web-auth-3", acme, nil, nil, nil)), 403, "forbidden")
	problem(t, b.do(t, "GET", "/v1/nodes/web-auth-3", b.admin, nil), 404, "not-found")
}

// nodeOrgOf returns a node's spec.org.
func nodeOrgOf(t *testing.T, o api.Object) string {
	t.Helper()
	var s struct {
		Org string `json:"org"`
	}
	require.NoError(t, json.Unmarshal(o.Spec, &s))
	return s.Org
}
