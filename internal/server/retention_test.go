package server

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pgtest"
)

// TestMain (pgtest.Main) is in server_test.go: one per test binary.

// TestSweep: one pass deletes what is older than each retention, and a retention of 0 keeps
// its log whole.
func TestSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := pgtest.NewDB(t)
	seed := func(age string) {
		_, err := d.Exec(ctx, &db.Query{Name: "seed-audit", Text: `INSERT INTO {{schema}}.audit_log (at, actor, action, target)
			VALUES (now() - $1::interval, 't', 'test.seed', '')`}, age)
		require.NoError(t, err)
		_, err = d.Exec(ctx, &db.Query{Name: "seed-change", Text: `INSERT INTO {{schema}}.changes (resource_version, kind, name, type, object, changed_at)
			VALUES (nextval('{{schema}}.resource_version_seq'), 'Org', 'x', 'ADDED', '{}', now() - $1::interval)`}, age)
		require.NoError(t, err)
	}
	seed("30 days")
	seed("10 days")
	seed("1 hour")
	count := func(table string) (n int) {
		require.NoError(t, d.QueryRow(ctx, (&db.Query{Name: "count", Text: `SELECT count(*) FROM {{schema}}.{{table}}`}).WithIdent("table", table)).Scan(&n))
		return n
	}
	logger := slog.New(slog.DiscardHandler)

	sweep(ctx, d, Config{ChangesRetention: 0, AuditRetention: 0}, logger, time.Now())
	require.Equal(t, 3, count("changes"), "0 keeps the changes log")
	require.Equal(t, 3, count("audit_log"), "0 keeps the audit log")

	sweep(ctx, d, Config{ChangesRetention: 7 * 24 * time.Hour, AuditRetention: 20 * 24 * time.Hour}, logger, time.Now())
	require.Equal(t, 1, count("changes"), "a week of changes stays")
	require.Equal(t, 2, count("audit_log"), "20 days of audit stay")
}
