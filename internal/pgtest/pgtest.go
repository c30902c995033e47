// Package pgtest gives tests real PostgreSQL databases: no mocks, and no silent skips, because
// what strata gets right or wrong is PostgreSQL's behaviour (locks, constraints, JSONB).
//
// # Server
//
// When STRATA_TEST_DATABASE_URL is set, tests use the server it points to (any database there;
// the role must be allowed to CREATE DATABASE). Otherwise each test process starts one
// throwaway cluster with internal/pgembed on first use, tuned for speed over durability
// (fsync, synchronous_commit and full_page_writes off), in a directory strata-pgtest-* that
// also records the owning process. That directory is made in /dev/shm when TMPDIR is unset and
// /dev/shm is a roomy tmpfs (see tempRoot: cloning a database is ~40 times faster in memory on
// some machines), otherwise in os.TempDir(). Main stops the cluster
// and removes the directory when the tests finish. A test process that is killed cannot clean
// up, so the first use in the next test process stops the clusters of dead owners (pg_ctl stop
// -m immediate) and removes their directories. Without PostgreSQL binaries and without the
// variable, every test that needs a database fails, naming both fixes.
//
// # Databases
//
// Migrating a database takes longer than copying one, so each server gets a template database
// tpl_<first 12 hex digits of migrations.Hash()>, migrated once: under an advisory lock on
// the server's postgres database, so that parallel test processes build it exactly once, it is
// built under a temporary name and renamed when complete, so a half-built template is never
// cloned. A changed migration set gets a new template. Nothing may stay connected to a template
// (PostgreSQL refuses to copy a database in use). Each test gets its own clone
// (t_<package>_<random>), created with STRATEGY FILE_COPY and dropped WITH (FORCE) when the
// test ends, so tests are independent and may run in parallel.
//
// Every package that uses pgtest needs
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/db/dbadmin"
	"github.com/stratahq/strata/internal/db/migrations"
	"github.com/stratahq/strata/internal/pgembed"
)

// EnvDatabaseURL names the environment variable that points tests at an existing server.
const EnvDatabaseURL = "STRATA_TEST_DATABASE_URL"

// EnvCitus, set to 1, is the Citus test mode (docs/scale-out.md): EnvDatabaseURL names a Citus
// coordinator (a postgres:// URL, with ?sslmode=disable for Terraform's pg backend) whose
// "postgres" database has the extension and the workers registered. Each test database is then
// created on the coordinator and on every worker, with the extension in each and the workers
// registered, and migrated (no template: a Citus database cannot be cloned). With the variable
// set and no Citus there, every test that needs a database fails; it never falls back.
const EnvCitus = "STRATA_TEST_CITUS"

// Citus reports whether the tests run in the Citus test mode.
func Citus() bool { return os.Getenv(EnvCitus) == "1" }

// dirPrefix names the per-process cluster directories.
const dirPrefix = "strata-pgtest-"

// ownerFile, in a cluster directory, holds "<pid> <start time>" of the test process that owns
// it; the start time tells a live owner from a new process that reused its pid.
const ownerFile = "owner"

// opTimeout bounds each administrative step (start, clone, drop).
const opTimeout = 2 * time.Minute

// state is the process-wide server and template, set up once on first use.
var state struct {
	mainCalled bool

	serverOnce sync.Once
	adminURL   string
	cluster    *pgembed.Cluster
	dir        string
	serverErr  error

	templateOnce sync.Once
	template     string
	templateErr  error
}

// Main runs the package's tests and then stops the throwaway cluster if this process started
// one. Call it from TestMain; it does not return.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main without the exit: it runs the tests, stops the throwaway cluster, and returns
// the exit code, for a TestMain that has cleanup of its own to do before exiting.
func Run(m *testing.M) int {
	state.mainCalled = true
	code := m.Run()
	if state.cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		if err := state.cluster.Stop(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
		cancel()
	}
	if state.dir != "" {
		if err := os.RemoveAll(state.dir); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: remove %s: %v\n", state.dir, err)
		}
	}
	return code
}

// AdminURL returns the URL of the test server's "postgres" database, starting the server on
// first use.
func AdminURL(t testing.TB) string {
	t.Helper()
	if !state.mainCalled {
		t.Fatalf("pgtest: this package's tests need func TestMain(m *testing.M) { pgtest.Main(m) }, " +
			"which stops the throwaway PostgreSQL server when they finish")
	}
	state.serverOnce.Do(func() { state.adminURL, state.serverErr = startServer() })
	if state.serverErr != nil {
		t.Fatalf("pgtest: %v", state.serverErr)
	}
	return state.adminURL
}

// NewDatabaseURL returns the URL of a fresh database cloned from the migrated template (schema
// "strata"), dropped when the test ends.
func NewDatabaseURL(t testing.TB) string {
	t.Helper()
	admin := AdminURL(t)
	if Citus() {
		return newCitusDatabase(t, admin, true)
	}
	state.templateOnce.Do(func() { state.template, state.templateErr = buildTemplate(admin) })
	if state.templateErr != nil {
		t.Fatalf("pgtest: %v", state.templateErr)
	}
	return newDatabase(t, admin, state.template)
}

// NewEmptyDatabaseURL returns the URL of a fresh database without strata's schema, for
// migration tests; it is dropped when the test ends.
func NewEmptyDatabaseURL(t testing.TB) string {
	t.Helper()
	if Citus() {
		return newCitusDatabase(t, AdminURL(t), false)
	}
	return newDatabase(t, AdminURL(t), "template0")
}

// NewDB opens a small pool (4 connections) on a fresh migrated database; both are closed and
// dropped when the test ends.
func NewDB(t testing.TB) *db.DB {
	t.Helper()
	url := NewDatabaseURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	d, err := db.Open(ctx, db.Options{URL: url, MaxConns: 4, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("pgtest: open test database: %v", err)
	}
	t.Cleanup(d.Close)
	return d
}

func newDatabase(t testing.TB, admin, template string) string {
	t.Helper()
	name := cloneName()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := dbadmin.CreateDatabase(ctx, admin, name, template); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := dbadmin.DropDatabase(ctx, admin, name); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	url, err := dbadmin.URLForDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return url
}

// cloneName is t_<package>_<8 random hex digits>: the package comes from the test binary's
// name (resource.test), so a leaked database says which package leaked it.
func cloneName() string {
	pkg := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, strings.ToLower(strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")))
	pkg = strings.Trim(pkg, "_")
	if pkg == "" {
		pkg = "x"
	}
	if len(pkg) > 40 {
		pkg = pkg[:40]
	}
	return "t_" + pkg + "_" + randomHex(4)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startServer returns the admin URL of the server tests use: the one named by the environment,
// or a throwaway cluster this process starts.
func startServer() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if Citus() && os.Getenv(EnvDatabaseURL) == "" {
		return "", fmt.Errorf("%s=1 needs %s, the URL of a Citus coordinator (deploy/citus/cluster.sh start prints one)", EnvCitus, EnvDatabaseURL)
	}
	if env := os.Getenv(EnvDatabaseURL); env != "" {
		admin, err := dbadmin.URLForDatabase(env, "postgres")
		if err != nil {
			return "", fmt.Errorf("%s: %w", EnvDatabaseURL, err)
		}
		if _, err := dbadmin.DatabaseExists(ctx, admin, "postgres"); err != nil {
			return "", fmt.Errorf("%s: the server's postgres database: %w", EnvDatabaseURL, err)
		}
		return admin, nil
	}
	if _, err := pgembed.FindBinaries(); err != nil {
		return "", noPostgres(err)
	}
	for _, root := range []string{os.TempDir(), shmDir} {
		removeLeftovers(ctx, root)
	}

	dir, err := os.MkdirTemp(tempRoot(), dirPrefix+"*")
	if err != nil {
		return "", err
	}
	// As root, PostgreSQL runs as the postgres user, which must traverse this directory.
	if err := os.Chmod(dir, 0o711); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	if err := writeOwner(dir); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	c, err := pgembed.Start(ctx, pgembed.Options{
		DataDir:  filepath.Join(dir, "data"),
		Database: "postgres",
		Logger:   slog.New(slog.DiscardHandler),
		NoSync:   true,
		Settings: map[string]string{
			"fsync":              "off",
			"synchronous_commit": "off",
			"full_page_writes":   "off",
			"max_connections":    "200",
		},
	})
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	state.cluster, state.dir = c, dir
	return c.AdminURL("postgres"), nil
}

// noPostgres explains how to give the tests a server.
func noPostgres(err error) error {
	return fmt.Errorf("no PostgreSQL to test against: %w.\nFix: apt-get install -y postgresql "+
		"(the tests then start a throwaway cluster themselves), or set %s to a server where the role may CREATE DATABASE",
		err, EnvDatabaseURL)
}

// buildTemplate makes sure the template for the embedded migrations exists and returns its
// name. Processes sharing the server serialize on an advisory lock and re-check under it.
func buildTemplate(admin string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	name := "tpl_" + migrations.Hash()[:12]
	if ok, err := dbadmin.DatabaseExists(ctx, admin, name); err != nil || ok {
		return name, err
	}
	err := dbadmin.WithAdvisoryLock(ctx, admin, "strata-pgtest-template", func(ctx context.Context) error {
		if ok, err := dbadmin.DatabaseExists(ctx, admin, name); err != nil || ok {
			return err
		}
		tmp := "tmp_" + name[len("tpl_"):] + "_" + randomHex(4)
		if err := dbadmin.CreateDatabase(ctx, admin, tmp, "template0"); err != nil {
			return err
		}
		if err := migrate(ctx, admin, tmp); err != nil {
			_ = dbadmin.DropDatabase(context.WithoutCancel(ctx), admin, tmp)
			return err
		}
		if err := dbadmin.RenameDatabase(ctx, admin, tmp, name); err != nil {
			_ = dbadmin.DropDatabase(context.WithoutCancel(ctx), admin, tmp)
			return err
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("build template database %s: %w", name, err)
	}
	return name, nil
}

func migrate(ctx context.Context, admin, database string) error {
	url, err := dbadmin.URLForDatabase(admin, database)
	if err != nil {
		return err
	}
	d, err := db.Open(ctx, db.Options{URL: url, MaxConns: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer d.Close()
	_, err = d.Migrate(ctx)
	return err
}

// shmDir is Linux's memory-backed file system, where it has one.
const shmDir = "/dev/shm"

// tempRoot is where the throwaway cluster lives: os.TempDir(), unless TMPDIR is unset and
// /dev/shm is a tmpfs with at least 1 GiB free. CREATE DATABASE writes a few hundred files,
// and on some virtual machines each file created on disk costs a millisecond even with fsync
// off: cloning a database takes ~300 ms on disk there and ~8 ms in memory. The free-space
// floor keeps small /dev/shm mounts (Docker's 64 MB) out of it.
func tempRoot() string {
	if os.Getenv("TMPDIR") != "" {
		return os.TempDir()
	}
	const tmpfsMagic = 0x01021994
	var fs syscall.Statfs_t
	if err := syscall.Statfs(shmDir, &fs); err != nil || fs.Type != tmpfsMagic || uint64(fs.Bavail)*uint64(fs.Bsize) < 1<<30 {
		return os.TempDir()
	}
	if err := syscall.Access(shmDir, 2 /* W_OK */); err != nil {
		return os.TempDir()
	}
	return shmDir
}

// writeOwner records this process in dir.
func writeOwner(dir string) error {
	pid := os.Getpid()
	return os.WriteFile(filepath.Join(dir, ownerFile), []byte(fmt.Sprintf("%d %s\n", pid, processStart(pid))), 0o644)
}

// ownerAlive reports whether the process recorded in dir still runs. A directory without an
// owner file is treated as alive for a minute, since its creator may be about to write it.
func ownerAlive(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		st, serr := os.Stat(dir)
		return serr == nil && time.Since(st.ModTime()) < time.Minute
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	start := processStart(pid)
	if start == "" {
		return false // gone, or a zombie
	}
	return len(f) < 2 || f[1] == start
}

// processStart returns pid's start time from /proc/<pid>/stat ("" when the process is gone or
// a zombie, "?" without /proc), so that a reused pid is not taken for the process recorded.
func processStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if _, serr := os.Stat("/proc/self/stat"); serr != nil {
			return "?"
		}
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "?"
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state); start time is field 22
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return ""
	}
	return f[19]
}

// removeLeftovers stops the clusters of test processes that died before Main could, and
// removes their directories under root. Failures are reported, never fatal: they concern
// earlier runs, not this one.
func removeLeftovers(ctx context.Context, root string) {
	dirs, _ := filepath.Glob(filepath.Join(root, dirPrefix+"*"))
	for _, dir := range dirs {
		if st, err := os.Lstat(dir); err != nil || !st.IsDir() || ownerAlive(dir) {
			continue
		}
		if err := pgembed.StopOrphan(ctx, filepath.Join(dir, "data")); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: leftover %s: %v\n", dir, err)
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: remove leftover %s: %v\n", dir, err)
		}
	}
}

// newCitusDatabase creates a database on the Citus coordinator behind admin and on each of
// its workers, sets Citus up in it (extension, coordinator host, workers) and, when migrated,
// applies strata's migrations; all copies are dropped when the test ends.
func newCitusDatabase(t testing.TB, admin string, migrated bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	workers, err := dbadmin.CitusWorkers(ctx, admin)
	if err != nil {
		t.Fatalf("pgtest: %s=1: %s: %v", EnvCitus, EnvDatabaseURL, err)
	}
	if len(workers) == 0 {
		t.Fatalf("pgtest: %s=1: the coordinator has no worker registered (SELECT citus_add_node(host, port))", EnvCitus)
	}
	coord, err := url.Parse(admin)
	if err != nil || coord.Scheme == "" {
		t.Fatalf("pgtest: %s=1 needs %s as a postgres:// URL: %v", EnvCitus, EnvDatabaseURL, err)
	}
	coordPort, _ := strconv.Atoi(coord.Port())
	if coordPort == 0 {
		coordPort = 5432
	}
	name := cloneName()
	admins := []string{admin}
	for _, w := range workers {
		u := *coord
		u.Host = net.JoinHostPort(w.Host, strconv.Itoa(w.Port))
		admins = append(admins, u.String())
	}
	var workerURLs []string
	for i, a := range admins {
		if err := dbadmin.CreateDatabase(ctx, a, name, "template0"); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			if err := dbadmin.DropDatabase(ctx, a, name); err != nil {
				t.Errorf("pgtest: %v", err)
			}
		})
		if i > 0 {
			u, err := dbadmin.URLForDatabase(a, name)
			if err != nil {
				t.Fatalf("pgtest: %v", err)
			}
			workerURLs = append(workerURLs, u)
		}
	}
	dbURL, err := dbadmin.URLForDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if err := dbadmin.CitusSetUp(ctx, dbURL, coord.Hostname(), coordPort, workerURLs, workers); err != nil {
		t.Fatalf("pgtest: Citus in %s: %v", name, err)
	}
	if migrated {
		if err := migrate(ctx, admin, name); err != nil {
			t.Fatalf("pgtest: migrate %s: %v", name, err)
		}
	}
	return dbURL
}
