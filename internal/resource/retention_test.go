package resource_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/resource"
)

// TestPruneChanges: changes recorded before the cutoff go, in batches smaller than the
// backlog, and newer ones stay.
func TestPruneChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		_, err := b.svc.Create(ctx, org(name), api.Object{})
		require.NoError(t, err)
	}
	// Age the first three changes (a, b, c) by a day.
	_, err := b.db.Exec(ctx, &db.Query{Name: "age", Text: `UPDATE {{schema}}.changes SET changed_at = now() - interval '1 day'
		WHERE name IN ('a', 'b', 'c')`})
	require.NoError(t, err)

	n, err := resource.PruneChanges(ctx, b.db, time.Now().Add(-time.Hour), 2)
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "three old changes in batches of two")

	left := changeNames(t, b)
	require.Equal(t, []string{"d", "e"}, left)

	n, err = resource.PruneChanges(ctx, b.db, time.Now().Add(-time.Hour), 2)
	require.NoError(t, err)
	require.Zero(t, n, "nothing more is old enough")
}

// TestPruneChangesLeavesNoHole: a change older by time but newer by resourceVersion than a
// change still within retention (its transaction began earlier and committed later) stays,
// so the log never has a hole below a kept change that a resuming watcher would skip.
func TestPruneChangesLeavesNoHole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	for _, name := range []string{"a", "b", "c"} {
		_, err := b.svc.Create(ctx, org(name), api.Object{})
		require.NoError(t, err)
	}
	_, err := b.db.Exec(ctx, &db.Query{Name: "age", Text: `UPDATE {{schema}}.changes SET changed_at = now() - interval '2 hours'
		WHERE name IN ('a', 'c')`})
	require.NoError(t, err)

	n, err := resource.PruneChanges(ctx, b.db, time.Now().Add(-time.Hour), 10)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "only a, before the first kept change b")

	left := changeNames(t, b)
	require.Equal(t, []string{"b", "c"}, left)
}

// changeNames lists the names in the changes log in resourceVersion order.
func changeNames(t *testing.T, b *testBundle) []string {
	t.Helper()
	rows, err := b.db.Query(context.Background(), &db.Query{Name: "left", Text: `SELECT name FROM {{schema}}.changes ORDER BY resource_version`})
	require.NoError(t, err)
	defer rows.Close()
	var names []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		names = append(names, s)
	}
	require.NoError(t, rows.Err())
	return names
}
