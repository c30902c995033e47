package resource_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/resource"
)

// TestAnnotationOnlyWritesAreWrites (issue 30, item 7d): a write that changes nothing but an
// annotation is a change — a PATCH, a PUT and a bulk apply line each store the annotation
// under a new, higher resourceVersion, and a watcher gets it as MODIFIED at that version —
// while the same write again is a no-op (same version). Only a write that changes nothing at
// all is dropped; dropping annotation-only ones was caught before only by a test waiting
// without a deadline for an event that never came. Every wait here is bounded. Seen failing
// by hand (at once, on the version) with sameObject ignoring annotations.
func TestAnnotationOnlyWritesAreWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	acme, err := b.svc.Create(ctx, org("acme"), api.Object{Metadata: api.ObjectMeta{
		Labels: map[string]string{"env": "prod"}, Annotations: map[string]string{"note": "one"}}})
	require.NoError(t, err)
	n1, err := b.svc.Create(ctx, node("n1"), api.Object{Metadata: api.ObjectMeta{Annotations: map[string]string{"note": "one"}},
		Spec: json.RawMessage(`{"org":"acme"}`)})
	require.NoError(t, err)
	h := startHub(t, b, nil)
	rvOf := func(o api.Object) int64 {
		t.Helper()
		rv, err := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
		require.NoError(t, err)
		return rv
	}
	orgs, err := h.Subscribe(ctx, resource.KindOrg, "", rvOf(acme))
	require.NoError(t, err)
	defer orgs.Close()
	nodes, err := h.Subscribe(ctx, resource.KindNode, "", rvOf(n1))
	require.NoError(t, err)
	defer nodes.Close()
	// changed checks that a write stored the annotation under a new version, that a read
	// sees it, and that the watcher gets that version (within 10 s, never a hang).
	changed := func(step string, sub *resource.Subscription, ref resource.Ref, before, after api.Object, note string) {
		t.Helper()
		require.Greater(t, rvOf(after), rvOf(before), "%s: an annotation-only write draws a new resourceVersion", step)
		require.Equal(t, note, after.Metadata.Annotations["note"], step)
		got, err := b.svc.Get(ctx, ref)
		require.NoError(t, err)
		require.Equal(t, after.Metadata.ResourceVersion, got.Metadata.ResourceVersion, step)
		require.Equal(t, note, got.Metadata.Annotations["note"], step)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		c, err := sub.Next(wctx)
		require.NoError(t, err, "%s: no change event within 10 s", step)
		require.Equal(t, "MODIFIED", c.Type, step)
		require.Equal(t, rvOf(after), c.RV, step)
		require.Equal(t, note, c.Object.Metadata.Annotations["note"], step)
	}

	patched, err := b.svc.Patch(ctx, org("acme"), []byte(`{"metadata":{"annotations":{"note":"two"}}}`))
	require.NoError(t, err)
	changed("patch", orgs, org("acme"), acme, patched, "two")

	repl := patched
	repl.Metadata.ResourceVersion = ""
	repl.Metadata.Annotations = map[string]string{"note": "three"}
	replaced, err := b.svc.Replace(ctx, org("acme"), repl)
	require.NoError(t, err)
	changed("replace", orgs, org("acme"), patched, replaced, "three")

	// The control: the same patch again changes nothing and keeps the version.
	again, err := b.svc.Patch(ctx, org("acme"), []byte(`{"metadata":{"annotations":{"note":"three"}}}`))
	require.NoError(t, err)
	require.Equal(t, replaced.Metadata.ResourceVersion, again.Metadata.ResourceVersion, "a write that changes nothing is a no-op")

	line := resource.ApplyItem{Line: 1, Obj: api.Object{Metadata: api.ObjectMeta{Name: "n1", Annotations: map[string]string{"note": "two"}},
		Spec: json.RawMessage(`{"org":"acme"}`)}}
	outs := b.svc.ApplyNodes(ctx, []resource.ApplyItem{line})
	require.Len(t, outs, 1)
	require.NoError(t, outs[0].Err)
	require.Equal(t, "updated", outs[0].Result, "an annotation-only apply line is an update")
	applied, err := b.svc.Get(ctx, node("n1"))
	require.NoError(t, err)
	changed("apply", nodes, node("n1"), n1, applied, "two")
	outs = b.svc.ApplyNodes(ctx, []resource.ApplyItem{line})
	require.NoError(t, outs[0].Err)
	require.Equal(t, "unchanged", outs[0].Result, "the same line again")

	// Nothing more arrives: the no-ops stamped nothing.
	for _, sub := range []*resource.Subscription{orgs, nodes} {
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		c, err := sub.Next(wctx)
		cancel()
		require.Error(t, err, "a no-op sends no event, got %+v", c)
	}
}
