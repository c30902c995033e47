package resource_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/resource"
)

var moveQueries = db.MustParseQueries(fstest.MapFS{"move.sql": {Data: []byte(`
-- name: TestStaticGroupsOf
SELECT g.org || '/' || g.name FROM {{schema}}.group_members m JOIN {{schema}}.resources g ON g.id = m.group_id
JOIN {{schema}}.resources n ON n.id = m.node_id WHERE n.kind = 'Node' AND n.name = $1 ORDER BY 1;
`)}}, "move.sql")

// TestOrgMoveDropsMemberships (issue 30, item 7e): a node that moves to another org leaves
// its static memberships of its old org's groups in the moving write itself — by PATCH and by
// a bulk apply line — and each group it left is stamped in that transaction (a MODIFIED
// change with its new staticMembers, the group's version past the move's). Everything is
// read back directly as soon as the write returns: no event is waited for, so a broken move
// fails at once (before, only a 30 s wait for a group event caught it). Seen failing by hand
// with nodeAfterWrite doing nothing, and with it not stamping the groups it left.
func TestOrgMoveDropsMemberships(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	for _, o := range []string{"acme", "other"} {
		_, err := b.svc.Create(ctx, org(o), api.Object{})
		require.NoError(t, err)
	}
	for _, g := range []resource.Ref{group("acme", "web"), group("acme", "db"), group("other", "web")} {
		_, err := b.svc.Create(ctx, g, api.Object{})
		require.NoError(t, err)
	}
	for _, n := range []string{"n1", "n2", "stay"} {
		_, err := b.svc.Create(ctx, node(n), nodeObj("acme", nil))
		require.NoError(t, err)
		for _, g := range []string{"web", "db"} {
			_, err := b.svc.AddMember(ctx, "acme", g, n)
			require.NoError(t, err)
		}
	}
	staticGroups := func(n string) []string {
		t.Helper()
		rows, err := b.db.Query(ctx, moveQueries.Get("TestStaticGroupsOf"), n)
		require.NoError(t, err)
		defer rows.Close()
		out := []string{}
		for rows.Next() {
			var g string
			require.NoError(t, rows.Scan(&g))
			out = append(out, g)
		}
		require.NoError(t, rows.Err())
		return out
	}
	rvOf := func(o api.Object) int64 {
		t.Helper()
		rv, err := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
		require.NoError(t, err)
		return rv
	}
	staticMembers := func(o api.Object) int {
		t.Helper()
		var st struct {
			StaticMembers *int `json:"staticMembers"`
		}
		require.NoError(t, json.Unmarshal(o.Status, &st), string(o.Status))
		require.NotNil(t, st.StaticMembers, string(o.Status))
		return *st.StaticMembers
	}
	// left checks, right after a move of n that returned version moved, that n is in no
	// group of acme and that each acme group was stamped with members left.
	left := func(step, n string, moved int64, members int) {
		t.Helper()
		require.Empty(t, staticGroups(n), "%s: %s keeps no membership of its old org's groups", step, n)
		for _, g := range []string{"web", "db"} {
			got, err := b.svc.Get(ctx, group("acme", g))
			require.NoError(t, err)
			require.Equal(t, members, staticMembers(got), "%s: acme/%s's status counts what is left", step, g)
			require.Greater(t, rvOf(got), moved, "%s: acme/%s is stamped by the move", step, g)
			cs := changesOf(t, b.db, resource.KindGroup, "acme", g)
			last := cs[len(cs)-1]
			require.Equal(t, "MODIFIED", last.Type, step)
			require.Equal(t, rvOf(got), last.RV, "%s: the group's last change is the stamp", step)
			require.Equal(t, members, staticMembers(last.Object), "%s: the change carries the new count", step)
		}
	}

	moved, err := b.svc.Patch(ctx, node("n1"), []byte(`{"spec":{"org":"other"}}`))
	require.NoError(t, err)
	left("patch", "n1", rvOf(moved), 2)

	outs := b.svc.ApplyNodes(ctx, []resource.ApplyItem{{Line: 1, Obj: api.Object{Metadata: api.ObjectMeta{Name: "n2"},
		Spec: json.RawMessage(`{"org":"other"}`)}}})
	require.Len(t, outs, 1)
	require.NoError(t, outs[0].Err)
	require.Equal(t, "updated", outs[0].Result)
	n2, err := b.svc.Get(ctx, node("n2"))
	require.NoError(t, err)
	left("apply", "n2", rvOf(n2), 1)

	// The control: the node that stayed keeps its memberships, and a write that does not
	// move a node leaves them alone.
	require.Equal(t, []string{"acme/db", "acme/web"}, staticGroups("stay"))
	_, err = b.svc.Patch(ctx, node("stay"), []byte(`{"metadata":{"labels":{"x":"1"}}}`))
	require.NoError(t, err)
	require.Equal(t, []string{"acme/db", "acme/web"}, staticGroups("stay"))
	// Moving back restores nothing, and the moved nodes may join their new org's groups.
	_, err = b.svc.Patch(ctx, node("n1"), []byte(`{"spec":{"org":"acme"}}`))
	require.NoError(t, err)
	require.Empty(t, staticGroups("n1"))
	_, err = b.svc.AddMember(ctx, "other", "web", "n2")
	require.NoError(t, err)
	require.Equal(t, []string{"other/web"}, staticGroups("n2"))
}
