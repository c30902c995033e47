package pillar_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/pillar/merge"
	"github.com/stratahq/strata/internal/pillar/sls"
	"github.com/stratahq/strata/internal/resource"
)

// tricky are strings YAML would misread if written carelessly: booleans and nulls of YAML
// 1.1, numbers in forms PyYAML reads as strings or numbers, Jinja, comments, line breaks YAML
// folds, characters PyYAML refuses unescaped, and keys Salt treats specially.
var tricky = []string{"yes", "No", "off", "~", "null", "1e3", "0x1F", "010", "1:30", "1_000", ".inf",
	"{{ grains.id }}", "{% if %}", "# not a comment", "a: b", "- item", "<<", "=", "tab\there",
	"line\nbreak", "nel\u0085x", "ls\u2028x", "del\x7fx", "bell\x07", "é ü 漢字 🙂", "", " lead", "trail ",
	`back\slash "quoted"`, "!!python/object", "*alias", "&anchor", "@at", "%percent", "`tick`"}

// genValue builds a random pillar value of depth at most d.
func genValue(r *rand.Rand, d int) any {
	switch n := r.IntN(10); {
	case d == 0 || n < 3:
		switch r.IntN(7) {
		case 0:
			return tricky[r.IntN(len(tricky))]
		case 1:
			return json.Number(fmt.Sprint(r.Int64N(1<<62) - 1<<61))
		case 2:
			return json.Number(fmt.Sprintf("%d.%d", r.IntN(1000), 1+r.IntN(99)))
		case 3:
			return r.IntN(2) == 0
		case 4:
			return nil
		case 5:
			return json.Number("123456789012345678901234567890") // beyond int64: Salt keeps Python ints exact
		default:
			return fmt.Sprintf("s%d", r.IntN(1000))
		}
	case n < 6:
		l := make([]any, r.IntN(4))
		for i := range l {
			l[i] = genValue(r, d-1)
		}
		return l
	default:
		return genMap(r, d-1)
	}
}

func genMap(r *rand.Rand, d int) map[string]any {
	m := map[string]any{}
	for range r.IntN(5) {
		k := fmt.Sprintf("k%d", r.IntN(6))
		if r.IntN(4) == 0 {
			k = tricky[r.IntN(len(tricky))]
		}
		m[k] = genValue(r, d)
	}
	return m
}

// rowsOf returns every pillar row of the database as "target category data" lines, sorted:
// two databases hold the same rows when these are equal. Numbers are compared by value: a
// decimal's trailing zeros (176.50) do not survive Salt's YAML, which reads a float, and
// jsonb compares them equal too.
func rowsOf(t *testing.T, b *bundle) []string {
	t.Helper()
	rows, err := b.db.Query(context.Background(), sqlQ(`
		SELECT CASE WHEN r.kind = 'Group' THEN 'group/' || r.org || '/' || r.name WHEN r.kind = 'Org' THEN 'org/' || r.name
		            WHEN r.kind = 'Node' THEN 'node/' || r.name || ' in ' || (r.spec ->> 'org') ELSE 'global' END,
		       p.category, p.data::text
		FROM strata.pillars p LEFT JOIN strata.resources r ON r.id = p.resource_id`))
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var tg, c, d string
		require.NoError(t, rows.Scan(&tg, &c, &d))
		dec := json.NewDecoder(strings.NewReader(d))
		dec.UseNumber()
		var v any
		require.NoError(t, dec.Decode(&v))
		canon, err := json.Marshal(numbersByValue(v))
		require.NoError(t, err)
		out = append(out, tg+" "+c+" "+string(canon))
	}
	require.NoError(t, rows.Err())
	sort.Strings(out)
	return out
}

// dumpForSalt writes the export and strata's render of every node under
// $STRATA_EXPORT_DUMP (when set), for the check against real Salt 3006 by hand that
// docs/salt.md ("Exporting") records: salt-call --local pillar.items per minion id, with the
// tree as pillar_roots and nodegroups.conf in the minion's configuration.
func dumpForSalt(t *testing.T, b *bundle, e pillar.Export, nodes []string) {
	dir := os.Getenv("STRATA_EXPORT_DUMP")
	if dir == "" {
		return
	}
	for rel, content := range e.Files {
		p := filepath.Join(dir, "tree", filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	want := map[string]json.RawMessage{}
	for _, n := range nodes {
		r, err := b.svc.Render(context.Background(), b.res, n, false)
		require.NoError(t, err)
		want[n] = r.JSON
	}
	out, err := json.MarshalIndent(want, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "want.json"), out, 0o644))
}

// numbersByValue spells every decimal without trailing zeros.
func numbersByValue(v any) any {
	switch t := v.(type) {
	case json.Number:
		s := t.String()
		if strings.Contains(s, ".") {
			s = strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
		}
		return json.Number(s)
	case []any:
		for i := range t {
			t[i] = numbersByValue(t[i])
		}
	case map[string]any:
		for k := range t {
			t[k] = numbersByValue(t[k])
		}
	}
	return v
}

// writeTree writes an export's files under a new directory.
func writeTree(t *testing.T, e pillar.Export) string {
	t.Helper()
	dir := t.TempDir()
	for rel, content := range e.Files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return dir
}

// saltRenders checks the export the way Salt reads it (package sls reproduces Salt's top
// file, SLS and YAML 1.1 rules, checked against real Salt in its own tests): for every node,
// the rows Salt would merge for that minion, folded with Salt's merge, are strata's render.
func saltRenders(t *testing.T, b *bundle, plan sls.Plan, nodes []string) {
	t.Helper()
	for _, n := range nodes {
		var layers []merge.Layer
		for _, row := range plan.SaltLayers(n) {
			layers = append(layers, merge.Layer{Target: row.Target.Kind + "/" + row.Target.Name, Category: row.Category, Data: row.Data})
		}
		salt, err := json.Marshal(merge.Merge(layers, merge.Options{}))
		require.NoError(t, err)
		r, err := b.svc.Render(context.Background(), b.res, n, false)
		require.NoError(t, err)
		require.JSONEq(t, string(r.JSON), string(salt), "Salt's pillar for %s differs from strata's", n)
	}
}

// TestExportRoundTrip (issue 19, item 3) on generated data: two orgs, nodes with labels, a
// static group, a selector group with a priority, rows at every target with random data full
// of what YAML misreads, categories Salt would misread as paths (a.b, init). The export
// renders in Salt, minion by minion, to strata's render; imported into an empty database it
// gives the same rows, groups and nodes; and exporting that database again gives the same
// files.
func TestExportRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := setup(t)
	r := rand.New(rand.NewPCG(19, 3))
	for _, org := range []string{"acme", "beta"} {
		a.mk(t, resource.Ref{Kind: resource.KindOrg, Name: org}, api.Object{})
	}
	var nodes []string
	for i := range 12 {
		org := []string{"acme", "beta"}[i%2]
		name := fmt.Sprintf("web%02d.%s.example.com", i, org)
		if i == 5 {
			name = "Init" // a minion id a careless export would write as init.sls
		}
		role := []string{"web", "db", "cache"}[i%3]
		a.mk(t, resource.Ref{Kind: resource.KindNode, Name: name}, node(org, map[string]string{"role": role}))
		nodes = append(nodes, name)
	}
	a.mk(t, resource.Ref{Kind: resource.KindGroup, Org: "acme", Name: "static"}, api.Object{Spec: json.RawMessage(`{"priority": 10}`)})
	for _, m := range []string{nodes[0], nodes[2]} {
		_, err := a.res.AddMember(ctx, "acme", "static", m)
		require.NoError(t, err)
	}
	a.mk(t, resource.Ref{Kind: resource.KindGroup, Org: "acme", Name: "webs"}, api.Object{Spec: json.RawMessage(`{"selector": "role in (web,cache)", "priority": 5}`)})
	a.mk(t, resource.Ref{Kind: resource.KindGroup, Org: "beta", Name: "dbs"}, api.Object{Spec: json.RawMessage(`{"selector": "role=db"}`)})
	a.mk(t, resource.Ref{Kind: resource.KindGroup, Org: "beta", Name: "empty"}, api.Object{})
	a.mk(t, resource.Ref{Kind: resource.KindOrg, Name: "lonely"}, api.Object{}) // no nodes: rows Salt gives no one
	targets := []pillar.Target{pillar.Global, {Kind: "org", Org: "acme"}, {Kind: "org", Org: "beta"}, {Kind: "org", Org: "lonely"},
		{Kind: "group", Org: "acme", Group: "static"}, {Kind: "group", Org: "acme", Group: "webs"},
		{Kind: "group", Org: "beta", Group: "dbs"}, {Kind: "group", Org: "beta", Group: "empty"}}
	for _, n := range nodes {
		targets = append(targets, pillar.Target{Kind: "node", Node: n})
	}
	cats := []string{"app", "a.b", "init", "z-last", "0first", "db_conf"}
	for _, tg := range targets {
		for _, c := range cats {
			if r.IntN(3) == 0 {
				continue
			}
			_, _, err := a.svc.Put(ctx, tg, c, genMap(r, 4), "", "gen")
			require.NoError(t, err, "%s %s", tg, c)
		}
	}
	_, _, err := a.svc.Put(ctx, pillar.Global, "shared", map[string]any{"app": map[string]any{"port": json.Number("80"), "tls": false}}, "", "gen")
	require.NoError(t, err)
	_, _, err = a.svc.Put(ctx, pillar.Target{Kind: "node", Node: nodes[0]}, "shared", map[string]any{"app": map[string]any{"port": json.Number("8080")}}, "", "gen")
	require.NoError(t, err)

	e, err := a.svc.Export(ctx, pillar.ExportOptions{})
	require.NoError(t, err)
	require.Equal(t, len(rowsOf(t, a)), e.Rows)
	require.Contains(t, e.Files["top.sls"], "selects nodes by label (role in (web,cache))", "a selector group's nodegroup says it is a snapshot")
	dir := writeTree(t, e)
	plan, err := sls.Read(dir, sls.Options{Nodegroups: e.Nodegroups})
	require.NoError(t, err)
	require.Empty(t, plan.Unsupported)
	require.Len(t, plan.Rows, e.Rows)
	saltRenders(t, a, plan, nodes)
	dumpForSalt(t, a, e, nodes)

	// Into an empty database: the same rows, nodes in their orgs, groups as they were.
	b := setup(t)
	rep, err := b.svc.Import(ctx, b.res, plan, pillar.ImportOptions{}, "import")
	require.NoError(t, err)
	require.True(t, rep.Applied)
	require.Equal(t, rowsOf(t, a), rowsOf(t, b))
	webs, err := b.res.Get(ctx, resource.Ref{Kind: resource.KindGroup, Org: "acme", Name: "webs"})
	require.NoError(t, err)
	require.JSONEq(t, `{"selector":"role in (web,cache)","priority":5}`, string(webs.Spec), "a selector group comes back as a selector group")
	members, _, err := b.res.Members(ctx, "acme", "webs", "", 100)
	require.NoError(t, err)
	require.Empty(t, members.Items, "its members at export time are not made static")
	members, _, err = b.res.Members(ctx, "acme", "static", "", 100)
	require.NoError(t, err)
	require.Len(t, members.Items, 2)
	// Exporting the imported database and importing that again is a fixed point: the same
	// tree (the first trip only drops decimals' trailing zeros).
	e2, err := b.svc.Export(ctx, pillar.ExportOptions{})
	require.NoError(t, err)
	plan2, err := sls.Read(writeTree(t, e2), sls.Options{Nodegroups: e2.Nodegroups})
	require.NoError(t, err)
	c := setup(t)
	_, err = c.svc.Import(ctx, c.res, plan2, pillar.ImportOptions{}, "import")
	require.NoError(t, err)
	e3, err := c.svc.Export(ctx, pillar.ExportOptions{})
	require.NoError(t, err)
	require.Equal(t, e2.Files, e3.Files, "export → import → export is a fixed point")

	// Importing the export again changes nothing; one org's export holds its rows and the
	// global ones.
	again, err := b.svc.Import(ctx, b.res, plan, pillar.ImportOptions{}, "import")
	require.NoError(t, err)
	for _, row := range again.Rows {
		require.Equal(t, "unchanged", row.Action, row)
	}
	beta, err := a.svc.Export(ctx, pillar.ExportOptions{Org: "beta"})
	require.NoError(t, err)
	for rel := range beta.Files {
		require.False(t, strings.HasPrefix(rel, "strata/org/acme") || strings.HasPrefix(rel, "strata/group/acme"), rel)
	}
	require.Contains(t, beta.Files["top.sls"], `"org/beta"`)
	_, err = a.svc.Export(ctx, pillar.ExportOptions{Org: "nope"})
	require.Error(t, err)
}

// TestExportRoundTripImportTree: the import test tree, imported, exported and imported into
// an empty database, gives the same rows; Salt renders the export as strata renders.
func TestExportRoundTripImportTree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := setup(t)
	a.mk(t, resource.Ref{Kind: resource.KindOrg, Name: "acme"}, api.Object{})
	plan, err := sls.Read("testdata/importtree", sls.Options{})
	require.NoError(t, err)
	_, err = a.svc.Import(ctx, a.res, plan, pillar.ImportOptions{Org: "acme"}, "importer")
	require.NoError(t, err)
	e, err := a.svc.Export(ctx, pillar.ExportOptions{Org: "acme"})
	require.NoError(t, err)
	back, err := sls.Read(writeTree(t, e), sls.Options{Nodegroups: e.Nodegroups})
	require.NoError(t, err)
	require.Empty(t, back.Unsupported)
	saltRenders(t, a, back, []string{"web01", "web02"})
	b := setup(t)
	_, err = b.svc.Import(ctx, b.res, back, pillar.ImportOptions{}, "import")
	require.NoError(t, err)
	require.Equal(t, rowsOf(t, a), rowsOf(t, b))
}
