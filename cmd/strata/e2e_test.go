package main_test

// End-to-end tests: they build the real strata binary once and drive it as a user would —
// `strata serve` on the embedded default and on a shared database URL, and the CLI against
// a running server.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/db/migrations"
	"github.com/stratahq/strata/internal/pgtest"
)

var binary string

func TestMain(m *testing.M) {
	if os.Getenv(mdweExecEnv) != "" {
		mdweExec() // never returns: this process becomes the command under MDWE
	}
	dir, err := os.MkdirTemp("", "strata-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "strata")
	// The CLI reads contexts from $XDG_CONFIG_HOME/strata/config.yaml: an empty one of the
	// tests' own, so the current context of whoever runs them never picks their server.
	if err := os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build strata:", err)
		os.Exit(1)
	}
	code := pgtest.Run(m)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// server is a running `strata serve`.
type server struct {
	cmd    *exec.Cmd
	url    string
	stderr *syncBuffer
	done   chan error
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// startServer runs `strata serve --listen 127.0.0.1:0 args…` and waits for /readyz.
func startServer(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	return startServerWaiting(t, "strata serving", true, env, args...)
}

// startServerEarly starts strata and returns as soon as it listens, before its database is
// open (it may be waiting for it).
func startServerEarly(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	return startServerWaiting(t, "strata listening; opening the database", false, env, args...)
}

// startServerWaiting starts strata and returns once it has logged msg (with the address) and,
// when ready is set, answers /readyz with 200.
func startServerWaiting(t *testing.T, msg string, ready bool, env []string, args ...string) *server {
	t.Helper()
	return startBinaryWaiting(t, binary, msg, ready, env, args...)
}

// startBinaryWaiting is startServerWaiting for another strata binary (an older release, in
// the version-skew test).
func startBinaryWaiting(t *testing.T, bin, msg string, ready bool, env []string, args ...string) *server {
	t.Helper()
	pr, pw := io.Pipe()
	s := &server{stderr: &syncBuffer{}, done: make(chan error, 1)}
	s.cmd = exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stderr = io.MultiWriter(s.stderr, pw)
	require.NoError(t, s.cmd.Start())
	go func() { s.done <- s.cmd.Wait(); pw.Close() }()
	t.Cleanup(func() { s.stop(t) })

	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			var line struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == msg {
				addr <- line.Addr
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		require.True(t, ok, "strata exited before serving:\n%s", s.stderr.String())
		s.url = "http://" + a
		if slices.Contains(args, "--tls-cert") {
			s.url = "https://" + a
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("strata did not start within 60s:\n%s", s.stderr.String())
	}
	if !ready {
		return s
	}
	deadline := time.Now().Add(30 * time.Second)
	probe := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // readiness only
	for {
		resp, err := probe.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		require.True(t, time.Now().Before(deadline), "not ready within 30s:\n%s", s.stderr.String())
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop(t *testing.T) {
	t.Helper()
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		require.NoError(t, err, "strata exits cleanly on SIGTERM:\n%s", s.stderr.String())
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		t.Fatalf("strata did not stop within 60s")
	}
}

// cli runs the strata binary as a client and returns stdout.
func cli(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%w: %s", err, errb.String())
	}
	return out.String(), nil
}

// dataDir makes a data directory the unprivileged PostgreSQL user can reach when the tests
// run as root (a plain t.TempDir is mode 0700).
func dataDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "strata-e2e-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// processAlive reports whether pid runs. A zombie counts as gone: it has exited, and on
// machines whose init does not reap orphans it may linger as a process-table entry.
func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

// TestEmbeddedDefault follows the README: serve with only --data-dir and --listen, use the
// admin token, restart, and leave no PostgreSQL process behind.
func TestEmbeddedDefault(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	start := time.Now()
	s := startServer(t, nil, "--data-dir", dir)
	t.Logf("embedded strata ready in %v", time.Since(start))

	fi, err := os.Stat(filepath.Join(dir, "admin-token"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	tokenBytes, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	require.NoError(t, err)
	token := strings.TrimSpace(string(tokenBytes))
	require.NotContains(t, s.stderr.String(), token, "the log never shows the token")
	require.Contains(t, s.stderr.String(), filepath.Join(dir, "admin-token"), "the log names the token file")

	c, err := client.New(s.url, token, nil)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = c.Orgs().Create(ctx, client.Object{Metadata: client.ObjectMeta{Name: "acme", Labels: map[string]string{"env": "prod"}}})
	require.NoError(t, err)

	pidFile, err := os.ReadFile(filepath.Join(dir, "pg", "postmaster.pid"))
	require.NoError(t, err)
	pgPid, err := strconv.Atoi(strings.SplitN(string(pidFile), "\n", 2)[0])
	require.NoError(t, err)
	require.True(t, processAlive(pgPid))

	s.stop(t)
	require.False(t, processAlive(pgPid), "stopping strata stops its PostgreSQL")

	// The CLI finds the token in the data dir; migrate status starts the cluster itself.
	out, err := cli(t, nil, "migrate", "status", "--data-dir", dir)
	require.NoError(t, err)
	require.Contains(t, out, "0001")
	require.Contains(t, out, "applied")

	s2 := startServer(t, nil, "--data-dir", dir)
	out, err = cli(t, nil, "org", "get", "acme", "--server", s2.url, "--data-dir", dir, "-o", "json")
	require.NoError(t, err, "the org created before the restart is there")
	var org client.Object
	require.NoError(t, json.Unmarshal([]byte(out), &org))
	require.Equal(t, "prod", org.Metadata.Labels["env"])
	tokenAfter, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	require.NoError(t, err)
	require.Equal(t, string(tokenBytes), string(tokenAfter), "a restart keeps the admin token")
	s2.stop(t)
}

// TestCrashRecovery: after strata is killed (no clean shutdown), the next start takes over
// the data dir again.
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	s := startServer(t, nil, "--data-dir", dir)
	orphan := postmasterPID(t, dir)
	require.NoError(t, s.cmd.Process.Kill())
	<-s.done
	require.True(t, processAlive(orphan), "killing strata leaves its PostgreSQL behind (what the next start must handle)")

	s2 := startServer(t, nil, "--data-dir", dir)
	require.False(t, processAlive(orphan), "the next start stopped the orphaned server")
	resp, err := http.Get(s2.url + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	current := postmasterPID(t, dir)
	s2.stop(t)
	require.False(t, processAlive(current), "no PostgreSQL left running")
}

// postmasterPID reads the running cluster's postmaster pid from its data dir.
func postmasterPID(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "pg", "postmaster.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	require.NoError(t, err)
	return pid
}

// TestTwoServersOneDatabase: two replicas started together on a fresh database both come up,
// the migrations are recorded once, and they serve the same data.
func TestTwoServersOneDatabase(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabaseURL(t)
	token := "strata_" + strings.Repeat("e2eBootstrapToken", 3)
	env := []string{"STRATA_BOOTSTRAP_TOKEN=" + token, "STRATA_DATABASE_URL=" + url}
	var a, b *server
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); a = startServer(t, env, "--data-dir", dataDir(t)) }()
	go func() { defer wg.Done(); b = startServer(t, env, "--data-dir", dataDir(t)) }()
	wg.Wait()
	require.NotNil(t, a)
	require.NotNil(t, b)

	ctx := context.Background()
	d, err := db.Open(ctx, db.Options{URL: url})
	require.NoError(t, err)
	defer d.Close()
	applied, err := d.AppliedMigrations(ctx)
	require.NoError(t, err)
	require.Len(t, applied, int(migrations.Latest()), "each migration recorded exactly once")

	ca, err := client.New(a.url, token, nil)
	require.NoError(t, err)
	cb, err := client.New(b.url, token, nil)
	require.NoError(t, err)
	_, err = ca.Orgs().Create(ctx, client.Object{Metadata: client.ObjectMeta{Name: "shared"}})
	require.NoError(t, err)
	got, err := cb.Orgs().Get(ctx, "shared")
	require.NoError(t, err)
	require.Equal(t, "shared", got.Metadata.Name)
	toks, err := cb.TokenList(ctx)
	require.NoError(t, err)
	require.Len(t, toks, 1, "one admin token however many replicas bootstrapped")

	out, err := cli(t, nil, "migrate", "status", "--database-url", url, "-o", "json")
	require.NoError(t, err)
	var list struct {
		Items []struct {
			Version int64  `json:"version"`
			Status  string `json:"status"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	rows := list.Items
	require.Len(t, rows, int(migrations.Latest()))
	for _, r := range rows {
		require.Equal(t, "applied", r.Status)
	}
}

// TestCLI drives the client commands against a running server.
func TestCLI(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabaseURL(t)
	token := "strata_" + strings.Repeat("cliBootstrapToken", 3)
	s := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--database-url", url, "--data-dir", dataDir(t))
	env := []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + token}

	out, err := cli(t, env, "org", "create", "acme", "--label", "env=prod", "--label", "team=net")
	require.NoError(t, err)
	require.Contains(t, out, "env=prod,team=net")
	_, err = cli(t, env, "org", "create", "acme")
	require.ErrorContains(t, err, "already exists")
	_, err = cli(t, env, "org", "create", "Bad_Name")
	require.ErrorContains(t, err, "/metadata/name")

	out, err = cli(t, env, "org", "get", "acme", "-o", "yaml")
	require.NoError(t, err)
	require.Contains(t, out, "kind: Org")
	require.Contains(t, out, "env: prod")

	out, err = cli(t, env, "org", "list", "-o", "json")
	require.NoError(t, err)
	var list client.ObjectList
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	require.Len(t, list.Items, 1)

	out, err = cli(t, env, "token", "create", "reader", "--scope", "orgs:read:*", "-o", "json")
	require.NoError(t, err)
	var tok client.Token
	require.NoError(t, json.Unmarshal([]byte(out), &tok))
	readerEnv := []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + tok.Secret}
	_, err = cli(t, readerEnv, "org", "list")
	require.NoError(t, err)
	_, err = cli(t, readerEnv, "org", "delete", "acme")
	requireFailsWith(t, err, "lacks scope orgs:delete:acme")
	out, err = cli(t, env, "token", "list")
	require.NoError(t, err)
	require.Contains(t, out, tok.ID)
	require.NotContains(t, out, tok.Secret)
	_, err = cli(t, env, "token", "revoke", tok.ID)
	require.NoError(t, err)
	_, err = cli(t, readerEnv, "org", "list")
	requireFailsWith(t, err, "a valid API token is required (--token or STRATA_TOKEN", "a revoked token stops working")

	out, err = cli(t, nil, "migrate", "up", "--database-url", url)
	require.NoError(t, err)
	require.Contains(t, out, "database schema is current")

	_, err = cli(t, []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN="}, "org", "list", "--data-dir", dataDir(t))
	require.ErrorContains(t, err, "no API token")
	_, err = cli(t, []string{"STRATA_SERVER=" + s.url}, "org", "list", "--token", "strata_wrongwrongwrongwrongwrongwrongwrongwrong")
	requireFailsWith(t, err, "an unknown, revoked or expired token is refused")
	_, err = cli(t, env, "org", "list", "--server", strings.TrimPrefix(s.url, "http://"))
	require.ErrorContains(t, err, "give a URL with its scheme")
	_, err = cli(t, env, "org", "create", "dup", "--label", "a=1", "--label", "a=2")
	require.ErrorContains(t, err, "given twice")

	out, err = cli(t, env, "org", "delete", "acme")
	require.NoError(t, err)
	require.Contains(t, out, "deleted")
	_, err = cli(t, env, "org", "get", "acme")
	requireFailsWith(t, err, "Org \"acme\" not found")

	out, err = cli(t, env, "audit", "--action", "token.")
	require.NoError(t, err)
	require.Contains(t, out, "token.create")

	out, err = cli(t, nil, "version")
	require.NoError(t, err)
	require.Contains(t, out, "schema version")
}

// TestBadConfig: clear errors for impossible configurations.
func TestBadConfig(t *testing.T) {
	t.Parallel()
	// A database that never becomes reachable: serve waits (by default forever), here for a
	// bounded time, then says so.
	cmd := exec.Command(binary, "serve", "--database-url", "postgres://127.0.0.1:1/none?connect_timeout=2", "--data-dir", dataDir(t), "--wait-for-database", "1s")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "strata must fail: %s", out)
	require.Contains(t, string(out), "connect to database")
	require.Contains(t, string(out), "--wait-for-database")
	require.Contains(t, string(out), "waiting for the database", "each attempt is logged")

	cmd = exec.Command(binary, "serve", "--tls-cert", "x.pem", "--data-dir", dataDir(t))
	out, err = cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "--tls-cert and --tls-key must be given together")

	// Settings that need no database are checked before the embedded cluster is created.
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--listen", "7400"}, "", "--listen"},
		{[]string{"--schema", "Bad-Schema"}, "", "--schema"},
		{[]string{"--keep-versions", "-1"}, "", "--keep-versions"},
		{[]string{"--max-body-bytes", "0"}, "", "--max-body-bytes"},
		{nil, "STRATA_BOOTSTRAP_TOKEN=short", "STRATA_BOOTSTRAP_TOKEN"},
		{nil, "STRATA_MAX_BODY_BYTES=8M", "STRATA_MAX_BODY_BYTES"},
	} {
		dir := dataDir(t)
		cmd := exec.Command(binary, append([]string{"serve", "--data-dir", dir}, c.args...)...)
		cmd.Env = os.Environ()
		if c.env != "" {
			cmd.Env = append(cmd.Env, c.env)
		}
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "%v %s must fail: %s", c.args, c.env, out)
		require.Contains(t, string(out), c.want)
		_, statErr := os.Stat(filepath.Join(dir, "pg"))
		require.True(t, os.IsNotExist(statErr), "no cluster was created for %v %s", c.args, c.env)
	}
}

// TestEmbeddedTCP: --embedded-listen opens a TCP port on the embedded cluster that demands the
// generated password.
func TestEmbeddedTCP(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	dir := dataDir(t)
	s := startServer(t, nil, "--data-dir", dir, "--embedded-listen", addr)
	pw, err := os.ReadFile(filepath.Join(dir, "pg-password"))
	require.NoError(t, err)
	fi, err := os.Stat(filepath.Join(dir, "pg-password"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	ctx := context.Background()
	good, err := db.Open(ctx, db.Options{URL: fmt.Sprintf("postgres://strata:%s@%s/strata?sslmode=disable", strings.TrimSpace(string(pw)), addr)})
	require.NoError(t, err)
	good.Close()
	_, err = db.Open(ctx, db.Options{URL: fmt.Sprintf("postgres://strata:wrong@%s/strata?sslmode=disable&connect_timeout=5", addr)})
	require.Error(t, err, "a wrong password is refused")
	s.stop(t)
}

// TestReadyzWarnsWithoutSession: with the session features off, /readyz still answers 200 but
// says that HTTP state locks do not exclude pg clients; with them on, it has no warning.
func TestReadyzWarnsWithoutSession(t *testing.T) {
	t.Parallel()
	for _, session := range []string{"off", ""} {
		url := pgtest.NewDatabaseURL(t)
		args := []string{"--database-url", url, "--data-dir", dataDir(t)}
		if session != "" {
			args = append(args, "--session-database-url", session)
		}
		s := startServer(t, nil, args...)
		resp, err := http.Get(s.url + "/readyz")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		if session == "off" {
			require.Contains(t, string(body), "do not exclude pg backend clients")
		} else {
			require.NotContains(t, string(body), "warnings", string(body))
		}
		s.stop(t)
	}
}

// TestTLS: serve HTTPS with --tls-cert/--tls-key; the CLI trusts a private CA with --ca-cert
// and refuses the server without it.
func TestTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeSelfSigned(t, certFile, keyFile)
	token := "strata_" + strings.Repeat("tlsBootstrapToken", 3)
	s := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--database-url", pgtest.NewDatabaseURL(t),
		"--data-dir", dataDir(t), "--tls-cert", certFile, "--tls-key", keyFile)
	require.True(t, strings.HasPrefix(s.url, "https://"))
	env := []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + token}
	_, err := cli(t, env, "org", "list")
	require.ErrorContains(t, err, "certificate", "an unknown CA is refused")
	out, err := cli(t, env, "org", "list", "--ca-cert", certFile, "-o", "json")
	require.NoError(t, err)
	require.Contains(t, out, `"items"`)

	// A renewed certificate (issue 18, item 8) is served without a restart: the old CA no
	// longer verifies, the new one does.
	old := filepath.Join(dir, "old.pem")
	require.NoError(t, os.Rename(certFile, old))
	time.Sleep(1100 * time.Millisecond) // modification times a second apart at least
	writeSelfSigned(t, certFile, keyFile)
	require.Eventually(t, func() bool {
		_, err := cli(t, env, "org", "list", "--ca-cert", old)
		return err != nil
	}, 10*time.Second, 200*time.Millisecond, "the old certificate is no longer served")
	_, err = cli(t, env, "org", "list", "--ca-cert", certFile)
	require.NoError(t, err, "the new certificate is served")
	require.Contains(t, s.stderr.String(), "TLS certificate reloaded")
}

func writeSelfSigned(t *testing.T, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "strata test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
}
