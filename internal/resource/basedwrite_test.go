package resource_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/kind"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/resource"
)

// schemaReplica is a replica as the server wires it: the schema registry and the list index
// on, its poller polling once an hour (a list wakes it; nothing else does).
type schemaReplica struct {
	res   *resource.Service
	kinds *kind.Service
	ix    *resource.Index
}

func openSchemaReplica(t *testing.T, url string) *schemaReplica {
	t.Helper()
	r := openReplicaWithSchemas(t, url, patient)
	return &schemaReplica{res: r.svc, kinds: r.kinds, ix: r.ix}
}

// catchUp makes r's list index apply every change committed so far (a list waits for it).
func catchUp(t *testing.T, ctx context.Context, res *resource.Service, kind, org string) {
	t.Helper()
	_, _, err := res.List(ctx, kind, org, resource.ListOptions{Limit: 1, Filter: all})
	require.NoError(t, err)
}

// A label PATCH of an object the replica's list index holds is one round trip to PostgreSQL
// (issue 31, item 4): the kind's key and revision check, the stamp (which writes only while
// the row still carries the copy's version), the label upsert, the audit record and COMMIT,
// in one pipeline, without reading the object first: from the index's copy, and from the
// copy of the replica's own last write when the index has not applied it yet. For a node (a
// built-in kind with a Prepare and an AfterWrite) and an object of a user kind, each after a
// first PATCH has prepared the statements; what was written is what a read from the
// database returns, and no copy was found overtaken.
func TestPatchFromTheIndexIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := auth.WithAuditActor(context.Background(), auth.AuditActor{Actor: "test"})
	r := openSchemaReplica(t, pgtest.NewDatabaseURL(t))
	_, err := r.res.Create(ctx, org("acme"), api.Object{})
	require.NoError(t, err)
	_, err = r.kinds.Register(ctx, auth.AuditActor{Actor: "test"}, "Widget", api.KindRequest{Scope: "org",
		Schema: json.RawMessage(`{"type": "object", "properties": {"size": {"type": "integer"}}}`)}, false)
	require.NoError(t, err)
	node := resource.Ref{Kind: resource.KindNode, Name: "web01"}
	_, err = r.res.Create(ctx, node, api.Object{Spec: json.RawMessage(`{"org": "acme"}`)})
	require.NoError(t, err)
	widget := resource.Ref{Kind: "Widget", Org: "acme", Name: "w1"}
	_, err = r.res.Create(ctx, widget, api.Object{Spec: json.RawMessage(`{"size": 1}`)})
	require.NoError(t, err)

	for _, ref := range []resource.Ref{node, widget} {
		for i := range 4 {
			if i < 2 {
				// From the index's copy; then from the copy of the replica's own last
				// write, which its poller (polling once an hour) has not applied.
				catchUp(t, ctx, r.res, ref.Kind, ref.Org)
			}
			based := r.ix.Stats().BasedWrites
			cctx, trips := db.CountRoundTrips(ctx)
			out, err := r.res.Patch(cctx, ref, []byte(fmt.Sprintf(`{"metadata": {"labels": {"k1": "v%d"}}}`, i)))
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("v%d", i), out.Metadata.Labels["k1"])
			require.Equal(t, based+1, r.ix.Stats().BasedWrites, "%s: written from the index's copy", ref.Kind)
			if i > 0 { // the first PATCH may prepare statements
				require.Equal(t, 1, trips.Count(), "%s: a label PATCH went in these round trips:\n%s", ref.Kind, trips)
			}
			got, err := r.res.Get(ctx, ref)
			require.NoError(t, err)
			require.Equal(t, out.Metadata.ResourceVersion, got.Metadata.ResourceVersion)
			require.Equal(t, out.Metadata.UpdatedAt, got.Metadata.UpdatedAt)
			require.Equal(t, out.Metadata.Labels, got.Metadata.Labels)
			require.JSONEq(t, string(out.Spec), string(got.Spec))
		}
	}
	require.Zero(t, r.ix.Stats().StaleBases)
}

// overtaken writes on replica b from a copy in b's list index that replica a has overtaken:
// b's index holds node n at its first version (b's poller never polls on its own), a adds
// label a=1, then b replaces the node (label c=3) expecting the version b's copy has, and
// patches label b=2. It returns b's PATCH answer and the error of b's replace.
func overtaken(t *testing.T, a, b *replica) (api.Object, error) {
	t.Helper()
	ctx := context.Background()
	n := node("n")
	first, err := a.svc.Create(ctx, n, api.Object{Spec: nodeSpec})
	require.NoError(t, err)
	catchUp(t, ctx, b.svc, resource.KindNode, "")
	_, err = a.svc.Patch(ctx, n, []byte(`{"metadata": {"labels": {"a": "1"}}}`))
	require.NoError(t, err)
	_, replaced := b.svc.Replace(ctx, n, api.Object{Metadata: api.ObjectMeta{ResourceVersion: first.Metadata.ResourceVersion, Labels: map[string]string{"c": "3"}}, Spec: nodeSpec})
	out, err := b.svc.Patch(ctx, n, []byte(`{"metadata": {"labels": {"b": "2"}}}`))
	require.NoError(t, err)
	return out, replaced
}

// TestWriteFromAnOvertakenCopyLosesNothing: a write computed from a copy another replica's
// write has overtaken is not committed as computed: its stamp finds the row at a newer
// version and writes nothing, and the write runs again under the row lock. A replace
// expecting the copy's version is a 409, as the version it expects is no longer stored; a
// PATCH answers (and stores) both labels.
func TestWriteFromAnOvertakenCopyLosesNothing(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabaseURL(t)
	a, b := withOrg(t, openReplica(t, url, nil)), openReplica(t, url, patient)
	out, replaced := overtaken(t, a, b)
	require.Equal(t, map[string]string{"a": "1", "b": "2"}, out.Metadata.Labels)
	require.Equal(t, fault.KindConflict, fault.KindOf(replaced), "%v", replaced)
	require.Equal(t, int64(2), b.ix.Stats().StaleBases, "both of b's writes found their copy overtaken")
	got, err := a.svc.Get(context.Background(), node("n"))
	require.NoError(t, err)
	require.Equal(t, out.Metadata.Labels, got.Metadata.Labels)
	require.Equal(t, out.Metadata.ResourceVersion, got.Metadata.ResourceVersion)
}

// TestWriteFromAnOvertakenCopyWithoutTheCheckLoses is the control of the test above: with the
// stamp's check of the copy's version skipped, the replace expecting an overwritten version
// succeeds, and a's label is gone from what b then answers.
func TestWriteFromAnOvertakenCopyWithoutTheCheckLoses(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabaseURL(t)
	a, b := withOrg(t, openReplica(t, url, nil)), openReplica(t, url, patient)
	resource.TrustStaleBases(b.svc)
	out, replaced := overtaken(t, a, b)
	require.NoError(t, replaced)
	require.NotContains(t, out.Metadata.Labels, "a")
}

// A write admitted under the kind's revision a replica remembers, after another replica
// registered a new one, is not committed as admitted: the revision check in its COMMIT's
// pipeline fails it, and it is admitted again under the current revision, which refuses it.
func TestWriteFromTheIndexUnderAReplacedRevision(t *testing.T) {
	t.Parallel()
	ctx := auth.WithAuditActor(context.Background(), auth.AuditActor{Actor: "test"})
	url := pgtest.NewDatabaseURL(t)
	a, b := openSchemaReplica(t, url), openSchemaReplica(t, url)
	_, err := a.res.Create(ctx, org("acme"), api.Object{})
	require.NoError(t, err)
	_, err = a.kinds.Register(ctx, auth.AuditActor{Actor: "test"}, "Widget", api.KindRequest{Scope: "org",
		Schema: json.RawMessage(`{"type": "object", "properties": {"size": {"type": "integer"}}}`)}, false)
	require.NoError(t, err)
	w := resource.Ref{Kind: "Widget", Org: "acme", Name: "w1"}
	_, err = b.res.Create(ctx, w, api.Object{Spec: json.RawMessage(`{"size": 1}`)})
	require.NoError(t, err)
	catchUp(t, ctx, b.res, "Widget", "acme")
	// Revision 2 caps size at 5; the stored widget (size 1) is compatible with it.
	_, err = a.kinds.Register(ctx, auth.AuditActor{Actor: "test"}, "Widget", api.KindRequest{Scope: "org",
		Schema: json.RawMessage(`{"type": "object", "properties": {"size": {"type": "integer", "maximum": 5}}}`)}, false)
	require.NoError(t, err)
	_, err = b.res.Patch(ctx, w, []byte(`{"spec": {"size": 7}}`))
	require.Error(t, err, "revision 2 refuses size 7")
	require.Equal(t, fault.KindUnprocessable, fault.KindOf(err), "%v", err)
	require.Equal(t, int64(1), b.ix.Stats().StaleBases)
	got, err := b.res.Get(ctx, w)
	require.NoError(t, err)
	require.JSONEq(t, `{"size": 1}`, string(got.Spec))
}

var basedWriteQueries = db.MustParseQueries(fstest.MapFS{"b.sql": {Data: []byte(`
-- name: TestLockRow
SELECT 1 FROM {{schema}}.resources WHERE id = $1 FOR UPDATE;

-- name: TestBumpVersion
-- A version without a change row: readers settle it as a gap once this transaction ends.
UPDATE {{schema}}.resources SET resource_version = nextval('{{schema}}.resource_version_seq') WHERE id = $1;

-- name: TestLockWaiters
SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock';

-- name: TestUpdateRecords
SELECT count(*) FROM {{schema}}.audit_log WHERE action = 'object.update';

-- name: TestChangeLabels
SELECT object->'metadata'->'labels' FROM {{schema}}.changes WHERE resource_version = $1;
`)}}, "b.sql")

// TestStaleStampThatWaitedWritesNothing: a stamp from a copy that waits for the row lock of a
// writer in flight, and finds the row moved on when that writer commits, writes nothing, and
// neither do the label upsert and the audit record behind it, although the waiting UPDATE
// gave its transaction an id; the write then runs under the row lock and its answer is a
// change in the log, with one audit record. (Conditioning them on the transaction having an
// id wrote the label without a change.)
func TestStaleStampThatWaitedWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabaseURL(t)
	a, b := withOrg(t, openReplica(t, url, nil)), openReplica(t, url, patient)
	n, err := a.svc.Create(ctx, node("n"), api.Object{Spec: nodeSpec})
	require.NoError(t, err)
	id, err := strconv.ParseInt(n.Metadata.UID[1:], 36, 64)
	require.NoError(t, err)
	catchUp(t, ctx, b.svc, resource.KindNode, "")

	locked, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- a.db.InTx(ctx, func(tx *db.Tx) error {
			if _, err := tx.Exec(ctx, basedWriteQueries.Get("TestLockRow"), id); err != nil {
				return err
			}
			close(locked)
			<-release
			_, err := tx.Exec(ctx, basedWriteQueries.Get("TestBumpVersion"), id)
			return err
		})
	}()
	<-locked
	patched := make(chan error, 1)
	var out api.Object
	go func() {
		var err error
		out, err = b.svc.Patch(ctx, node("n"), []byte(`{"metadata": {"labels": {"b": "2"}}}`))
		patched <- err
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var waiting int
		require.NoError(t, a.db.QueryRow(ctx, basedWriteQueries.Get("TestLockWaiters")).Scan(&waiting))
		if waiting > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "b's stamp never waited for the row lock")
	}
	close(release)
	require.NoError(t, <-done)
	require.NoError(t, <-patched)
	require.Equal(t, map[string]string{"b": "2"}, out.Metadata.Labels)
	require.Equal(t, int64(1), b.ix.Stats().StaleBases, "the copy was overtaken while the stamp waited")
	var records int
	require.NoError(t, a.db.QueryRow(ctx, basedWriteQueries.Get("TestUpdateRecords")).Scan(&records))
	require.Equal(t, 1, records, "one audit record for one PATCH")
	// The answer is a change in the log: had the stale attempt written its label, the write
	// under the lock would have found nothing to change and answered the bumped version,
	// which has no change row.
	var labels json.RawMessage
	require.NoError(t, a.db.QueryRow(ctx, basedWriteQueries.Get("TestChangeLabels"), versionNumber(t, out)).Scan(&labels))
	require.JSONEq(t, `{"b": "2"}`, string(labels))
}

func versionNumber(t *testing.T, o api.Object) int64 {
	t.Helper()
	rv, err := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
	require.NoError(t, err)
	return rv
}
