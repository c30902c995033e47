// Package pgembed starts, owns and stops a private PostgreSQL cluster built from the
// PostgreSQL binaries installed on the machine. It is how `strata serve` runs when no
// database URL is given (the embedded default), and how tests get a throwaway server: in both
// cases nobody has to install, configure or secure a database server first.
//
// # Layout
//
// Everything lives in Options.DataDir:
//
//	pg/           the cluster (PGDATA): initdb on the first start, reused afterwards
//	pg-socket/    the Unix socket directory, mode 0700, owned by the user running PostgreSQL
//	pg_hba.conf   client authentication, rewritten at every start (edits are lost)
//	pg.log        the server's log, appended to
//	pg.lock       locked (flock) while a Cluster runs, so two strata processes never share a cluster
//	pg-password   the strata role's password, mode 0600; only with Options.TCPListen
//
// # Security
//
// By default the server listens on no TCP port at all (listen_addresses is empty), only on a
// Unix socket, and trusts every local connection. That is safe because the socket directory
// is mode 0700: only the user running PostgreSQL (and root) can reach the socket. With
// Options.TCPListen the server also listens on that address, where it demands the superuser
// role "strata" log in with a generated password (scram-sha-256) kept in pg-password. That
// traffic is not encrypted (no TLS): keep TCPListen on loopback or a trusted network.
//
// # Running as root
//
// PostgreSQL refuses to run as root. When strata runs as root, pgembed runs initdb, pg_ctl
// and postgres as the "postgres" system user (created by Debian's postgresql package), and
// hands that user the directories it creates for the cluster (pg/, pg-socket/). The data
// directory and all its ancestors must be traversable by that user; when they are not (a data
// dir under /root, mode 0700), Start fails with an error saying so, rather than changing
// permissions of directories strata did not create. The default data dir for root is
// /var/lib/strata, which strata creates with mode 0711.
//
// # Socket path length
//
// A Unix socket path (<dir>/.s.PGSQL.<port>) may not exceed 107 bytes. When
// <DataDir>/pg-socket would be too long, the socket directory is /tmp/strata-<hash>, named by
// a hash of the data dir, so it is stable across restarts and distinct per data dir; it gets
// the same 0700 mode and owner, and Start refuses an existing one that has any other.
//
// # Crashes
//
// If strata dies without stopping the server (SIGKILL), the next Start finds the server of
// this data dir still running, proven by /proc (a postgres process of the cluster's user whose
// working directory is the data dir), and stops it with pg_ctl stop -m fast before starting
// afresh. If the server itself died, its postmaster.pid (and the socket's lock file) is
// stale: Start removes it once it has proven its pid is no server of this data dir (PostgreSQL
// itself would take a reused pid, or a zombie that nobody reaps, for a live server), and waits
// for the dead server's children to exit. A lock file (pg.lock) tells the two cases apart from
// a live strata that still owns the server: Start refuses a data dir another process holds.
//
// The server's log, pg.log, is appended to and never rotated.
package pgembed

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stratahq/strata/internal/db/dbadmin"
)

// superuser is the role initdb creates; strata connects as it.
const superuser = "strata"

// defaultPort names the socket file (.s.PGSQL.5432) when no TCP port is bound; with
// an empty listen_addresses no TCP port is opened, so it cannot clash with another server.
const defaultPort = 5432

// maxSocketPath is the longest Unix socket path Linux accepts (sun_path is 108 bytes with the
// terminating NUL).
const maxSocketPath = 107

// startTimeout bounds pg_ctl start and stop; a first start includes crash recovery, which can
// take a while on a big cluster.
const startTimeout = 5 * time.Minute

// Options configure Start. Only DataDir matters for most callers.
type Options struct {
	// DataDir holds the cluster in <DataDir>/pg (initdb on the first start, reused
	// afterwards) and the files around it; DefaultDataDir() when empty.
	DataDir string
	// Database is created on the first start and is what URL points to; "strata" when empty.
	Database string
	// Logger receives lifecycle messages; slog.Default() when nil.
	Logger *slog.Logger
	// Settings are extra server settings, passed as postgres -c name=value (tests pass
	// fsync=off, synchronous_commit=off, full_page_writes=off, max_connections=…).
	Settings map[string]string
	// NoSync makes initdb skip fsync (initdb --no-sync): for throwaway test clusters.
	NoSync bool
	// TCPListen, such as "127.0.0.1:5433", makes the server also listen on TCP with
	// scram-sha-256 password authentication (see Cluster.TCPURL). Empty: Unix socket only.
	TCPListen string
}

// Cluster is a running PostgreSQL server that this process started and owns.
type Cluster struct {
	logger   *slog.Logger
	bin      binaries
	run      runAs
	dataDir  string
	pgData   string
	realData string // pgData with symlinks resolved, as /proc shows a server's cwd
	sockDir  string
	port     int
	database string
	tcpURL   string

	lock    *os.File
	log     *os.File
	logPath string

	mu      sync.Mutex
	pid     int
	stopped bool
}

var settingNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

// DefaultDataDir is where strata keeps its data when no data dir is given: /var/lib/strata
// for root, otherwise $XDG_DATA_HOME/strata or ~/.local/share/strata (./strata-data when the
// home directory is unknown).
func DefaultDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/strata"
	}
	if x := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "strata")
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		return filepath.Join(home, ".local", "share", "strata")
	}
	return "strata-data"
}

// Start starts the cluster in opts.DataDir, creating it on first use, and returns once the
// server accepts connections and opts.Database exists. The caller owns the server and must
// Stop it; until then no other Start may use the same data dir.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	c, err := start(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("start embedded PostgreSQL: %w", err)
	}
	return c, nil
}

func start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	c := &Cluster{logger: opts.Logger, database: opts.Database, port: defaultPort}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if c.database == "" {
		c.database = "strata"
	}
	dataDir := opts.DataDir
	if dataDir == "" {
		dataDir = DefaultDataDir()
	}
	if c.dataDir, err = filepath.Abs(dataDir); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	c.pgData = filepath.Join(c.dataDir, "pg")
	for name := range opts.Settings {
		if !settingNameRE.MatchString(name) {
			return nil, fmt.Errorf("setting name %q is not a PostgreSQL parameter name", name)
		}
	}
	var tcpHost string
	if opts.TCPListen != "" {
		host, port, err := net.SplitHostPort(opts.TCPListen)
		if err != nil {
			return nil, fmt.Errorf("TCP listen address %q: %w", opts.TCPListen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 || host == "" {
			return nil, fmt.Errorf("TCP listen address %q: want host:port with a port from 1 to 65535", opts.TCPListen)
		}
		tcpHost, c.port = host, p
	}

	if c.run, err = resolveRunAs(); err != nil {
		return nil, err
	}
	if c.bin, err = findBinaries(ctx, defaultSearch()); err != nil {
		return nil, err
	}
	if err := checkReachable(c.dataDir, c.run); err != nil {
		return nil, err
	}
	if err := c.makeDataDir(); err != nil {
		return nil, err
	}
	if err := c.takeLock(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.release()
		}
	}()
	c.logPath = filepath.Join(c.dataDir, "pg.log")
	if c.log, err = os.OpenFile(c.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
		return nil, fmt.Errorf("open server log: %w", err)
	}
	if err := c.initCluster(ctx, opts.NoSync); err != nil {
		return nil, err
	}
	if c.realData, err = filepath.EvalSymlinks(c.pgData); err != nil {
		return nil, err
	}
	if c.sockDir, err = c.socketDir(); err != nil {
		return nil, err
	}
	hbaPath := filepath.Join(c.dataDir, "pg_hba.conf")
	if err := os.WriteFile(hbaPath, []byte(hbaConf(tcpHost != "")), 0o644); err != nil {
		return nil, fmt.Errorf("write %s: %w", hbaPath, err)
	}
	if err := c.clearLeftovers(ctx); err != nil {
		return nil, err
	}

	settings := map[string]string{
		"listen_addresses":        tcpHost,
		"port":                    strconv.Itoa(c.port),
		"unix_socket_directories": `"` + strings.ReplaceAll(c.sockDir, `"`, `""`) + `"`,
		"unix_socket_permissions": "0700",
		"hba_file":                hbaPath,
		"cluster_name":            "strata",
		// JIT compiles queries to machine code at run time; strata.service's
		// MemoryDenyWriteExecute=yes forbids writable-executable memory, so any statement
		// planned above jit_above_cost (large scans of the audit log, change log, state
		// versions) would fail with "failed to look up symbol". strata's queries gain little
		// from it anyway.
		"jit": "off",
	}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	if err := c.startServer(ctx, settings); err != nil {
		// pg_ctl may have been interrupted (ctx cancelled) after the server started: stop
		// whatever server of this data dir is running, so none outlives a failed Start.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = c.stopServer(sctx, "fast")
		return nil, err
	}
	defer func() {
		if err != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			_ = c.stopServer(sctx, "fast")
		}
	}()

	admin := c.AdminURL("postgres")
	exists, err := dbadmin.DatabaseExists(ctx, admin, c.database)
	if err != nil {
		return nil, err
	}
	if !exists {
		if err := dbadmin.CreateDatabase(ctx, admin, c.database, ""); err != nil {
			return nil, err
		}
		c.logger.Info("created database", "database", c.database)
	}
	if tcpHost != "" {
		if err := c.setupPassword(ctx, tcpHost); err != nil {
			return nil, err
		}
	}
	c.logger.Info("embedded PostgreSQL started", "data_dir", c.pgData, "socket_dir", c.sockDir,
		"pid", c.pid, "version", c.bin.version, "tcp", opts.TCPListen)
	return c, nil
}

// makeDataDir creates the data dir (mode 0711 when PostgreSQL runs as another user, who needs
// to traverse it, 0700 otherwise) and any missing parents (0755).
func (c *Cluster) makeDataDir() error {
	created, err := mkdirAll(c.dataDir, 0o755)
	if err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	for _, d := range created {
		mode := fs.FileMode(0o755)
		if d == c.dataDir {
			mode = 0o700
			if c.run.cred != nil {
				mode = 0o711
			}
		}
		if err := os.Chmod(d, mode); err != nil {
			return fmt.Errorf("create data dir: %w", err)
		}
	}
	return nil
}

// takeLock locks <DataDir>/pg.lock for the Cluster's lifetime. The kernel drops the lock when
// the process dies however it dies, so a held lock means a live strata owns the cluster, and a
// server found running without one was left behind by a dead strata.
func (c *Cluster) takeLock() error {
	path := filepath.Join(c.dataDir, "pg.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("data dir %s is in use by another strata process (%s is locked)", c.dataDir, path)
		}
		return fmt.Errorf("lock %s: %w", path, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	c.lock = f
	return nil
}

// release closes the log and drops the lock, as the death of this process would.
func (c *Cluster) release() {
	if c.log != nil {
		c.log.Close()
		c.log = nil
	}
	if c.lock != nil {
		c.lock.Close()
		c.lock = nil
	}
}

// initCluster creates <DataDir>/pg and runs initdb when the cluster does not exist yet, and
// otherwise checks that the binaries can run it.
func (c *Cluster) initCluster(ctx context.Context, noSync bool) error {
	st, err := os.Stat(c.pgData)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := ensureOwnedDir(c.pgData, 0o700, c.run); err != nil {
			return fmt.Errorf("create cluster directory: %w", err)
		}
	case err != nil:
		return err
	default:
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != c.run.uid {
			return fmt.Errorf("cluster directory %s is owned by uid %d, but PostgreSQL runs as %s (uid %d): "+
				"give it to that user (chown -R %s %s) or use another --data-dir", c.pgData, sys.Uid, c.run.name, c.run.uid, c.run.name, c.pgData)
		}
	}
	version, err := os.ReadFile(filepath.Join(c.pgData, "PG_VERSION"))
	if err == nil {
		return c.checkClusterVersion(ctx, strings.TrimSpace(string(version)))
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}

	c.logger.Info("initializing PostgreSQL cluster", "data_dir", c.pgData, "version", c.bin.version, "user", c.run.name)
	args := []string{"-D", c.pgData, "-U", superuser, "--auth-local=trust", "--auth-host=scram-sha-256",
		"--encoding=UTF8", "--no-instructions"}
	if noSync {
		args = append(args, "--no-sync")
	}
	// Byte-order collation ("C": fast, and immune to glibc collation changes) with Unicode
	// character classes; plain C where C.UTF-8 is not installed.
	out, err := c.command(ctx, "initdb", append(args, "--locale=C", "--lc-ctype=C.UTF-8")...).CombinedOutput()
	if err != nil && bytes.Contains(out, []byte(`invalid locale name "C.UTF-8"`)) {
		out, err = c.command(ctx, "initdb", append(args, "--locale=C")...).CombinedOutput()
	}
	if err != nil {
		return fmt.Errorf("initdb %s: %w: %s", c.pgData, err, tail(out, 2000))
	}
	return nil
}

// checkClusterVersion makes sure the binaries match the cluster's major version, switching
// to Debian's binaries of that version when the ones found first are another (after a
// distribution upgrade both are installed until the cluster is upgraded).
func (c *Cluster) checkClusterVersion(ctx context.Context, version string) error {
	major, err := strconv.Atoi(version)
	if err != nil {
		return fmt.Errorf("%s/PG_VERSION holds %q, not a major version", c.pgData, version)
	}
	if major == c.bin.major {
		return nil
	}
	b, err := binariesForMajor(ctx, debianRoot, major)
	if err != nil {
		return fmt.Errorf("cluster %s was created by PostgreSQL %d, but the binaries found are PostgreSQL %s (%s) and %v: "+
			"install PostgreSQL %d's server (apt-get install -y postgresql-%d), or upgrade the cluster with pg_upgrade",
			c.pgData, major, c.bin.version, c.bin.dir, err, major, major)
	}
	if b.major < MinMajorVersion {
		return fmt.Errorf("cluster %s was created by PostgreSQL %d; strata needs %d or newer: upgrade it with pg_upgrade", c.pgData, major, MinMajorVersion)
	}
	c.logger.Info("using the binaries matching the cluster's version", "dir", b.dir, "version", b.version)
	c.bin = b
	return nil
}

// socketDir prepares the socket directory: <DataDir>/pg-socket, or /tmp/strata-<hash> when
// that path would be too long for a socket.
func (c *Cluster) socketDir() (string, error) {
	dir := socketDirFor(c.dataDir, c.port)
	if err := ensureOwnedDir(dir, 0o700, c.run); err != nil {
		return "", fmt.Errorf("socket directory: %w", err)
	}
	return dir, nil
}

func socketDirFor(dataDir string, port int) string {
	dir := filepath.Join(dataDir, "pg-socket")
	if len(socketPath(dir, port)) <= maxSocketPath {
		return dir
	}
	sum := sha256.Sum256([]byte(dataDir))
	return filepath.Join("/tmp", "strata-"+hex.EncodeToString(sum[:8]))
}

func socketPath(dir string, port int) string {
	return filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(port))
}

func hbaConf(tcp bool) string {
	s := "# Written by strata at every start of its embedded PostgreSQL: edits are lost.\n" +
		"# Unix socket connections are trusted: the socket directory is mode 0700, so only the\n" +
		"# user running PostgreSQL (and root) can reach it.\n" +
		"local all all trust\n"
	if tcp {
		s += "# TCP connections log in with a password (strata's is in <data-dir>/pg-password).\n" +
			"host all all all scram-sha-256\n"
	}
	return s
}

// clearLeftovers deals with what a crash left behind: a server of this data dir still running
// (strata died; the lock file proves no live strata owns it) is stopped; lock files
// (postmaster.pid and the socket's) whose pid is provably no server of this data dir are
// removed, since PostgreSQL would take a pid reused by another process, or a zombie nobody
// reaps, for a live server; lingering children of a killed postmaster are waited for.
func (c *Cluster) clearLeftovers(ctx context.Context) error {
	pidFile := filepath.Join(c.pgData, "postmaster.pid")
	pid, err := readPostmasterPID(pidFile)
	if err != nil {
		return err
	}
	if pid != 0 && inspectProcess(pid, c.realData, c.run.uid) == procOurs {
		c.logger.Warn("a PostgreSQL server of this data dir is still running, left by a strata process that died; stopping it",
			"pid", pid, "data_dir", c.pgData)
		c.pid = pid
		if err := c.stopServer(ctx, "fast"); err != nil {
			return fmt.Errorf("stop the server left running: %w", err)
		}
	}
	for _, lockFile := range []string{pidFile, socketPath(c.sockDir, c.port) + ".lock"} {
		pid, err := readPostmasterPID(lockFile)
		if err != nil || pid == 0 {
			continue // PostgreSQL judges an unreadable lock file itself
		}
		if st := inspectProcess(pid, c.realData, c.run.uid); st == procGone || st == procOther {
			c.logger.Warn("removing stale lock file of a server that is no longer running", "file", lockFile, "pid", pid)
			if err := os.Remove(lockFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove stale lock file: %w", err)
			}
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		pids := processesIn(c.realData, c.run.uid)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v of an earlier server of %s are still running; stop them (kill %s) and start again",
				pids, c.pgData, strings.Trim(fmt.Sprint(pids), "[]"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startServer runs pg_ctl start -w, which returns once the server accepts connections.
// The server's output goes to pg.log through an inherited file descriptor, so the server
// needs no permission on the data dir itself.
func (c *Cluster) startServer(ctx context.Context, settings map[string]string) error {
	names := make([]string, 0, len(settings))
	for k := range settings {
		names = append(names, k)
	}
	slices.Sort(names)
	// pg_ctl hands -o to /bin/sh, so every word is shell-quoted.
	var o []string
	for _, k := range names {
		o = append(o, "-c", shellQuote(k+"="+settings[k]))
	}
	st, err := c.log.Stat()
	if err != nil {
		return err
	}
	logStart := st.Size()
	cmd := c.command(ctx, "pg_ctl", "start", "-D", c.pgData, "-w", "-s",
		"-t", strconv.Itoa(int(startTimeout/time.Second)), "-o", strings.Join(o, " "))
	cmd.Stdout, cmd.Stderr = c.log, c.log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pg_ctl start: %w; server log %s ends with:\n%s", err, c.logPath, c.logTail(logStart))
	}
	pid, err := readPostmasterPID(filepath.Join(c.pgData, "postmaster.pid"))
	if err != nil {
		return err
	}
	c.pid = pid
	return nil
}

// logTail returns the end of what the server logged since offset.
func (c *Cluster) logTail(offset int64) string {
	f, err := os.Open(c.logPath)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return "(" + err.Error() + ")"
	}
	b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	return tail(b, 3000)
}

func tail(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// setupPassword gives the superuser a password for TCP logins: generated on first use and
// kept in <DataDir>/pg-password (0600, readable by strata only).
func (c *Cluster) setupPassword(ctx context.Context, host string) error {
	path := filepath.Join(c.dataDir, "pg-password")
	b, err := os.ReadFile(path)
	password := strings.TrimSpace(string(b))
	if errors.Is(err, fs.ErrNotExist) || (err == nil && password == "") {
		buf := make([]byte, 32)
		_, _ = rand.Read(buf)
		password = hex.EncodeToString(buf)
		if err := os.WriteFile(path, []byte(password+"\n"), 0o600); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	} else if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if err := dbadmin.SetRolePassword(ctx, c.AdminURL("postgres"), superuser, password); err != nil {
		return err
	}
	switch host {
	case "*", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	c.tcpURL = tcpURL(host, c.port, password, c.database)
	return nil
}

// command prepares one of the PostgreSQL programs to run as the cluster's user, in its own
// session (a Ctrl-C meant for strata must not reach the server: strata stops it in order).
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin.dir, name), args...)
	cmd.Env = c.run.childEnv()
	cmd.Dir = c.pgData
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.run.cred, Setsid: true}
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// URL is the connection string for Options.Database over the Unix socket, as superuser
// "strata". It holds no password; it works only for processes that can reach the socket
// directory (this one).
func (c *Cluster) URL() string { return c.AdminURL(c.database) }

// AdminURL is URL for another database of the cluster, such as "postgres".
func (c *Cluster) AdminURL(database string) string {
	return socketURL(c.sockDir, c.port, database)
}

// TCPURL is a postgres:// URL with the superuser's password for Options.Database over
// Options.TCPListen, for clients that cannot use the socket; "" without TCPListen.
func (c *Cluster) TCPURL() string { return c.tcpURL }

// Stop stops the server with pg_ctl stop -m fast (clients are disconnected, transactions
// rolled back, a checkpoint written) and waits until no process of it remains. Once it has
// succeeded, further calls do nothing; after a failure (ctx expired, say) it may be retried.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	if err := c.stopServer(ctx, "fast"); err != nil {
		return fmt.Errorf("stop embedded PostgreSQL: %w", err)
	}
	c.stopped = true
	c.release()
	c.logger.Info("embedded PostgreSQL stopped", "data_dir", c.pgData)
	return nil
}

// stopServer runs pg_ctl stop in mode and waits for the postmaster to be gone.
func (c *Cluster) stopServer(ctx context.Context, mode string) error {
	out, err := c.command(ctx, "pg_ctl", "stop", "-D", c.pgData, "-m", mode, "-w", "-s",
		"-t", strconv.Itoa(int(startTimeout/time.Second))).CombinedOutput()
	if err != nil {
		// pg_ctl fails when there is no server to stop; that is success here.
		pid, perr := readPostmasterPID(filepath.Join(c.pgData, "postmaster.pid"))
		running := perr != nil || (pid != 0 && inspectProcess(pid, c.realData, c.run.uid) != procGone)
		if running {
			return fmt.Errorf("pg_ctl stop: %w: %s", err, tail(out, 2000))
		}
	}
	return waitGone(ctx, c.pid, c.realData, c.run.uid)
}

// waitGone waits until pid is no longer a process of the data dir. When this process is the
// postmaster's parent (strata is PID 1 of a container, so the orphaned postmaster was
// reparented to it), it also reaps the exited postmaster, which would otherwise stay a zombie.
func waitGone(ctx context.Context, pid int, realDir string, uid uint32) error {
	if pid == 0 {
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for inspectProcess(pid, realDir, uid) == procOurs {
		if time.Now().After(deadline) {
			return fmt.Errorf("postmaster %d is still running after pg_ctl stop", pid)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil) // ECHILD unless it is our child
	return nil
}

// StopOrphan stops, with pg_ctl stop -m immediate, a server left running in the cluster of
// dataDir (as laid out by Start) by a process that died without stopping it. It first waits
// for an initdb or pg_ctl start of that dead process to finish (they run on in their own
// session, and a server still starting has no postmaster.pid yet). It does nothing when no
// server runs there. The caller must know that no live process owns the cluster: the test
// helper uses it for clusters of test processes that are gone.
func StopOrphan(ctx context.Context, dataDir string) error {
	pgData := filepath.Join(dataDir, "pg")
	realData, err := filepath.EvalSymlinks(pgData)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	deadline := time.Now().Add(startTimeout)
	for pids := toolsIn(realData); len(pids) > 0; pids = toolsIn(realData) {
		if time.Now().After(deadline) {
			return fmt.Errorf("stop orphaned PostgreSQL in %s: processes %v are still at work there", pgData, pids)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	pid, err := readPostmasterPID(filepath.Join(pgData, "postmaster.pid"))
	if err != nil || pid == 0 {
		return err
	}
	run, err := resolveRunAs()
	if err != nil {
		return err
	}
	if inspectProcess(pid, realData, run.uid) == procGone {
		return nil
	}
	bin, err := findBinaries(ctx, defaultSearch())
	if err != nil {
		return err
	}
	c := &Cluster{bin: bin, run: run, pgData: pgData, realData: realData, pid: pid}
	if err := c.stopServer(ctx, "immediate"); err != nil {
		return fmt.Errorf("stop orphaned PostgreSQL in %s: %w", pgData, err)
	}
	return nil
}

// socketURL returns a key=value connection string (libpq and pgx both read it) for a
// database over the Unix socket in dir.
func socketURL(dir string, port int, database string) string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable",
		kvQuote(dir), port, kvQuote(superuser), kvQuote(database))
}

// tcpURL returns a postgres:// URL for a database over TCP with the superuser's password.
func tcpURL(host string, port int, password, database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(superuser, password),
		Host:     net.JoinHostPort(host, strconv.Itoa(port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// kvQuote quotes a key=value connection string value when it needs it.
func kvQuote(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n\r'\\") {
		return v
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}
