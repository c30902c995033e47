package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/db/dbadmin"
	"github.com/stratahq/strata/internal/db/migrations"
	"github.com/stratahq/strata/internal/pgembed"
)

func TestMain(m *testing.M) { Main(m) }

func exec1(t *testing.T, d *db.DB, sql string, args ...any) {
	t.Helper()
	_, err := d.Exec(context.Background(), &db.Query{Name: "test", Text: sql}, args...)
	require.NoError(t, err)
}

func tableExists(t *testing.T, d *db.DB, name string) bool {
	t.Helper()
	var ok bool
	err := d.QueryRow(context.Background(), &db.Query{Name: "test", Text: "SELECT to_regclass($1) IS NOT NULL"}, name).Scan(&ok)
	require.NoError(t, err)
	return ok
}

func TestClonesAreIndependent(t *testing.T) {
	t.Parallel()
	a, b := NewDB(t), NewDB(t)
	exec1(t, a, "CREATE TABLE {{schema}}.only_in_a (x int)")
	require.True(t, tableExists(t, a, "strata.only_in_a"))
	require.False(t, tableExists(t, b, "strata.only_in_a"))
	// A later clone comes from the template, which the first clone's change did not touch.
	require.False(t, tableExists(t, NewDB(t), "strata.only_in_a"))
}

func TestTemplateIsMigrated(t *testing.T) {
	t.Parallel()
	d := NewDB(t)
	v, err := d.SchemaVersion(context.Background())
	require.NoError(t, err)
	require.Equal(t, migrations.Latest(), v)
	require.NotZero(t, v)
	require.Equal(t, "tpl_"+migrations.Hash()[:12], state.template)
}

func TestEmptyDatabaseHasNoSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := db.Open(ctx, db.Options{URL: NewEmptyDatabaseURL(t)})
	require.NoError(t, err)
	defer d.Close()
	v, err := d.SchemaVersion(ctx)
	require.NoError(t, err)
	require.Zero(t, v)
	applied, err := d.Migrate(ctx)
	require.NoError(t, err)
	require.Len(t, applied, int(migrations.Latest()))
}

func TestParallelNewDB(t *testing.T) {
	t.Parallel()
	for i := range 10 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			d := NewDB(t)
			exec1(t, d, "CREATE TABLE {{schema}}.mine (x int)")
			exec1(t, d, "INSERT INTO {{schema}}.mine VALUES ($1)", i)
			var n int
			require.NoError(t, d.QueryRow(context.Background(), &db.Query{Name: "test", Text: "SELECT x FROM {{schema}}.mine"}).Scan(&n))
			require.Equal(t, i, n)
		})
	}
}

func TestDatabaseDroppedAfterTest(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("inner", func(t *testing.T) {
		// Ask the server, not the URL: STRATA_TEST_DATABASE_URL may be keyword/value or
		// postgres:// form, and the clone's URL keeps that form.
		ctx := context.Background()
		s, err := db.OpenSession(ctx, NewDatabaseURL(t), "strata", "dropped-test")
		require.NoError(t, err)
		defer s.Close(ctx)
		require.NoError(t, s.QueryRow(ctx, &db.Query{Name: "dbname", Text: "SELECT current_database()"}).Scan(&name))
		require.True(t, strings.HasPrefix(name, "t_pgtest_"), name)
		require.LessOrEqual(t, len(name), 63)
	})
	ok, err := dbadmin.DatabaseExists(context.Background(), AdminURL(t), name)
	require.NoError(t, err)
	require.False(t, ok, "database %s should be dropped when its test ends", name)
}

func TestCloneName(t *testing.T) {
	t.Parallel()
	n := cloneName()
	require.Regexp(t, `^t_[a-z0-9_]+_[0-9a-f]{8}$`, n)
	require.LessOrEqual(t, len(n), 63)
}

// TestRemoveLeftovers plays a test process that was killed: its cluster is still running in a
// strata-pgtest-* directory whose owner is dead. removeLeftovers must stop that server and
// remove the directory, and leave a directory with a live owner alone.
func TestRemoveLeftovers(t *testing.T) {
	t.Parallel()
	if _, err := pgembed.FindBinaries(); err != nil {
		if os.Getenv(EnvDatabaseURL) == "" {
			t.Fatal(noPostgres(err))
		}
		// Leftover clusters exist only where tests start their own.
		t.Skipf("cleanup of leftover clusters needs PostgreSQL's binaries, and tests here use %s instead: %v", EnvDatabaseURL, err)
	}
	ctx := context.Background()
	root, err := os.MkdirTemp(tempRoot(), "pgtest-leftovers-*")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(root, 0o711))
	t.Cleanup(func() { os.RemoveAll(root) })

	dead := filepath.Join(root, dirPrefix+"dead")
	require.NoError(t, os.Mkdir(dead, 0o711))
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	deadPID := cmd.Process.Pid
	require.NoError(t, os.WriteFile(filepath.Join(dead, ownerFile), []byte(fmt.Sprintf("%d 1\n", deadPID)), 0o644))
	c, err := pgembed.Start(ctx, pgembed.Options{DataDir: filepath.Join(dead, "data"), Database: "postgres", NoSync: true,
		Settings: map[string]string{"fsync": "off"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	pid := postmasterPID(t, filepath.Join(dead, "data"))

	alive := filepath.Join(root, dirPrefix+"alive")
	require.NoError(t, os.Mkdir(alive, 0o700))
	require.NoError(t, writeOwner(alive))

	removeLeftovers(ctx, root)

	_, err = os.Stat(dead)
	require.True(t, os.IsNotExist(err), "leftover directory should be removed")
	require.Eventually(t, func() bool { return processStart(pid) == "" }, 10*time.Second, 20*time.Millisecond,
		"postmaster %d should be stopped", pid)
	_, err = os.Stat(alive)
	require.NoError(t, err, "a directory with a live owner must stay")
}

func postmasterPID(t *testing.T, dataDir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "pg", "postmaster.pid"))
	require.NoError(t, err)
	var pid int
	_, err = fmt.Sscan(string(b), &pid)
	require.NoError(t, err)
	return pid
}

func TestNoPostgresNamesBothFixes(t *testing.T) {
	t.Parallel()
	err := noPostgres(pgembed.ErrNoBinaries)
	require.ErrorIs(t, err, pgembed.ErrNoBinaries)
	require.ErrorContains(t, err, "apt-get install -y postgresql")
	require.ErrorContains(t, err, EnvDatabaseURL)
}
