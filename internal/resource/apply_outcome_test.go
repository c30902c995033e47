package resource_test

import (
	"context"
	"errors"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/resource"
)

var applyOutcomeQueries = db.MustParseQueries(fstest.MapFS{"apply_outcome.sql": {Data: []byte(`
-- name: TestEndFirstCommitWithResources
-- The first transaction that writes a resource row ends at its COMMIT with admin_shutdown
-- (57P01), as a backend terminated while it waits for a synchronous standby does; later
-- ones commit. A sequence is not rolled back, so "first" holds across the aborted one.
CREATE SEQUENCE {{schema}}.test_commit_once;
CREATE FUNCTION {{schema}}.test_end_first_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF nextval('{{schema}}.test_commit_once') = 1 THEN
		RAISE EXCEPTION 'terminating connection due to administrator command' USING ERRCODE = '57P01';
	END IF;
	RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER test_end_first_commit AFTER INSERT OR UPDATE ON {{schema}}.resources
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {{schema}}.test_end_first_commit();
`)}}, "apply_outcome.sql")

// TestApplyUnknownCommitIsNotRetried: when the COMMIT of a bulk apply's one transaction ends
// with its outcome unknown, every line must say so — the batch may have committed. Before,
// ApplyNodes retried each line in a transaction of its own after any batch error, and
// reported what the retries did: lines the batch had written came back "unchanged", and a
// line whose retry then failed came back as a plain error, as if it had not been written.
// Found by the robustness harness's bulk check (docs/robustness.md); seen failing (the lines
// came back "created" from their retries) before the fix.
func TestApplyUnknownCommitIsNotRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	_, err := b.svc.Create(ctx, org("acme"), api.Object{})
	require.NoError(t, err)
	_, err = b.db.Exec(ctx, applyOutcomeQueries.Get("TestEndFirstCommitWithResources"))
	require.NoError(t, err)

	items := []resource.ApplyItem{
		{Line: 1, Obj: nodeObj("acme", map[string]string{"role": "web"})},
		{Line: 2, Obj: nodeObj("acme", map[string]string{"role": "db"})},
	}
	items[0].Obj.Metadata.Name, items[1].Obj.Metadata.Name = "web01", "db01"
	outs := b.svc.ApplyNodes(ctx, items)
	require.Len(t, outs, 2)
	for _, o := range outs {
		require.Equal(t, "error", o.Result, "line %d (%s): the batch's outcome is unknown, so is the line's", o.Line, o.Name)
		var de *db.Error
		require.True(t, errors.As(o.Err, &de), "line %d: %v", o.Line, o.Err)
		require.True(t, de.OutcomeUnknown, "line %d: the answer must say the outcome is unknown", o.Line)
	}
	// Nothing was sent again: the one transaction that ran was the batch (here it was in
	// fact rolled back, which a client finds by reading, as the problem tells it to).
	_, err = b.svc.Get(ctx, node("web01"))
	require.Error(t, err, "no line was retried on its own")
}
