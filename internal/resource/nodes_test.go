package resource_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/metadata"
	"github.com/stratahq/strata/internal/resource"
)

func node(name string) resource.Ref { return resource.Ref{Kind: resource.KindNode, Name: name} }

func group(org, name string) resource.Ref {
	return resource.Ref{Kind: resource.KindGroup, Org: org, Name: name}
}

func nodeObj(org string, labels map[string]string) api.Object {
	return api.Object{Metadata: api.ObjectMeta{Labels: labels}, Spec: json.RawMessage(`{"org":"` + org + `"}`)}
}

// TestNodesNeedTheirOrg: spec.org is required and must name an existing org (422 naming
// /spec/org); node names are Salt minion ids, upper case and dots included.
func TestNodesNeedTheirOrg(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	_, err := b.svc.Create(ctx, org("acme"), api.Object{})
	require.NoError(t, err)

	n, err := b.svc.Create(ctx, node("Web01.example.com"), nodeObj("acme", map[string]string{"env": "prod"}))
	require.NoError(t, err)
	require.Equal(t, "Node", n.Kind)
	require.Equal(t, "acme", resource.NodeOrg(n))

	for _, c := range []struct {
		name, spec, field string
	}{
		{"a", `{}`, "/spec/org"},
		{"b", `{"org":""}`, "/spec/org"},
		{"c", `{"org":7}`, "/spec/org"},
		{"d", `{"org":"nope"}`, "/spec/org"},
	} {
		_, err := b.svc.Create(ctx, node(c.name), api.Object{Spec: json.RawMessage(c.spec)})
		var fe *fault.Error
		require.ErrorAs(t, err, &fe, c.spec)
		require.Equal(t, fault.KindUnprocessable, fe.Kind, c.spec)
		require.Equal(t, c.field, fe.Fields[0].Field, c.spec)
	}
	for _, bad := range []string{"has space", "slash/x", "..", string(make([]byte, 254))} {
		_, err := b.svc.Create(ctx, node(bad), nodeObj("acme", nil))
		require.Equal(t, fault.KindInvalid, fault.KindOf(err), "%q", bad)
	}
	// Moving to a missing org is refused and changes nothing.
	_, err = b.svc.Patch(ctx, node("Web01.example.com"), []byte(`{"spec":{"org":"nope"}}`))
	require.Equal(t, fault.KindUnprocessable, fault.KindOf(err))
	got, err := b.svc.Get(ctx, node("Web01.example.com"))
	require.NoError(t, err)
	require.Equal(t, n.Metadata.ResourceVersion, got.Metadata.ResourceVersion)
}

// TestGroupsAndMembers: groups live in an org, default priority 0, validate their selector;
// members are static ∪ selected, only nodes of the group's org may be static members, and a
// move to another org drops the old org's static memberships in the same transaction.
func TestGroupsAndMembers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	for _, o := range []string{"acme", "beta"} {
		_, err := b.svc.Create(ctx, org(o), api.Object{})
		require.NoError(t, err)
	}
	_, err := b.svc.Create(ctx, group("nope", "web"), api.Object{})
	require.Equal(t, fault.KindNotFound, fault.KindOf(err), "a group needs its org")

	g, err := b.svc.Create(ctx, group("acme", "web"), api.Object{Spec: json.RawMessage(`{"selector":"role=web, env in (prod)"}`)})
	require.NoError(t, err)
	require.JSONEq(t, `{"priority":0,"selector":"role=web, env in (prod)"}`, string(g.Spec))
	_, err = b.svc.Create(ctx, group("beta", "web"), api.Object{Spec: json.RawMessage(`{"priority":10}`)})
	require.NoError(t, err, "group names are per org")

	for spec, field := range map[string]string{
		`{"priority":1.5}`:     "/spec/priority",
		`{"priority":"high"}`:  "/spec/priority",
		`{"priority":1e20}`:    "/spec/priority",
		`{"selector":"a in"}`:  "/spec/selector",
		`{"selector":["a"]}`:   "/spec/selector",
		`{"selector":"a>1"}`:   "/spec/selector",
		`{"selector":"!!x=y"}`: "/spec/selector",
	} {
		_, err := b.svc.Create(ctx, group("acme", "bad"), api.Object{Spec: json.RawMessage(spec)})
		var fe *fault.Error
		require.ErrorAs(t, err, &fe, spec)
		require.Equal(t, fault.KindUnprocessable, fe.Kind, spec)
		require.Equal(t, field, fe.Fields[0].Field, spec)
	}

	mk := func(name, o string, labels map[string]string) {
		_, err := b.svc.Create(ctx, node(name), nodeObj(o, labels))
		require.NoError(t, err)
	}
	mk("n1", "acme", map[string]string{"role": "web", "env": "prod"}) // selected
	mk("n2", "acme", map[string]string{"role": "web", "env": "dev"})  // static only
	mk("n3", "acme", map[string]string{"role": "web", "env": "prod"}) // selected and static
	mk("n4", "beta", map[string]string{"role": "web", "env": "prod"}) // other org: never selected

	for _, n := range []string{"n2", "n3"} {
		added, err := b.svc.AddMember(ctx, "acme", "web", n)
		require.NoError(t, err)
		require.True(t, added)
	}
	added, err := b.svc.AddMember(ctx, "acme", "web", "n2")
	require.NoError(t, err)
	require.False(t, added, "adding again is idempotent")
	_, err = b.svc.AddMember(ctx, "acme", "web", "n4")
	require.Equal(t, fault.KindUnprocessable, fault.KindOf(err), "a node of another org")
	_, err = b.svc.AddMember(ctx, "acme", "web", "ghost")
	require.Equal(t, fault.KindNotFound, fault.KindOf(err))
	_, err = b.svc.AddMember(ctx, "acme", "ghost", "n1")
	require.Equal(t, fault.KindNotFound, fault.KindOf(err))

	members := func() []api.Member {
		t.Helper()
		var all []api.Member
		after := ""
		for {
			page, last, err := b.svc.Members(ctx, "acme", "web", after, 1)
			require.NoError(t, err)
			all = append(all, page.Items...)
			if last == "" {
				return all
			}
			after = last
		}
	}
	require.Equal(t, []api.Member{
		{Node: "n1", Selected: true},
		{Node: "n2", Static: true},
		{Node: "n3", Static: true, Selected: true},
	}, members())

	// n2 moves to beta: its static membership of acme/web goes in the same transaction.
	_, err = b.svc.Patch(ctx, node("n2"), []byte(`{"spec":{"org":"beta"}}`))
	require.NoError(t, err)
	require.Equal(t, []api.Member{{Node: "n1", Selected: true}, {Node: "n3", Static: true, Selected: true}}, members())

	removed, err := b.svc.RemoveMember(ctx, "acme", "web", "n3")
	require.NoError(t, err)
	require.True(t, removed)
	removed, err = b.svc.RemoveMember(ctx, "acme", "web", "n3")
	require.NoError(t, err)
	require.False(t, removed, "removing again is not an error")
	require.Equal(t, []api.Member{{Node: "n1", Selected: true}, {Node: "n3", Selected: true}}, members())

	// Deleting a node ends its memberships (cascade).
	_, err = b.svc.AddMember(ctx, "acme", "web", "n1")
	require.NoError(t, err)
	require.NoError(t, b.svc.Delete(ctx, node("n1"), "", false))
	require.Equal(t, []api.Member{{Node: "n3", Selected: true}}, members())
}

// TestOrgDeleteRefusedWhileItHasNodesOrGroups: 409 naming the counts, nothing deleted;
// with cascade the org, its groups, its nodes and their memberships go, each with a DELETED
// change, and other orgs' things stay.
func TestOrgDeleteRefusedWhileItHasNodesOrGroups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	for _, o := range []string{"acme", "beta"} {
		_, err := b.svc.Create(ctx, org(o), api.Object{})
		require.NoError(t, err)
		_, err = b.svc.Create(ctx, group(o, "web"), api.Object{})
		require.NoError(t, err)
		_, err = b.svc.Create(ctx, node(o+"-n1"), nodeObj(o, map[string]string{"a": "b"}))
		require.NoError(t, err)
		_, err = b.svc.AddMember(ctx, o, "web", o+"-n1")
		require.NoError(t, err)
	}
	err := b.svc.Delete(ctx, org("acme"), "", false)
	require.Equal(t, fault.KindConflict, fault.KindOf(err))
	require.Contains(t, err.Error(), "1 nodes and 1 groups")
	_, err = b.svc.Get(ctx, node("acme-n1"))
	require.NoError(t, err, "a refused delete deletes nothing")

	require.NoError(t, b.svc.Delete(ctx, org("acme"), "", true))
	for _, ref := range []resource.Ref{org("acme"), node("acme-n1"), group("acme", "web")} {
		_, err := b.svc.Get(ctx, ref)
		require.Equal(t, fault.KindNotFound, fault.KindOf(err), ref)
	}
	for _, ref := range []resource.Ref{org("beta"), node("beta-n1"), group("beta", "web")} {
		_, err := b.svc.Get(ctx, ref)
		require.NoError(t, err, ref)
	}
	var deleted []string
	rows, err := b.db.Query(ctx, &db.Query{Name: "deleted", Text: `SELECT kind || ':' || name FROM strata.changes WHERE type = 'DELETED' ORDER BY resource_version`})
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		deleted = append(deleted, s)
	}
	rows.Close()
	require.Equal(t, []string{"Group:web", "Node:acme-n1", "Org:acme"}, deleted)
	var members int
	require.NoError(t, b.db.QueryRow(ctx, &db.Query{Name: "m", Text: `SELECT count(*) FROM strata.group_members`}).Scan(&members))
	require.Equal(t, 1, members, "only beta's membership is left")
}

// TestSelectorsAgreeWithKubernetes runs every selector of the golden file (what
// k8s.io/apimachinery answers for 257 selectors over 81 label sets) as a list query against
// PostgreSQL: the SQL must select exactly the label sets apimachinery matches. Each label
// set is a node's labels; a second org's copies must never leak into the first org's list.
func TestSelectorsAgreeWithKubernetes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	raw, err := os.ReadFile("../metadata/testdata/label-selectors-golden.json")
	require.NoError(t, err)
	var golden struct {
		LabelSets []map[string]string `json:"labelSets"`
		Selectors []struct {
			Selector string `json:"selector"`
			Valid    bool   `json:"valid"`
			Matches  []int  `json:"matches"`
			UsesGtLt bool   `json:"usesGtLt"`
		} `json:"selectors"`
	}
	require.NoError(t, json.Unmarshal(raw, &golden))
	_, err = b.svc.Create(ctx, org("acme"), api.Object{})
	require.NoError(t, err)
	for i, ls := range golden.LabelSets {
		_, err := b.svc.Create(ctx, group("acme", fmt.Sprintf("set-%02d", i)), api.Object{Metadata: api.ObjectMeta{Labels: ls}})
		require.NoError(t, err)
	}
	checked := 0
	walker := resource.NewService(b.db)
	walker.DriveLimit = 0 // every selector through the walking plan too
	for _, c := range golden.Selectors {
		sel, err := metadata.ParseSelector(c.Selector)
		if !c.Valid || c.UsesGtLt {
			require.Error(t, err, c.Selector)
			continue
		}
		require.NoError(t, err, c.Selector)
		list, _, err := b.svc.List(ctx, resource.KindGroup, "acme", resource.ListOptions{Filter: auth.Filter{All: true}, Selector: sel})
		require.NoError(t, err, c.Selector)
		want := []string{}
		for _, i := range c.Matches {
			want = append(want, fmt.Sprintf("set-%02d", i))
		}
		sort.Strings(want)
		require.Equal(t, want, names(list), "selector %q", c.Selector)
		walked, _, err := walker.List(ctx, resource.KindGroup, "acme", resource.ListOptions{Filter: auth.Filter{All: true}, Selector: sel})
		require.NoError(t, err, c.Selector)
		require.Equal(t, want, names(walked), "selector %q, walking plan", c.Selector)
		checked++
	}
	require.Greater(t, checked, 150)
}

// TestSelectorPagination: a selector list pages in name order through the matching objects
// only, and the pages put together are the whole match.
func TestSelectorPagination(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	_, err := b.svc.Create(ctx, org("acme"), api.Object{})
	require.NoError(t, err)
	var want []string
	for i := range 40 {
		env := []string{"prod", "dev", "test"}[i%3]
		name := fmt.Sprintf("n%02d", i)
		_, err := b.svc.Create(ctx, node(name), nodeObj("acme", map[string]string{"env": env}))
		require.NoError(t, err)
		if env != "dev" {
			want = append(want, name)
		}
	}
	sel, err := metadata.ParseSelector("env notin (dev)")
	require.NoError(t, err)
	var got []string
	after := ""
	for {
		page, last, err := b.svc.List(ctx, resource.KindNode, "", resource.ListOptions{Limit: 7, After: after, Filter: auth.Filter{All: true}, Selector: sel})
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Items), 7)
		got = append(got, names(page)...)
		if last == "" {
			break
		}
		after = last
	}
	require.Equal(t, want, got)
}

// TestPatchWritesOnlyChangedKeys: a PATCH of one label leaves the other label rows as they
// were (same physical row), deletes null keys idempotently and keeps caps exact.
func TestPatchWritesOnlyChangedKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	labels := map[string]string{}
	for i := range 50 {
		labels[fmt.Sprintf("k%02d", i)] = "v"
	}
	_, err := b.svc.Create(ctx, org("acme"), api.Object{Metadata: api.ObjectMeta{Labels: labels}})
	require.NoError(t, err)
	ctid := func(key string) string {
		var s string
		require.NoError(t, b.db.QueryRow(ctx, &db.Query{Name: "ctid", Text: `SELECT ctid::text FROM strata.labels WHERE key_name = $1`}, key).Scan(&s))
		return s
	}
	before := ctid("k01")
	_, err = b.svc.Patch(ctx, org("acme"), []byte(`{"metadata":{"labels":{"k00":"changed"}}}`))
	require.NoError(t, err)
	require.Equal(t, before, ctid("k01"), "an untouched key's row is not rewritten")

	// At the cap: adding one more is a 422; replacing one by another in one patch is fine.
	_, err = b.svc.Patch(ctx, org("acme"), []byte(`{"metadata":{"labels":{"extra":"x"}}}`))
	require.Equal(t, fault.KindUnprocessable, fault.KindOf(err))
	got, err := b.svc.Patch(ctx, org("acme"), []byte(`{"metadata":{"labels":{"k00":null,"extra":"x","gone":null}}}`))
	require.NoError(t, err)
	require.Len(t, got.Metadata.Labels, 50)
	require.Equal(t, "x", got.Metadata.Labels["extra"])
	var rows int
	require.NoError(t, b.db.QueryRow(ctx, &db.Query{Name: "n", Text: `SELECT count(*) FROM strata.labels`}).Scan(&rows))
	require.Equal(t, 50, rows)
}

// TestLabelCapUnderConcurrency: many concurrent PATCHes each adding 30 new labels to one
// object that has none: the cap of 50 holds whatever the interleaving (the row lock makes the
// count checked before the write the count at commit). Exactly one PATCH can succeed; every
// other is a 422, none a 5xx, and the stored rows are exactly the winner's keys.
// Control: with ResourceLockAndGet's FOR UPDATE removed, 3 runs of 3 let several PATCHes through.
func TestLabelCapUnderConcurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	_, err := b.svc.Create(ctx, org("acme"), api.Object{})
	require.NoError(t, err)
	const writers = 8
	// Open a connection per writer first, so that the writers really overlap (a pool that
	// still has to connect would let the first writer finish before the others start).
	var warm sync.WaitGroup
	for range writers {
		warm.Add(1)
		go func() {
			defer warm.Done()
			_, _ = b.db.Exec(ctx, &db.Query{Name: "warm", Text: `SELECT pg_sleep(0.1)`})
		}()
	}
	warm.Wait()
	errs := make([]error, writers)
	start := make(chan struct{})
	done := make(chan int)
	for w := range writers {
		go func() {
			labels := map[string]any{}
			for i := range 30 {
				labels[fmt.Sprintf("w%d-k%02d", w, i)] = "v"
			}
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
			<-start
			_, errs[w] = b.svc.Patch(ctx, org("acme"), patch)
			done <- w
		}()
	}
	close(start)
	for range writers {
		<-done
	}
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
			continue
		}
		require.Equal(t, fault.KindUnprocessable, fault.KindOf(err), "%v", err)
	}
	require.Equal(t, 1, ok, "exactly one PATCH of 30 labels fits under the cap of 50")
	var rows int
	require.NoError(t, b.db.QueryRow(ctx, &db.Query{Name: "n", Text: `SELECT count(*) FROM strata.labels`}).Scan(&rows))
	require.Equal(t, 30, rows)
}
