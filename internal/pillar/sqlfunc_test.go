package pillar_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/pillar/merge"
	"github.com/stratahq/strata/internal/resource"
)

// sqlQ wraps raw test SQL (the test database's schema is "strata").
func sqlQ(text string) *db.Query { return &db.Query{Name: "sqlfunc_test", Text: text} }

// nodePillarRows calls strata.node_pillars and returns its rows in order; a NULL row is nil.
func nodePillarRows(t *testing.T, d *db.DB, minion string) []map[string]any {
	t.Helper()
	rows, err := d.Query(context.Background(), sqlQ(`SELECT pillar FROM strata.node_pillars($1)`), minion)
	require.NoError(t, err)
	defer rows.Close()
	var out []map[string]any
	for rows.Next() {
		var raw []byte
		require.NoError(t, rows.Scan(&raw))
		if raw == nil {
			out = append(out, nil)
			continue
		}
		m, err := pillar.DecodeObject(raw)
		require.NoError(t, err)
		out = append(out, m)
	}
	require.NoError(t, rows.Err())
	return out
}

// fold merges the rows as Salt's postgres ext_pillar does (dictupdate.update per row, with
// as_list when list merging is on), which is merge.Merge.
func fold(rows []map[string]any, opts pillar.Options) map[string]any {
	layers := make([]pillar.Layer, len(rows))
	for i, r := range rows {
		layers[i] = pillar.Layer{Data: r}
	}
	return merge.Merge(layers, opts)
}

func groupObj(priority int, selector string) api.Object {
	spec := map[string]any{"priority": priority}
	if selector != "" {
		spec["selector"] = selector
	}
	b, _ := json.Marshal(spec)
	return api.Object{Spec: b}
}

// pillarWorld is generated data: orgs, groups with priorities (with ties), selectors and
// static members, nodes with labels, and rows on every target whose keys collide.
type pillarWorld struct {
	orgs   []string
	groups map[string][]string // org -> group names
	nodes  []string
}

// Group names whose byte order differs from en_US order ("a-c" < "ab" in C, not in en_US);
// categories likewise ('-' < '.' < '_' in C; en_US ignores the punctuation at first).
var (
	worldGroups     = []string{"a-c", "ab", "a1", "b", "z-0", "web"}
	worldCategories = []string{"a-b", "a.b", "a_b", "b", "0"}
	worldSelectors  = []string{"", "", "env=prod", "env in (dev,prod)", "tier!=web", "tier", "!gpu", "example.com/team=ops", "env notin (dev),tier", "env="}
)

func rowData(rng *rand.Rand, who string) map[string]any {
	m := map[string]any{
		"who":                         who,
		"k" + fmt.Sprint(rng.IntN(3)): who,
		"d": map[string]any{
			who:                           json.Number(fmt.Sprint(rng.IntN(100))),
			"x" + fmt.Sprint(rng.IntN(2)): []any{who, json.Number(fmt.Sprint(rng.IntN(3)))},
		},
		"l": []any{json.Number(fmt.Sprint(rng.IntN(4))), who},
	}
	if rng.IntN(5) == 0 {
		m["d"] = nil // null overrides
	}
	if rng.IntN(6) == 0 {
		m["d"] = map[string]any{} // an empty object changes nothing
	}
	return m
}

func buildWorld(t *testing.T, b *bundle, seed uint64) pillarWorld {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 9))
	w := pillarWorld{orgs: []string{"acme", "beta", "c-3"}, groups: map[string][]string{}}
	put := func(tg pillar.Target) {
		for _, c := range worldCategories {
			if rng.IntN(3) == 0 {
				continue
			}
			_, _, err := b.svc.Put(ctx, tg, c, rowData(rng, tg.String()+"#"+c), "", "test")
			require.NoError(t, err)
		}
	}
	put(pillar.Global)
	for _, org := range w.orgs {
		b.mk(t, resource.Ref{Kind: resource.KindOrg, Name: org}, api.Object{})
		put(pillar.Target{Kind: "org", Org: org})
		for _, g := range worldGroups {
			b.mk(t, resource.Ref{Kind: resource.KindGroup, Org: org, Name: g}, groupObj(rng.IntN(3)-1, worldSelectors[rng.IntN(len(worldSelectors))]))
			w.groups[org] = append(w.groups[org], g)
			put(pillar.Target{Kind: "group", Org: org, Group: g})
		}
		for i := range 8 {
			name := fmt.Sprintf("%s-n%d", org, i)
			labels := map[string]string{}
			if v := []string{"", "prod", "dev", ""}[rng.IntN(4)]; v != "" || rng.IntN(2) == 0 {
				labels["env"] = v
			}
			if v := []string{"web", "db"}[rng.IntN(2)]; rng.IntN(3) > 0 {
				labels["tier"] = v
			}
			if rng.IntN(4) == 0 {
				labels["gpu"] = "yes"
			}
			if rng.IntN(3) == 0 {
				labels["example.com/team"] = "ops"
			}
			b.mk(t, resource.Ref{Kind: resource.KindNode, Name: name}, node(org, labels))
			w.nodes = append(w.nodes, name)
			if rng.IntN(4) > 0 {
				put(pillar.Target{Kind: "node", Node: name})
			}
			for _, g := range worldGroups {
				if rng.IntN(4) == 0 {
					_, err := b.db.Exec(ctx, sqlQ(`INSERT INTO strata.group_members (group_id, node_id)
						SELECT g.id, n.id FROM strata.resources g, strata.resources n
						WHERE g.kind = 'Group' AND g.org = $1 AND g.name = $2 AND n.kind = 'Node' AND n.name = $3`), org, g, name)
					require.NoError(t, err)
				}
			}
		}
	}
	// A node of another org statically in a group of acme (only possible by writing the
	// table directly) must not get that group's rows, as in the render.
	_, err := b.db.Exec(ctx, sqlQ(`INSERT INTO strata.group_members (group_id, node_id)
		SELECT g.id, n.id FROM strata.resources g, strata.resources n
		WHERE g.kind = 'Group' AND g.org = 'acme' AND g.name = 'web' AND n.kind = 'Node' AND n.name = 'beta-n0'
		ON CONFLICT DO NOTHING`))
	require.NoError(t, err)
	return w
}

// checkAgainstRender: for every node, the function's rows are the render's layers, in order,
// and their fold (with and without list merging) is the rendered pillar.
func checkAgainstRender(t *testing.T, b *bundle, w pillarWorld) {
	t.Helper()
	ctx := context.Background()
	require.True(t, b.db.KeepsPlans(), "the test pool keeps plans")
	execURL := b.db.URL() + " default_query_exec_mode=exec" // key=value form (pgtest's)
	if strings.HasPrefix(execURL, "postgres://") || strings.HasPrefix(execURL, "postgresql://") {
		u, err := url.Parse(b.db.URL())
		require.NoError(t, err)
		qv := u.Query()
		qv.Set("default_query_exec_mode", "exec")
		u.RawQuery = qv.Encode()
		execURL = u.String()
	}
	execDB, err := db.Open(ctx, db.Options{URL: execURL, MaxConns: 2, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(execDB.Close)
	require.False(t, execDB.KeepsPlans())
	execSvc := pillar.NewService(execDB)
	for _, mergeLists := range []bool{false, true} {
		opts := pillar.Options{MergeLists: mergeLists}
		require.NoError(t, b.svc.SetOptions(ctx, opts, "test"))
		for _, n := range w.nodes {
			rows := nodePillarRows(t, b.db, n)
			obj, err := b.res.Get(ctx, resource.Ref{Kind: resource.KindNode, Name: n})
			require.NoError(t, err)
			layers, err := b.svc.Layers(ctx, pillar.NodeInfo{Name: n, Org: resource.NodeOrg(obj), Labels: obj.Metadata.Labels})
			require.NoError(t, err)
			require.Len(t, rows, len(layers), n)
			for i := range layers {
				require.NotNil(t, rows[i], "%s row %d", n, i)
				require.Equal(t, layers[i].Data, rows[i], "%s row %d (%s %s)", n, i, layers[i].Target, layers[i].Category)
			}
			r, err := b.svc.Render(ctx, b.res, n, false)
			require.NoError(t, err)
			require.Equal(t, r.Decoded(), fold(rows, opts), n)
			// A pool in exec mode (as behind a transaction-mode pooler) renders through the
			// function, this one (prepared) through renderDirect: the same answer.
			rx, err := execSvc.Render(ctx, b.res, n, false)
			require.NoError(t, err)
			require.Equal(t, string(r.JSON), string(rx.JSON), "%s: exec mode and prepared", n)
		}
	}
}

// TestNodePillarsEqualsRender: on generated data, strata.node_pillars returns exactly the
// render's layers in order, so Salt's fold of them is the HTTP render; also after selectors
// change, appear and disappear through the API.
func TestNodePillarsEqualsRender(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t)
			w := buildWorld(t, b, seed)
			checkAgainstRender(t, b, w)

			rng := rand.New(rand.NewPCG(seed, 10))
			for _, org := range w.orgs {
				for _, g := range w.groups[org] {
					if rng.IntN(2) == 0 {
						continue
					}
					_, err := b.res.Replace(ctx, resource.Ref{Kind: resource.KindGroup, Org: org, Name: g}, groupObj(rng.IntN(3)-1, worldSelectors[rng.IntN(len(worldSelectors))]))
					require.NoError(t, err)
				}
			}
			var pending int
			require.NoError(t, b.db.QueryRow(ctx, sqlQ(`SELECT count(*) FROM strata.group_selectors WHERE requirements IS NULL`)).Scan(&pending))
			require.Zero(t, pending, "API writes parse their selectors in the writing transaction")
			checkAgainstRender(t, b, w)
		})
	}
}

// TestNodePillarsUnknownMinion: no rows by default and with "empty"; one NULL row with
// "error"; a setting that is neither is a NULL row too.
func TestNodePillarsUnknownMinion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	_, _, err := b.svc.Put(ctx, pillar.Global, "common", obj(t, `{"a": 1}`), "", "x")
	require.NoError(t, err)
	mode, err := b.svc.UnknownMinion(ctx)
	require.NoError(t, err)
	require.Equal(t, pillar.UnknownEmpty, mode)
	require.Empty(t, nodePillarRows(t, b.db, "ghost"))

	require.NoError(t, b.svc.SetUnknownMinion(ctx, pillar.UnknownError, "x"))
	require.Equal(t, []map[string]any{nil}, nodePillarRows(t, b.db, "ghost"))

	require.NoError(t, b.svc.SetUnknownMinion(ctx, pillar.UnknownEmpty, "x"))
	require.Empty(t, nodePillarRows(t, b.db, "ghost"))
	require.Error(t, b.svc.SetUnknownMinion(ctx, "maybe", "x"))

	_, err = b.db.Exec(ctx, sqlQ(`UPDATE strata.settings SET value = '"maybe"' WHERE key = 'salt_unknown_minion'`))
	require.NoError(t, err)
	require.Equal(t, []map[string]any{nil}, nodePillarRows(t, b.db, "ghost"))

	// A known minion is unaffected by the setting.
	b.mk(t, resource.Ref{Kind: resource.KindOrg, Name: "acme"}, api.Object{})
	b.mk(t, resource.Ref{Kind: resource.KindNode, Name: "web01"}, node("acme", nil))
	require.Equal(t, []map[string]any{obj(t, `{"a": 1}`)}, nodePillarRows(t, b.db, "web01"))
}

// TestNodePillarsFailuresAreNullRows: a corrupt or pending selector gives the org's nodes one
// NULL row (never an SQL error, never a guess); SyncGroupSelectors parses what a write
// outside strata's Go code (the previous release during a rollout) left pending.
func TestNodePillarsFailuresAreNullRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.mk(t, resource.Ref{Kind: resource.KindOrg, Name: "acme"}, api.Object{})
	b.mk(t, resource.Ref{Kind: resource.KindOrg, Name: "beta"}, api.Object{})
	b.mk(t, resource.Ref{Kind: resource.KindGroup, Org: "acme", Name: "prod"}, groupObj(0, "env=prod"))
	b.mk(t, resource.Ref{Kind: resource.KindNode, Name: "web01"}, node("acme", map[string]string{"env": "prod"}))
	b.mk(t, resource.Ref{Kind: resource.KindNode, Name: "db01"}, node("beta", map[string]string{"env": "prod"}))
	_, _, err := b.svc.Put(ctx, pillar.Target{Kind: "group", Org: "acme", Group: "prod"}, "app", obj(t, `{"g": "prod"}`), "", "x")
	require.NoError(t, err)
	_, _, err = b.svc.Put(ctx, pillar.Target{Kind: "node", Node: "db01"}, "app", obj(t, `{"n": 1}`), "", "x")
	require.NoError(t, err)
	require.Equal(t, []map[string]any{obj(t, `{"g": "prod"}`)}, nodePillarRows(t, b.db, "web01"))

	// Corrupt: an operator the function does not know.
	_, err = b.db.Exec(ctx, sqlQ(`UPDATE strata.group_selectors SET requirements = '[{"key": "env", "op": "gt", "values": []}]'`))
	require.NoError(t, err)
	require.Equal(t, []map[string]any{nil}, nodePillarRows(t, b.db, "web01"))
	require.Equal(t, []map[string]any{obj(t, `{"n": 1}`)}, nodePillarRows(t, b.db, "db01"), "another org is unaffected")

	// Corrupt: requirements that are not what jsonb_array_elements can read (the CHECK
	// constraint keeps these out; a damaged database may still hold one).
	_, err = b.db.Exec(ctx, sqlQ(`ALTER TABLE strata.group_selectors DROP CONSTRAINT group_selectors_requirements_check`))
	require.NoError(t, err)
	_, err = b.db.Exec(ctx, sqlQ(`UPDATE strata.group_selectors SET requirements = '{"env": 1}'`))
	require.NoError(t, err)
	require.Equal(t, []map[string]any{nil}, nodePillarRows(t, b.db, "web01"))

	// A selector changed by a writer that does not parse it (as the previous release writes
	// groups during a staged rollout): the trigger marks it pending, the function refuses to
	// guess, and the sync parses it.
	_, err = b.db.Exec(ctx, sqlQ(`UPDATE strata.resources SET spec = jsonb_set(spec, '{selector}', '"env in (prod,dev),!gpu"') WHERE kind = 'Group' AND name = 'prod'`))
	require.NoError(t, err)
	var pending bool
	require.NoError(t, b.db.QueryRow(ctx, sqlQ(`SELECT requirements IS NULL FROM strata.group_selectors`)).Scan(&pending))
	require.True(t, pending)
	require.Equal(t, []map[string]any{nil}, nodePillarRows(t, b.db, "web01"))
	n, err := resource.SyncGroupSelectors(ctx, b.db)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []map[string]any{obj(t, `{"g": "prod"}`)}, nodePillarRows(t, b.db, "web01"))
	n, err = resource.SyncGroupSelectors(ctx, b.db)
	require.NoError(t, err)
	require.Zero(t, n)

	// The selector removed the same way: the trigger deletes the row; the group now has no
	// members by selector.
	_, err = b.db.Exec(ctx, sqlQ(`UPDATE strata.resources SET spec = spec - 'selector' WHERE kind = 'Group' AND name = 'prod'`))
	require.NoError(t, err)
	require.Empty(t, nodePillarRows(t, b.db, "web01"))

	// A table the function reads is gone from under it: still a NULL row, not an error.
	_, err = b.db.Exec(ctx, sqlQ(`ALTER TABLE strata.pillars RENAME TO pillars_moved`))
	require.NoError(t, err)
	require.Equal(t, []map[string]any{nil}, nodePillarRows(t, b.db, "db01"))
}

// TestNodePillarsExecuteOnly: a role with nothing but USAGE on the schema and EXECUTE on the
// function reads the rows (SECURITY DEFINER), and cannot read the tables themselves; a role
// without EXECUTE cannot call it (PUBLIC has no EXECUTE).
func TestNodePillarsExecuteOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.mk(t, resource.Ref{Kind: resource.KindOrg, Name: "acme"}, api.Object{})
	b.mk(t, resource.Ref{Kind: resource.KindGroup, Org: "acme", Name: "web"}, groupObj(0, "tier=web"))
	b.mk(t, resource.Ref{Kind: resource.KindNode, Name: "web01"}, node("acme", map[string]string{"tier": "web"}))
	for _, tg := range []pillar.Target{pillar.Global, {Kind: "org", Org: "acme"}, {Kind: "group", Org: "acme", Group: "web"}, {Kind: "node", Node: "web01"}} {
		_, _, err := b.svc.Put(ctx, tg, "app", obj(t, `{"by": "`+tg.String()+`"}`), "", "x")
		require.NoError(t, err)
	}
	want := nodePillarRows(t, b.db, "web01")
	require.Len(t, want, 4)

	suffix := strings.ReplaceAll(fmt.Sprint(rand.Uint64()), "-", "")
	salt, other := "salt_"+suffix, "nobody_"+suffix
	for _, stmt := range []string{
		`CREATE ROLE ` + salt, `CREATE ROLE ` + other,
		`GRANT USAGE ON SCHEMA strata TO ` + salt + `, ` + other,
		`GRANT EXECUTE ON FUNCTION strata.node_pillars(text) TO ` + salt,
	} {
		_, err := b.db.Exec(ctx, sqlQ(stmt))
		require.NoError(t, err, stmt)
	}
	t.Cleanup(func() {
		for _, r := range []string{salt, other} {
			_, _ = b.db.Exec(context.Background(), sqlQ(`DROP OWNED BY `+r))
			_, _ = b.db.Exec(context.Background(), sqlQ(`DROP ROLE `+r))
		}
	})
	asRole := func(role, query string) ([]map[string]any, error) {
		var out []map[string]any
		err := b.db.InTx(ctx, func(tx *db.Tx) error {
			if _, err := tx.Exec(ctx, sqlQ(`SET LOCAL ROLE `+role)); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, sqlQ(query), "web01")
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var raw []byte
				if err := rows.Scan(&raw); err != nil {
					return err
				}
				m, err := pillar.DecodeObject(raw)
				if err != nil {
					return err
				}
				out = append(out, m)
			}
			return rows.Err()
		})
		return out, err
	}
	got, err := asRole(salt, `SELECT pillar FROM strata.node_pillars($1)`)
	require.NoError(t, err)
	require.Equal(t, want, got)
	_, err = asRole(salt, `SELECT data FROM strata.pillars WHERE category = $1`)
	require.ErrorContains(t, err, "permission denied")
	_, err = asRole(other, `SELECT pillar FROM strata.node_pillars($1)`)
	require.ErrorContains(t, err, "permission denied")
}
