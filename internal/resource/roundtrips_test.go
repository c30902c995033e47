package resource_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/kind"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/resource"
)

// A label PATCH that reads its object under the row lock — on a replica without a list index,
// or when the copy it started from was overtaken (TestPatchFromTheIndexIsOneRoundTrip is the
// other case) — is at most two round trips to PostgreSQL (issue 31): BEGIN, the kind's
// shared key and revision and the locked read in one pipeline; the label upsert, the stamp,
// the audit record and COMMIT in a second (db.Tx.SendWithCommit). Counted through the db seam with the schema
// registry wired as the server wires it, for a node (a built-in kind with a Prepare and an
// AfterWrite) and for an object of a user kind, each after a first PATCH has prepared the
// statements.
func TestPatchRoundTrips(t *testing.T) {
	t.Parallel()
	res, ctx := withWidgets(t)
	node := resource.Ref{Kind: resource.KindNode, Name: "web01"}
	_, err := res.Create(ctx, node, api.Object{Spec: json.RawMessage(`{"org": "acme"}`)})
	require.NoError(t, err)
	widget := resource.Ref{Kind: "Widget", Org: "acme", Name: "w1"}
	_, err = res.Create(ctx, widget, api.Object{Spec: json.RawMessage(`{"size": 1}`)})
	require.NoError(t, err)

	for _, ref := range []resource.Ref{node, widget} {
		for i := range 3 {
			cctx, trips := db.CountRoundTrips(ctx)
			patch := fmt.Sprintf(`{"metadata": {"labels": {"k1": "v%d"}}}`, i)
			out, err := res.Patch(cctx, ref, []byte(patch))
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("v%d", i), out.Metadata.Labels["k1"])
			if i == 0 {
				continue // the first PATCH may prepare statements
			}
			require.LessOrEqual(t, trips.Count(), 2, "%s: a label PATCH went in these round trips:\n%s", ref.Kind, trips)
			got, err := res.Get(ctx, ref)
			require.NoError(t, err)
			require.Equal(t, out.Metadata.ResourceVersion, got.Metadata.ResourceVersion)
			require.Equal(t, fmt.Sprintf("v%d", i), got.Metadata.Labels["k1"])
		}
	}
}

// A delete of an object whose kind has nothing to do before it (no BeforeDelete: a user
// kind's) is two round trips: BEGIN and the locked read; then the deletion, its audit record,
// its stamp and COMMIT (db.Tx.SendWithCommit). It was five: BEGIN and the read, the DELETE,
// the audit record, the stamp, COMMIT.
func TestDeleteRoundTrips(t *testing.T) {
	t.Parallel()
	res, ctx := withWidgets(t)
	for i := range 3 {
		w := resource.Ref{Kind: "Widget", Org: "acme", Name: fmt.Sprintf("w%d", i)}
		_, err := res.Create(ctx, w, api.Object{Spec: json.RawMessage(`{}`)})
		require.NoError(t, err)
		cctx, trips := db.CountRoundTrips(ctx)
		require.NoError(t, res.Delete(cctx, w, "", false))
		_, err = res.Get(ctx, w)
		require.Error(t, err, "deleted")
		if i > 0 { // the first may prepare statements
			require.LessOrEqual(t, trips.Count(), 2, "a delete went in these round trips:\n%s", trips)
		}
	}
}

// withWidgets is a service with the schema registry wired as the server wires it, an org
// acme and a user kind Widget (org-scoped, with a schema), and a context with an audit actor.
func withWidgets(t *testing.T) (*resource.Service, context.Context) {
	d := pgtest.NewDB(t)
	kinds := kind.NewService(d)
	res := resource.NewService(d)
	res.UseSchemas(kinds)
	ctx := auth.WithAuditActor(context.Background(), auth.AuditActor{Actor: "test"})
	_, err := res.Create(ctx, org("acme"), api.Object{})
	require.NoError(t, err)
	_, err = kinds.Register(ctx, auth.AuditActor{Actor: "test"}, "Widget", api.KindRequest{Scope: "org",
		Schema: json.RawMessage(`{"type": "object", "properties": {"size": {"type": "integer"}}}`)}, false)
	require.NoError(t, err)
	return res, ctx
}
