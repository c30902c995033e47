package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pgtest"
)

// TestPruneAudit: audit entries recorded before the cutoff go, in batches smaller than the
// backlog, and newer ones stay.
func TestPruneAudit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := pgtest.NewDB(t)
	for i, age := range []string{"100 days", "95 days", "91 days", "1 day", "0"} {
		_, err := d.Exec(ctx, &db.Query{Name: "seed", Text: `INSERT INTO {{schema}}.audit_log (at, actor, action, target)
			VALUES (now() - $1::interval, 'test', 'test.seed', $2)`}, age, string(rune('a'+i)))
		require.NoError(t, err)
	}
	n, err := auth.PruneAudit(ctx, d, time.Now().Add(-90*24*time.Hour), 2)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)

	var left []string
	rows, err := d.Query(ctx, &db.Query{Name: "left", Text: `SELECT target FROM {{schema}}.audit_log WHERE action = 'test.seed' ORDER BY id`})
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		left = append(left, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"d", "e"}, left)
}
