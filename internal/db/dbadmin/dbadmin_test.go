package dbadmin_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/db/dbadmin"
	"github.com/stratahq/strata/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestURLForDatabase(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"postgres://u:p@h:5432/old?sslmode=disable", "postgres://u:p@h:5432/new?sslmode=disable"},
		{"postgresql://h/old", "postgresql://h/new"},
		{"postgres://h", "postgres://h/new"},
		{"postgres:///old?host=%2Fvar%2Frun&dbname=old", "postgres:///new?host=%2Fvar%2Frun"},
		{"host=/tmp/s port=5432 dbname=old user=u", "host='/tmp/s' port='5432' dbname='new' user='u'"},
		{"host = '/a b/it\\'s' dbname='old'", `host='/a b/it\'s' dbname='new'`},
		{"host=h", "host='h' dbname='new'"},
		{"", "dbname='new'"},
	} {
		got, err := dbadmin.URLForDatabase(c.in, "new")
		require.NoError(t, err, c.in)
		require.Equal(t, c.want, got, c.in)
	}
	for _, bad := range []string{"host", "host='unterminated", "=x"} {
		_, err := dbadmin.URLForDatabase(bad, "new")
		require.Error(t, err, bad)
	}
	_, err := dbadmin.URLForDatabase("host=h", "")
	require.Error(t, err)
}

func TestDatabaseAdministration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := pgtest.AdminURL(t)
	src := "t_admin_" + randomSuffix(t)
	dst := src + "_renamed"
	clone := src + "_clone"
	t.Cleanup(func() {
		for _, n := range []string{src, dst, clone} {
			require.NoError(t, dbadmin.DropDatabase(context.Background(), admin, n))
		}
	})

	require.NoError(t, dbadmin.CreateDatabase(ctx, admin, src, "template0"))
	exists, err := dbadmin.DatabaseExists(ctx, admin, src)
	require.NoError(t, err)
	require.True(t, exists)
	err = dbadmin.CreateDatabase(ctx, admin, src, "template0")
	require.ErrorIs(t, err, db.ErrConflict, "creating an existing database is a conflict")

	require.NoError(t, dbadmin.RenameDatabase(ctx, admin, src, dst))
	exists, err = dbadmin.DatabaseExists(ctx, admin, src)
	require.NoError(t, err)
	require.False(t, exists)

	// A clone carries the template's contents.
	url, err := dbadmin.URLForDatabase(admin, dst)
	require.NoError(t, err)
	d, err := db.Open(ctx, db.Options{URL: url, MaxConns: 1})
	require.NoError(t, err)
	_, err = d.Exec(ctx, &db.Query{Name: "t", Text: "CREATE TABLE public.marker (x int)"})
	require.NoError(t, err)
	d.Close()
	require.NoError(t, dbadmin.CreateDatabase(ctx, admin, clone, dst))
	url, err = dbadmin.URLForDatabase(admin, clone)
	require.NoError(t, err)
	d, err = db.Open(ctx, db.Options{URL: url, MaxConns: 1})
	require.NoError(t, err)
	var ok bool
	require.NoError(t, d.QueryRow(ctx, &db.Query{Name: "t", Text: "SELECT to_regclass('public.marker') IS NOT NULL"}).Scan(&ok))
	require.True(t, ok)

	// DROP … WITH (FORCE) ends the open connection instead of failing.
	require.NoError(t, dbadmin.DropDatabase(ctx, admin, clone))
	d.Close()
	exists, err = dbadmin.DatabaseExists(ctx, admin, clone)
	require.NoError(t, err)
	require.False(t, exists)
	require.NoError(t, dbadmin.DropDatabase(ctx, admin, clone), "dropping a missing database is fine")
}

func TestAdminRejectsBadNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, bad := range []string{"", "Upper", `x"; DROP DATABASE postgres; --`, "a-b", "x23456789012345678901234567890123456789012345678901234567890abcd"} {
		require.Error(t, dbadmin.CreateDatabase(ctx, "host=/nonexistent", bad, ""), bad)
		require.Error(t, dbadmin.CreateDatabase(ctx, "host=/nonexistent", "ok", bad), bad)
		require.Error(t, dbadmin.DropDatabase(ctx, "host=/nonexistent", bad), bad)
		require.Error(t, dbadmin.RenameDatabase(ctx, "host=/nonexistent", "ok", bad), bad)
	}
}

func TestWithAdvisoryLockSerializes(t *testing.T) {
	t.Parallel()
	admin := pgtest.AdminURL(t)
	name := "admin-test-" + randomSuffix(t)
	var inside, runs atomic.Int32
	var overlapped atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			err := dbadmin.WithAdvisoryLock(context.Background(), admin, name, func(ctx context.Context) error {
				if inside.Add(1) > 1 {
					overlapped.Store(true)
				}
				time.Sleep(20 * time.Millisecond)
				inside.Add(-1)
				runs.Add(1)
				return nil
			})
			require.NoError(t, err)
		})
	}
	wg.Wait()
	require.Equal(t, int32(4), runs.Load())
	require.False(t, overlapped.Load(), "holders of the lock must not overlap")

	// fn's error comes back, and the lock is released.
	err := dbadmin.WithAdvisoryLock(context.Background(), admin, name, func(context.Context) error { return context.Canceled })
	require.ErrorIs(t, err, context.Canceled)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, dbadmin.WithAdvisoryLock(ctx, admin, name, func(context.Context) error { return nil }))
}

func randomSuffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}
