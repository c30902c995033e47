package pgembed

import (
	"context"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
)

// These tests run the real PostgreSQL binaries of this machine; without them they fail, naming
// the fix, rather than skip.

var fastSettings = map[string]string{"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}

// testDir makes a directory the cluster's user can reach (t.TempDir() is 0700, and as root
// PostgreSQL runs as the postgres user) and removes it after the test.
func testDir(t *testing.T) string {
	t.Helper()
	if _, err := FindBinaries(); err != nil {
		t.Fatalf("these tests need PostgreSQL's binaries: %v", err)
	}
	dir, err := os.MkdirTemp("", "pgembed-test-*")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o711))
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func testOptions(t *testing.T, dataDir string) Options {
	return Options{DataDir: dataDir, Database: "app", NoSync: true, Settings: fastSettings,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
}

func startCluster(t *testing.T, opts Options) *Cluster {
	t.Helper()
	c, err := Start(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Stop(context.Background())) })
	return c
}

func open(t *testing.T, url string) *db.DB {
	t.Helper()
	d, err := db.Open(context.Background(), db.Options{URL: url, MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(d.Close)
	return d
}

func q(text string) *db.Query { return &db.Query{Name: "test", Text: text} }

func countRows(t *testing.T, url string) int {
	t.Helper()
	d := open(t, url)
	var n int
	require.NoError(t, d.QueryRow(context.Background(), q("SELECT count(*) FROM kept")).Scan(&n))
	d.Close()
	return n
}

// requireGone fails unless the postmaster pid is gone.
func requireGone(t *testing.T, c *Cluster, pid int) {
	t.Helper()
	require.Eventually(t, func() bool { return inspectProcess(pid, c.realData, c.run.uid) == procGone }, 10*time.Second, 10*time.Millisecond,
		"postmaster %d still running", pid)
}

// requireStopped fails unless no process of the cluster remains after Stop.
func requireStopped(t *testing.T, c *Cluster, pid int) {
	t.Helper()
	// Stop waits for the postmaster, which waits for all its children: nothing may be left
	// the moment Stop returns.
	require.NotEqual(t, procOurs, inspectProcess(pid, c.realData, c.run.uid), "postmaster %d still running", pid)
	require.Empty(t, processesIn(c.realData, c.run.uid), "processes of the cluster remain")
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dataDir := filepath.Join(testDir(t), "data")
	opts := testOptions(t, dataDir)

	// First start: initdb, database created, reachable over the socket only.
	c1 := startCluster(t, opts)
	require.Contains(t, c1.URL(), "dbname=app")
	require.Empty(t, c1.TCPURL())
	d := open(t, c1.URL())
	_, err := d.Exec(ctx, q("CREATE TABLE kept (x int); INSERT INTO kept VALUES (1)"))
	require.NoError(t, err)
	var listen, user, jit string
	require.NoError(t, d.QueryRow(ctx, q("SELECT current_setting('listen_addresses'), current_user")).Scan(&listen, &user))
	require.Equal(t, "", listen)
	require.Equal(t, "strata", user)
	// JIT compiles code at run time, which the unit's MemoryDenyWriteExecute=yes forbids
	// (issue 28, item 6): the embedded cluster runs without it.
	require.NoError(t, d.QueryRow(ctx, q("SHOW jit")).Scan(&jit))
	require.Equal(t, "off", jit)
	d.Close()

	st, err := os.Stat(c1.sockDir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "socket directory must be private")
	require.Equal(t, c1.run.uid, st.Sys().(*syscall.Stat_t).Uid)
	require.Equal(t, filepath.Join(dataDir, "pg-socket"), c1.sockDir)

	// Stop leaves no process; a second Stop is a no-op.
	pid1 := c1.pid
	require.NotZero(t, pid1)
	require.NoError(t, c1.Stop(ctx))
	requireStopped(t, c1, pid1)
	require.NoError(t, c1.Stop(ctx))
	_, err = os.Stat(filepath.Join(dataDir, "pg", "postmaster.pid"))
	require.True(t, os.IsNotExist(err))

	// Restart reuses the data.
	c2 := startCluster(t, opts)
	require.Equal(t, 1, countRows(t, c2.URL()))

	// While a strata owns the cluster, nobody else may start it.
	_, err = Start(ctx, opts)
	require.ErrorContains(t, err, "in use by another strata process")

	// strata dies (its lock goes with it) but its server keeps running: the next Start stops
	// that server and starts a new one.
	pid2 := c2.pid
	c2.release()
	c3 := startCluster(t, opts)
	require.NotEqual(t, pid2, c3.pid)
	requireGone(t, c2, pid2)
	require.Equal(t, 1, countRows(t, c3.URL()))

	// The server itself is killed: postmaster.pid is stale, and Start recovers.
	pid3 := c3.pid
	require.NoError(t, syscall.Kill(pid3, syscall.SIGKILL))
	require.Eventually(t, func() bool { return inspectProcess(pid3, c3.realData, c3.run.uid) == procGone }, 10*time.Second, 10*time.Millisecond)
	c3.release()
	_, err = os.Stat(filepath.Join(dataDir, "pg", "postmaster.pid"))
	require.NoError(t, err, "a killed postmaster leaves its pid file")
	c4 := startCluster(t, opts)
	require.Equal(t, 1, countRows(t, c4.URL()))
	pid4 := c4.pid
	require.NoError(t, c4.Stop(ctx))
	requireStopped(t, c4, pid4)
}

func TestTCPAndLongDataDir(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	long := filepath.Join(testDir(t), strings.Repeat("d", 60), strings.Repeat("e", 60))
	port := freePort(t)
	opts := testOptions(t, long)
	opts.TCPListen = "127.0.0.1:" + strconv.Itoa(port)
	t.Cleanup(func() { os.RemoveAll(socketDirFor(long, port)) }) // runs after Stop
	c := startCluster(t, opts)

	// The socket moved to a short directory under /tmp, private like the usual one.
	require.True(t, strings.HasPrefix(c.sockDir, "/tmp/strata-"), c.sockDir)
	st, err := os.Stat(c.sockDir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm())
	var one int
	require.NoError(t, open(t, c.URL()).QueryRow(ctx, q("SELECT 1")).Scan(&one))

	// TCP needs the password, which is kept 0600 in the data dir.
	pw, err := os.Stat(filepath.Join(long, "pg-password"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), pw.Mode().Perm())
	require.Contains(t, c.TCPURL(), "@127.0.0.1:"+strconv.Itoa(port)+"/app")
	require.NoError(t, open(t, c.TCPURL()).QueryRow(ctx, q("SELECT 1")).Scan(&one))
	_, err = db.Open(ctx, db.Options{URL: "postgres://strata:wrong@127.0.0.1:" + strconv.Itoa(port) + "/app?sslmode=disable"})
	require.Error(t, err)
	_, err = db.Open(ctx, db.Options{URL: "postgres://strata@127.0.0.1:" + strconv.Itoa(port) + "/app?sslmode=disable"})
	require.Error(t, err, "TCP without a password must be refused")
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestSocketDirFor(t *testing.T) {
	t.Parallel()
	require.Equal(t, "/var/lib/strata/pg-socket", socketDirFor("/var/lib/strata", 5432))
	long := "/" + strings.Repeat("x", 100)
	dir := socketDirFor(long, 5432)
	require.True(t, strings.HasPrefix(dir, "/tmp/strata-"), dir)
	require.LessOrEqual(t, len(socketPath(dir, 65535)), maxSocketPath)
	require.Equal(t, dir, socketDirFor(long, 5432), "stable across restarts")
	require.NotEqual(t, dir, socketDirFor(long+"y", 5432), "distinct per data dir")
}

func TestUnreachableDataDir(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "pgembed-test-*") // mode 0700
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	dataDir := filepath.Join(dir, "data")

	stranger := runAs{name: "stranger", uid: uint32(os.Geteuid()) + 4242, gid: 4242, groups: []uint32{4242}}
	err = checkReachable(dataDir, stranger)
	require.ErrorContains(t, err, "data dir "+dataDir+" is not reachable by user stranger because "+dir+" is mode 0700")
	require.ErrorContains(t, err, "--data-dir")
	require.NoError(t, checkReachable("/tmp/anything/below", stranger))

	if os.Geteuid() == 0 {
		// As root the cluster runs as postgres, which cannot enter dir: Start says so, and
		// creates nothing.
		_, err := Start(context.Background(), testOptions(t, dataDir))
		require.ErrorContains(t, err, "is not reachable by user postgres")
		_, serr := os.Stat(dataDir)
		require.True(t, os.IsNotExist(serr))
	}
}

func TestFindBinaries(t *testing.T) {
	t.Parallel()
	dir, err := FindBinaries()
	require.NoError(t, err, "these tests need PostgreSQL's binaries")
	b, err := inspectBinaries(context.Background(), dir)
	require.NoError(t, err)
	require.GreaterOrEqual(t, b.major, MinMajorVersion)
}

func TestFindBinariesNone(t *testing.T) {
	t.Parallel()
	_, err := findBinaries(context.Background(), searchPaths{path: "", versionedRoot: filepath.Join(t.TempDir(), "none")})
	require.ErrorIs(t, err, ErrNoBinaries)
	require.ErrorContains(t, err, "apt-get install -y postgresql")
	require.ErrorContains(t, err, "--database-url")
}

// fakeBin writes initdb, pg_ctl and a postgres that claims version in dir.
func fakeBin(t *testing.T, dir, version string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for _, name := range []string{"initdb", "pg_ctl"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\nexit 1\n"), 0o755))
	}
	script := "#!/bin/sh\necho 'postgres (PostgreSQL) " + version + "'\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "postgres"), []byte(script), 0o755))
}

// Not parallel: it writes fake executables and runs them at once, and a fork by a parallel
// test in that instant can hold the new file open for writing (ETXTBSY, Go issue 22315).
func TestFindBinariesVersions(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	fakeBin(t, filepath.Join(root, "13", "bin"), "13.4 (Debian 13.4-1)")
	fakeBin(t, filepath.Join(root, "9.6", "bin"), "9.6.24")

	_, err := findBinaries(ctx, searchPaths{versionedRoot: root})
	require.ErrorIs(t, err, ErrNoBinaries)
	require.ErrorContains(t, err, "PostgreSQL 13.4 in "+filepath.Join(root, "13", "bin")+" is too old")

	fakeBin(t, filepath.Join(root, "16", "bin"), "16.2")
	fakeBin(t, filepath.Join(root, "17", "bin"), "17beta1")
	b, err := findBinaries(ctx, searchPaths{versionedRoot: root})
	require.NoError(t, err)
	require.Equal(t, 17, b.major, "newest first")

	// PATH comes first, even when older.
	pathDir := t.TempDir()
	fakeBin(t, filepath.Join(pathDir, "real"), "15.1")
	require.NoError(t, os.Symlink(filepath.Join(pathDir, "real", "initdb"), filepath.Join(pathDir, "initdb")))
	b, err = findBinaries(ctx, searchPaths{path: pathDir, versionedRoot: root})
	require.NoError(t, err)
	require.Equal(t, filepath.Join(pathDir, "real"), b.dir, "symlinks on PATH are resolved")
	require.Equal(t, "15.1", b.version)
}

func TestDefaultDataDir(t *testing.T) {
	dir := DefaultDataDir()
	if os.Geteuid() == 0 {
		require.Equal(t, "/var/lib/strata", dir)
		return
	}
	t.Setenv("XDG_DATA_HOME", "/xdg")
	require.Equal(t, "/xdg/strata", DefaultDataDir())
}

func TestSettingNamesAreChecked(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, filepath.Join(t.TempDir(), "data"))
	opts.Settings = map[string]string{"fsync=off -c x": "y"}
	_, err := Start(context.Background(), opts)
	require.ErrorContains(t, err, "not a PostgreSQL parameter name")
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	require.Equal(t, `'a'\''b'`, shellQuote("a'b"))
	require.Equal(t, `'listen_addresses='`, shellQuote("listen_addresses="))
}

func TestURLs(t *testing.T) {
	t.Parallel()
	require.Equal(t, "host=/x/y port=5432 user=strata dbname=strata sslmode=disable", socketURL("/x/y", 5432, "strata"))
	require.Equal(t, `host='/x y/it\'s' port=5432 user=strata dbname=postgres sslmode=disable`, socketURL("/x y/it's", 5432, "postgres"))
	require.Equal(t, "postgres://strata:pw@[::1]:5433/app?sslmode=disable", tcpURL("::1", 5433, "pw", "app"))
}

func TestRunAsRootUsesPostgres(t *testing.T) {
	t.Parallel()
	r, err := resolveRunAs()
	require.NoError(t, err)
	if os.Geteuid() != 0 {
		require.Nil(t, r.cred)
		require.Equal(t, uint32(os.Geteuid()), r.uid)
		return
	}
	u, err := user.Lookup("postgres")
	require.NoError(t, err)
	require.Equal(t, u.Uid, strconv.Itoa(int(r.uid)))
	require.NotNil(t, r.cred)
}

// TestClusterVersionMismatch: a data dir made by another PostgreSQL major version than the
// binaries found is refused with both versions and the fix named, before anything starts.
func TestClusterVersionMismatch(t *testing.T) {
	t.Parallel()
	dir := testDir(t)
	c := startCluster(t, testOptions(t, dir))
	require.NoError(t, c.Stop(context.Background()))
	versionFile := filepath.Join(dir, "pg", "PG_VERSION")
	orig, err := os.ReadFile(versionFile)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(versionFile, []byte("99\n"), 0o600))
	_, err = Start(context.Background(), testOptions(t, dir))
	require.Error(t, err)
	require.Contains(t, err.Error(), "created by PostgreSQL 99")
	require.Contains(t, err.Error(), "apt-get install -y postgresql-99")
	require.NoError(t, os.WriteFile(versionFile, orig, 0o600))
	startCluster(t, testOptions(t, dir)) // and the right version starts again
}
