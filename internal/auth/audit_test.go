package auth_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pgtest"
)

// TestListAuditActionPrefix: the action filter is a prefix in byte order, exact at its edges
// (the range the index serves admits nothing that does not start with the prefix), newest
// first, and pages with before.
func TestListAuditActionPrefix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := pgtest.NewDB(t)
	for _, a := range []string{"state.loc", "state.lock", "statf", "state.lock.force", "State.lock", "state.lock"} {
		_, err := d.Exec(ctx, &db.Query{Name: "seed", Text: `INSERT INTO {{schema}}.audit_log (actor, action, target) VALUES ('t', $1, '')`}, a)
		require.NoError(t, err)
	}
	svc := auth.NewService(d)
	recs, err := svc.ListAudit(ctx, 0, "state.lock", 10)
	require.NoError(t, err)
	var got []string
	for _, r := range recs {
		got = append(got, r.Action)
	}
	require.Equal(t, []string{"state.lock", "state.lock.force", "state.lock"}, got)

	page, err := svc.ListAudit(ctx, recs[0].ID, "state.lock", 1)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, recs[1].ID, page[0].ID)

	all, err := svc.ListAudit(ctx, 0, "", 10)
	require.NoError(t, err)
	require.Len(t, all, 6)
}
