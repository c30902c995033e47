package resource_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/resource"
)

// TestReferenceCheckedOnOldAndNewValue (issue 30, item 7g): a write that changes a declared
// reference needs the reference's scope on the value it sets and on the value it replaces, so
// moving an object out of a place needs the right that moving it in does. A node in victim,
// written by a caller holding orgs:attach on acme only, cannot be moved to acme — by PATCH,
// PUT or a bulk apply line — and the 403 names orgs:attach:victim; the node stays where it
// was. The controls: the same caller moves a node of acme to acme2 (both its own), a write
// that leaves the reference as it is needs no attach at all, and with attach on victim too
// the move is allowed. Before, only an HTTP test killed the mutation that checks the new
// value alone; seen failing here by hand with checkReferences dropping the old value.
func TestReferenceCheckedOnOldAndNewValue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	for _, o := range []string{"acme", "acme2", "victim"} {
		_, err := b.svc.Create(ctx, org(o), api.Object{})
		require.NoError(t, err)
	}
	for n, o := range map[string]string{"v1": "victim", "a1": "acme"} {
		_, err := b.svc.Create(ctx, node(n), nodeObj(o, nil))
		require.NoError(t, err)
	}
	as := func(scopes ...string) context.Context {
		return resource.WithAuthorizer(ctx, principal(t, scopes...))
	}
	acmeOnly := as("nodes:write:*", "orgs:attach:acme", "orgs:attach:acme2")
	orgOf := func(n string) string {
		t.Helper()
		o, err := b.svc.Get(ctx, node(n))
		require.NoError(t, err)
		return resource.NodeOrg(o)
	}
	refused := func(how string, err error) {
		t.Helper()
		require.Equal(t, fault.KindForbidden, fault.KindOf(err), "%s: %v", how, err)
		require.ErrorContains(t, err, "victim", how)
		require.ErrorContains(t, err, "orgs:attach", how)
		require.Equal(t, "victim", orgOf("v1"), "%s: the node stays where it was", how)
	}

	_, err := b.svc.Patch(acmeOnly, node("v1"), []byte(`{"spec":{"org":"acme"}}`))
	refused("patch", err)
	_, err = b.svc.Replace(acmeOnly, node("v1"), nodeObj("acme", nil))
	refused("replace", err)
	outs := b.svc.ApplyNodes(acmeOnly, []resource.ApplyItem{{Line: 1, Obj: api.Object{Metadata: api.ObjectMeta{Name: "v1"},
		Spec: json.RawMessage(`{"org":"acme"}`)}}})
	require.Len(t, outs, 1)
	refused("apply", outs[0].Err)

	// Into victim is refused on the new value, as before.
	_, err = b.svc.Patch(acmeOnly, node("a1"), []byte(`{"spec":{"org":"victim"}}`))
	require.Equal(t, fault.KindForbidden, fault.KindOf(err), "%v", err)
	require.Equal(t, "acme", orgOf("a1"))

	// The controls.
	_, err = b.svc.Patch(acmeOnly, node("a1"), []byte(`{"spec":{"org":"acme2"}}`))
	require.NoError(t, err, "a move between two orgs the caller may attach to")
	require.Equal(t, "acme2", orgOf("a1"))
	_, err = b.svc.Patch(as("nodes:write:*"), node("v1"), []byte(`{"metadata":{"labels":{"x":"1"}}}`))
	require.NoError(t, err, "a write that keeps the reference needs no attach")
	_, err = b.svc.Patch(as("nodes:write:*", "orgs:attach:acme", "orgs:attach:victim"), node("v1"), []byte(`{"spec":{"org":"acme"}}`))
	require.NoError(t, err, "with attach on both orgs the move is the caller's")
	require.Equal(t, "acme", orgOf("v1"))
}
