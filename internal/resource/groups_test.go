package resource_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/resource"
)

// TestMembershipsAreGroupChanges: every way a static membership is added or removed — add,
// remove, the node's deletion, the node moving to another org, a bulk apply's "groups" —
// stamps the group MODIFIED with status.staticMembers, so a group watch sees it; a no-op
// (adding a member twice, an apply that changes nothing) stamps nothing, and a bulk batch of
// many nodes joining one group stamps it once. The group as read afterwards carries the last
// event's version and status.
func TestMembershipsAreGroupChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	for _, o := range []string{"acme", "other"} {
		_, err := b.svc.Create(ctx, org(o), api.Object{})
		require.NoError(t, err)
	}
	g, err := b.svc.Create(ctx, group("acme", "web"), api.Object{})
	require.NoError(t, err)
	require.JSONEq(t, `{"staticMembers": 0}`, string(g.Status), "a new group has no static members")
	for _, n := range []string{"n1", "n2", "n3"} {
		_, err := b.svc.Create(ctx, node(n), nodeObj("acme", nil))
		require.NoError(t, err)
	}
	h := startHub(t, b, nil)
	from, err := strconv.ParseInt(g.Metadata.ResourceVersion, 10, 64)
	require.NoError(t, err)
	sub, err := h.Subscribe(ctx, resource.KindGroup, "acme", from)
	require.NoError(t, err)
	defer sub.Close()
	next := func(step string) api.Object {
		t.Helper()
		nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		c, err := sub.Next(nctx)
		require.NoError(t, err, step)
		require.Equal(t, "MODIFIED", c.Type, step)
		require.Equal(t, "web", c.Name, step)
		return c.Object
	}
	members := func(o api.Object) int {
		t.Helper()
		var st struct {
			StaticMembers *int `json:"staticMembers"`
		}
		require.NoError(t, json.Unmarshal(o.Status, &st), string(o.Status))
		require.NotNil(t, st.StaticMembers, string(o.Status))
		return *st.StaticMembers
	}

	added, err := b.svc.AddMember(ctx, "acme", "web", "n1")
	require.NoError(t, err)
	require.True(t, added)
	require.Equal(t, 1, members(next("add n1")))
	added, err = b.svc.AddMember(ctx, "acme", "web", "n1")
	require.NoError(t, err)
	require.False(t, added, "adding twice is a no-op")
	_, err = b.svc.AddMember(ctx, "acme", "web", "n2")
	require.NoError(t, err)
	require.Equal(t, 2, members(next("add n2 (and nothing for the repeated n1)")))
	_, err = b.svc.RemoveMember(ctx, "acme", "web", "n1")
	require.NoError(t, err)
	require.Equal(t, 1, members(next("remove n1")))
	require.NoError(t, b.svc.Delete(ctx, node("n2"), "", false))
	require.Equal(t, 0, members(next("delete n2")))

	_, err = b.svc.AddMember(ctx, "acme", "web", "n3")
	require.NoError(t, err)
	require.Equal(t, 1, members(next("add n3")))
	_, err = b.svc.Patch(ctx, node("n3"), []byte(`{"spec":{"org":"other"}}`))
	require.NoError(t, err)
	require.Equal(t, 0, members(next("n3 moves to another org")))

	// A bulk apply: 50 new nodes in the group, one batch, one change of the group.
	var items []resource.ApplyItem
	for i := range 50 {
		items = append(items, resource.ApplyItem{Line: i + 1, Obj: api.Object{Metadata: api.ObjectMeta{Name: fmt.Sprintf("b%02d", i)},
			Spec: json.RawMessage(`{"org":"acme"}`)}, Groups: []string{"web"}, HasGroups: true})
	}
	for _, o := range b.svc.ApplyNodes(ctx, items) {
		require.NoError(t, o.Err)
	}
	last := next("bulk apply")
	require.Equal(t, 50, members(last))
	for _, o := range b.svc.ApplyNodes(ctx, items) {
		require.NoError(t, o.Err)
		require.Equal(t, "unchanged", o.Result)
	}
	nctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	c, err := sub.Next(nctx)
	cancel()
	require.Error(t, err, "applying the same inventory again stamps nothing, got %+v", c)

	got, err := b.svc.Get(ctx, group("acme", "web"))
	require.NoError(t, err)
	require.Equal(t, last.Metadata.ResourceVersion, got.Metadata.ResourceVersion)
	require.JSONEq(t, string(last.Status), string(got.Status))
	l, _, err := b.svc.List(ctx, resource.KindGroup, "acme", resource.ListOptions{Filter: auth.Filter{All: true}})
	require.NoError(t, err)
	require.JSONEq(t, string(last.Status), string(l.Items[0].Status))

	// A status sent with a write is the server's to set: ignored.
	p, err := b.svc.Patch(ctx, group("acme", "web"), []byte(`{"status":{"staticMembers":7},"spec":{"priority":3}}`))
	require.NoError(t, err)
	require.Equal(t, 50, members(p))
	r, err := b.svc.Create(ctx, group("acme", "db"), api.Object{Status: json.RawMessage(`{"staticMembers":9}`)})
	require.NoError(t, err)
	require.Equal(t, 0, members(r))
}

// TestConcurrentMembershipsCountRight: 16 writers add and remove static members of two groups
// at once (each also taking both groups in one transaction through bulk applies, in
// opposite orders), and none fails — the groups are stamped at the end of each transaction
// in one order, so they never deadlock — and afterwards each group's status, and its last
// change in the log, count exactly its members.
func TestConcurrentMembershipsCountRight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	_, err := b.svc.Create(ctx, org("acme"), api.Object{})
	require.NoError(t, err)
	for _, g := range []string{"a", "z"} {
		_, err := b.svc.Create(ctx, group("acme", g), api.Object{})
		require.NoError(t, err)
	}
	const writers, each = 16, 12
	var wg sync.WaitGroup
	errs := make(chan error, writers*each*2)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			groups := []string{"a", "z"}
			if w%2 == 1 {
				groups = []string{"z", "a"}
			}
			for i := range each {
				n := fmt.Sprintf("w%d-%d", w, i%4)
				switch i % 3 {
				case 0: // a batch of two nodes, both in both groups
					var items []resource.ApplyItem
					for j := range 2 {
						items = append(items, resource.ApplyItem{Line: j + 1, Obj: api.Object{Metadata: api.ObjectMeta{Name: fmt.Sprintf("%s-%d", n, j)},
							Spec: json.RawMessage(`{"org":"acme"}`)}, Groups: groups, HasGroups: true})
					}
					for _, o := range b.svc.ApplyNodes(ctx, items) {
						errs <- o.Err
					}
				case 1:
					_, err := b.svc.AddMember(ctx, "acme", groups[0], n+"-0")
					errs <- err
				default:
					_, err := b.svc.RemoveMember(ctx, "acme", groups[1], n+"-1")
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && err.Error() != "" {
			require.NotContains(t, err.Error(), "deadlock")
			// AddMember of a node a batch has not created yet is a 404, which is fine.
			require.Contains(t, err.Error(), "not found")
		}
	}
	for _, g := range []string{"a", "z"} {
		got, err := b.svc.Get(ctx, group("acme", g))
		require.NoError(t, err)
		ms, _, err := b.svc.Members(ctx, "acme", g, "", 1000)
		require.NoError(t, err)
		require.JSONEq(t, fmt.Sprintf(`{"staticMembers": %d}`, len(ms.Items)), string(got.Status), "group %s", g)
		log := changesAfter(t, b.db, resource.KindGroup, 0)
		var lastStatus string
		for _, c := range log {
			if c.Name == g {
				lastStatus = strconv.FormatInt(c.RV, 10)
			}
		}
		require.Equal(t, got.Metadata.ResourceVersion, lastStatus, "group %s: its last change is its current version", g)
	}
}
