package db_test

import (
	"context"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/db/migrations"
	"github.com/stratahq/strata/internal/pgtest"
)

// migrationSet parses a migration set from file name to SQL, as the embedded one is parsed.
func migrationSet(t *testing.T, files map[string]string) []db.Migration {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, sql := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(sql)}
	}
	ms, err := migrations.Parse(fsys)
	require.NoError(t, err)
	return ms
}

// emptyDB opens a fresh database without strata's schema, closed when the test ends.
func emptyDB(t *testing.T) *db.DB {
	t.Helper()
	d, err := db.Open(context.Background(), db.Options{URL: pgtest.NewEmptyDatabaseURL(t)})
	require.NoError(t, err)
	t.Cleanup(d.Close)
	return d
}

var (
	mig1 = "-- strata:compatible-since 1\nCREATE TABLE {{schema}}.x (id int PRIMARY KEY, v text);\nINSERT INTO {{schema}}.x VALUES (1, 'a'), (2, 'a');\n"
	mig2 = "-- strata:compatible-since 2\nALTER TABLE {{schema}}.x ADD COLUMN w text;\n"
)

// TestMigrationHeaders: every migration must declare compatible-since, and a malformed,
// repeated, unknown or impossible header is an error rather than silently ignored.
func TestMigrationHeaders(t *testing.T) {
	t.Parallel()
	for sql, want := range map[string]string{
		"SELECT 1;": "missing header line `-- strata:compatible-since N`",
		"-- strata:compatible-since two\nSELECT 1;":                    `compatible-since "two"`,
		"-- strata:compatible-since 0\nSELECT 1;":                      `compatible-since "0"`,
		"-- strata:compatible-since 4\nSELECT 1;":                      "above the migration's own version 3",
		"-- strata:compatible-since 2\n-- strata:compatible-since 2\n": "given twice",
		"-- strata:compatible-since 2\n-- strata:no-transaction yes\n": "takes no argument",
		"-- strata:compatible-since 2\n-- strata:concurrently\n":       "unknown header strata:concurrently",
	} {
		_, err := migrations.Parse(fstest.MapFS{
			"0001_a.sql": {Data: []byte(mig1)}, "0002_b.sql": {Data: []byte(mig2)},
			"0003_c.sql": {Data: []byte(sql)},
		})
		require.ErrorContains(t, err, `"0003_c.sql"`, sql)
		require.ErrorContains(t, err, want, sql)
	}
	ms := migrationSet(t, map[string]string{"0001_a.sql": mig1, "0002_b.sql": "-- strata:no-transaction\n--strata:compatible-since 1\nSELECT 1;"})
	require.Equal(t, int64(1), ms[1].CompatibleSince)
	require.True(t, ms[1].NoTransaction)
	require.False(t, ms[0].NoTransaction)

	// The embedded migrations all declare it.
	embedded, err := migrations.Embedded()
	require.NoError(t, err)
	for _, m := range embedded {
		require.Positive(t, m.CompatibleSince, m.Name)
	}
}

// TestOlderReleaseOnCompatibleSchema: a release knowing versions up to 2 keeps starting and
// stays ready on a schema at 3 that declares itself compatible since 2 (a staged rollout).
func TestOlderReleaseOnCompatibleSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := emptyDB(t)
	newer := migrationSet(t, map[string]string{"0001_a.sql": mig1, "0002_b.sql": mig2,
		"0003_c.sql": "-- strata:compatible-since 2\nCREATE TABLE {{schema}}.y (id int);"})
	applied, err := d.MigrateWith(ctx, db.MigrateOptions{Migrations: newer})
	require.NoError(t, err)
	require.Len(t, applied, 3)

	older := newer[:2]
	applied, err = d.MigrateWith(ctx, db.MigrateOptions{Migrations: older})
	require.NoError(t, err, "the older release starts")
	require.Empty(t, applied)

	st, err := d.CheckSchema(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, db.SchemaStatus{Current: 3, Known: 2, Required: 2}, st)
	require.True(t, st.Compatible())
	require.NoError(t, st.Err(), "ready")
	require.Equal(t, "schema is at 3, newer than this release's 2; compatible since 2", st.Warning())

	rows, err := d.AppliedMigrations(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 2}, []int64{rows[0].CompatibleSince, rows[1].CompatibleSince, rows[2].CompatibleSince})

	// The newer release itself is ready without a warning.
	st, err = d.CheckSchema(ctx, 3)
	require.NoError(t, err)
	require.NoError(t, st.Err())
	require.Empty(t, st.Warning())
}

// TestOlderReleaseOnIncompatibleSchema: a schema at 3 that needs a release knowing 3 is
// refused by one knowing 2, naming the three versions; rows recorded before compatible_since
// existed (NULL) count as their own version.
func TestOlderReleaseOnIncompatibleSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := emptyDB(t)
	newer := migrationSet(t, map[string]string{"0001_a.sql": mig1, "0002_b.sql": mig2,
		"0003_c.sql": "-- strata:compatible-since 3\nALTER TABLE {{schema}}.x RENAME COLUMN w TO z;"})
	_, err := d.MigrateWith(ctx, db.MigrateOptions{Migrations: newer})
	require.NoError(t, err)

	_, err = d.MigrateWith(ctx, db.MigrateOptions{Migrations: newer[:2]})
	require.ErrorIs(t, err, db.ErrSchemaTooNew)
	require.ErrorContains(t, err, "at version 3, this strata knows versions up to 2, and the schema needs at least 3")
	st, err := d.CheckSchema(ctx, 2)
	require.NoError(t, err)
	require.False(t, st.Compatible())
	require.ErrorIs(t, st.Err(), db.ErrSchemaTooNew)

	// A pre-compatible_since row (NULL) is its own version: 3 needs 3.
	_, err = d.Exec(ctx, &db.Query{Name: "Legacy", Text: "UPDATE {{schema}}.schema_migrations SET compatible_since = NULL WHERE version = 3"})
	require.NoError(t, err)
	_, err = d.MigrateWith(ctx, db.MigrateOptions{Migrations: newer[:2]})
	require.ErrorContains(t, err, "needs at least 3")
}

// TestMigrationLockTimeout: DDL behind a reader's lock gives up after the lock timeout with
// a clear error instead of queueing (and blocking every later reader) without end; nothing
// is recorded, and a retry once the reader is gone succeeds.
func TestMigrationLockTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := emptyDB(t)
	set := migrationSet(t, map[string]string{"0001_a.sql": mig1, "0002_b.sql": mig2})
	_, err := d.MigrateWith(ctx, db.MigrateOptions{Migrations: set[:1]})
	require.NoError(t, err)

	hold, held, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_ = d.InTx(ctx, func(tx *db.Tx) error {
			_, err := tx.Exec(ctx, &db.Query{Name: "Reader", Text: "LOCK TABLE {{schema}}.x IN ACCESS SHARE MODE"})
			close(held)
			<-hold
			return err
		})
	}()
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
			<-done
		}
	}
	t.Cleanup(release) // registered before any assertion can fail: the reader never stays open
	<-held

	mctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err = d.MigrateWith(mctx, db.MigrateOptions{Migrations: set, LockTimeout: 300 * time.Millisecond})
	require.ErrorIs(t, err, db.ErrMigrationLockTimeout)
	require.NoError(t, mctx.Err(), "the migration gave up on its own, not at the test's deadline")
	require.ErrorContains(t, err, "0002_b")
	require.ErrorContains(t, err, "retry")
	v, err := d.SchemaVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), v, "nothing recorded")

	release()
	applied, err := d.MigrateWith(ctx, db.MigrateOptions{Migrations: set, LockTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	require.Len(t, applied, 1)
}

// TestNoTransactionMigration: a no-transaction migration runs CREATE INDEX CONCURRENTLY
// between the batches around it. When it fails (a unique index over duplicates) it is not
// recorded, the migrations before it stay applied, and the rerun after fixing the data drops
// the invalid index it left and succeeds.
func TestNoTransactionMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := emptyDB(t)
	set := migrationSet(t, map[string]string{
		"0001_a.sql": mig1,
		"0002_b.sql": mig2,
		"0003_c.sql": "-- strata:compatible-since 2\n-- strata:no-transaction\n" +
			"-- Re-runnable: a failed CONCURRENTLY leaves an invalid index behind.\n" +
			"DROP INDEX CONCURRENTLY IF EXISTS {{schema}}.x_v;\n" +
			"CREATE UNIQUE INDEX CONCURRENTLY x_v ON {{schema}}.x (v);\n",
		"0004_d.sql": "-- strata:compatible-since 2\nCREATE TABLE {{schema}}.y (id int);",
	})
	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	applied, err := d.MigrateWith(mctx, db.MigrateOptions{Migrations: set})
	require.ErrorContains(t, err, "apply migration 0003_c")
	require.Len(t, applied, 2, "the batch before it committed")
	v, err := d.SchemaVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), v, "the failed migration is not recorded, nor anything after it")
	var valid bool
	require.NoError(t, d.QueryRow(ctx, &db.Query{Name: "Valid", Text: "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass('{{schema}}.x_v')"}).Scan(&valid))
	require.False(t, valid, "the failed CONCURRENTLY left an invalid index")

	_, err = d.Exec(ctx, &db.Query{Name: "Fix", Text: "UPDATE {{schema}}.x SET v = 'b' WHERE id = 2"})
	require.NoError(t, err)
	applied, err = d.MigrateWith(mctx, db.MigrateOptions{Migrations: set})
	require.NoError(t, err)
	require.Len(t, applied, 2)
	require.Equal(t, []int64{3, 4}, []int64{applied[0].Version, applied[1].Version})
	require.NoError(t, d.QueryRow(ctx, &db.Query{Name: "Valid", Text: "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass('{{schema}}.x_v')"}).Scan(&valid))
	require.True(t, valid)
	rows, err := d.AppliedMigrations(ctx)
	require.NoError(t, err)
	require.Len(t, rows, 4)
	require.Equal(t, int64(2), rows[2].CompatibleSince)

	again, err := d.MigrateWith(mctx, db.MigrateOptions{Migrations: set})
	require.NoError(t, err)
	require.Empty(t, again)
}
