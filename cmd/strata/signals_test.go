package main_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
)

// TestSIGHUPReloads (issue 28, item 1): `systemctl reload strata` sends SIGHUP. The real
// binary keeps serving through it — same process, same embedded PostgreSQL, never orphaned —
// and picks up a TLS pair and a key file rewritten at their configured paths. The new
// certificate is given the old one's modification time, so only the signal (not the
// handshake-time file check) can have loaded it.
func TestSIGHUPReloads(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	tlsDir := t.TempDir()
	certFile, keyFile := filepath.Join(tlsDir, "cert.pem"), filepath.Join(tlsDir, "key.pem")
	writeSelfSigned(t, certFile, keyFile)
	encKey := filepath.Join(tlsDir, "encryption-key")
	out, err := cli(t, nil, "keys", "generate", encKey, "-o", "json")
	require.NoError(t, err)
	var first struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(out), &first))

	s := startServer(t, nil, "--data-dir", dir, "--tls-cert", certFile, "--tls-key", keyFile, "--encryption-key-file", encKey)
	pgPid := postmasterPID(t, dir)
	env := []string{"STRATA_SERVER=" + s.url}
	keyStatus := func() client.KeyStatus {
		t.Helper()
		out, err := cli(t, env, "keys", "status", "--data-dir", dir, "--ca-cert", certFile+".served", "-o", "json")
		require.NoError(t, err)
		var st client.KeyStatus
		require.NoError(t, json.Unmarshal([]byte(out), &st))
		return st
	}
	copyFile(t, certFile, certFile+".served")
	require.Equal(t, first.ID, keyStatus().Primary)

	// Rewrite the TLS pair and the key file in place, as a renewal and a key rollout do.
	oldCert, err := os.ReadFile(certFile)
	require.NoError(t, err)
	st, err := os.Stat(certFile)
	require.NoError(t, err)
	kst, err := os.Stat(keyFile)
	require.NoError(t, err)
	writeSelfSigned(t, certFile, keyFile)
	require.NoError(t, os.Chtimes(certFile, st.ModTime(), st.ModTime()))
	require.NoError(t, os.Chtimes(keyFile, kst.ModTime(), kst.ModTime()))
	next := encKey + ".next"
	out, err = cli(t, nil, "keys", "generate", next, "-o", "json")
	require.NoError(t, err)
	var second struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(out), &second))
	require.NoError(t, os.Rename(next, encKey))
	time.Sleep(1100 * time.Millisecond) // past the handshake-time check's once-a-second window
	require.Equal(t, string(oldCert), servedCert(t, s.url), "without a signal the old certificate is still served")

	require.NoError(t, s.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { c := servedCert(t, s.url); return c != "" && c != string(oldCert) }, 10*time.Second, 100*time.Millisecond,
		"SIGHUP loads the rewritten TLS pair:\n%s", s.stderr.String())
	copyFile(t, certFile, certFile+".served")
	require.Eventually(t, func() bool { return keyStatus().Primary == second.ID }, 10*time.Second, 100*time.Millisecond,
		"SIGHUP loads the rewritten key file:\n%s", s.stderr.String())
	require.Equal(t, []string{second.ID}, keyStatus().Keys)

	// The same process and the same PostgreSQL serve on; a second reload is as harmless.
	require.Nil(t, s.cmd.ProcessState, "strata is still running")
	require.True(t, processAlive(pgPid))
	require.Equal(t, pgPid, postmasterPID(t, dir))
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGHUP))
	// The reload logs the TLS pair, then the keys: wait for both lines (CI once read the log
	// between them).
	require.Eventually(t, func() bool {
		l := s.stderr.String()
		return strings.Contains(l, "reload: TLS certificate unchanged") && strings.Contains(l, "reload: encryption keys unchanged")
	}, 10*time.Second, 50*time.Millisecond, "the second reload logs both its checks:\n%s", s.stderr.String())
	logs := s.stderr.String()
	require.Contains(t, logs, "reload: TLS certificate changed")
	require.Contains(t, logs, "reload: encryption keys changed")
	probe := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // readiness only
	resp, err := probe.Get(s.url + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)

	s.stop(t)
	require.False(t, processAlive(pgPid), "stopping strata stops its PostgreSQL")
}

// servedCert returns the PEM of the certificate the server presents ("" when none is).
func servedCert(t *testing.T, url string) string {
	conn, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), &tls.Config{InsecureSkipVerify: true}) // to read the certificate only
	if err != nil {
		t.Logf("TLS handshake: %v", err)
		return ""
	}
	defer conn.Close()
	certs := conn.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return ""
	}
	return string(pemOf(certs[0]))
}

func pemOf(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o600))
}

// TestCredentialsDirectory (issue 28, item 6): under the unit's DynamicUser= strata cannot
// read root's files in /etc/strata, so the unit hands the TLS pair and the key files over as
// systemd credentials (LoadCredential=, copied into $CREDENTIALS_DIRECTORY). With nothing
// given by flag or environment, serve takes them from there by their names.
func TestCredentialsDirectory(t *testing.T) {
	t.Parallel()
	creds := t.TempDir()
	writeSelfSigned(t, filepath.Join(creds, "strata-tls-cert"), filepath.Join(creds, "strata-tls-key"))
	var keys [2]struct{ ID string }
	for i, name := range []string{"strata-encryption-key", "strata-encryption-key-previous"} {
		out, err := cli(t, nil, "keys", "generate", filepath.Join(creds, name), "-o", "json")
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal([]byte(out), &keys[i]))
	}
	dir := dataDir(t)
	s := startServerWaiting(t, "strata serving", false, []string{"CREDENTIALS_DIRECTORY=" + creds}, "--data-dir", dir)
	s.url = strings.Replace(s.url, "http://", "https://", 1)
	want, err := os.ReadFile(filepath.Join(creds, "strata-tls-cert"))
	require.NoError(t, err)
	require.Equal(t, string(want), servedCert(t, s.url), "the credential's certificate is served")
	out, err := cli(t, []string{"STRATA_SERVER=" + s.url}, "keys", "status", "--data-dir", dir, "--ca-cert", filepath.Join(creds, "strata-tls-cert"), "-o", "json")
	require.NoError(t, err)
	var st client.KeyStatus
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Equal(t, keys[0].ID, st.Primary, "the credential key encrypts")
	require.Equal(t, []string{keys[0].ID, keys[1].ID}, st.Keys, "the previous key decrypts")
	_, err = os.Stat(filepath.Join(dir, "encryption-key"))
	require.True(t, os.IsNotExist(err), "no key is minted in the data dir when the credentials hold keys")
}

// TestSignalsNeverOrphanPostgres (issue 28, item 1): a signal that ended strata without its
// shutdown left the embedded PostgreSQL running with PPID 1. SIGUSR1/SIGUSR2 are ignored (the
// replica serves on), SIGQUIT (and SIGINT, SIGTERM) go through the graceful shutdown: the
// process exits 0 and its PostgreSQL with it.
func TestSignalsNeverOrphanPostgres(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	s := startServer(t, nil, "--data-dir", dir)
	pgPid := postmasterPID(t, dir)
	for _, sig := range []syscall.Signal{syscall.SIGUSR1, syscall.SIGUSR2} {
		require.NoError(t, s.cmd.Process.Signal(sig))
	}
	time.Sleep(500 * time.Millisecond)
	resp, err := http.Get(s.url + "/readyz")
	require.NoError(t, err, "still serving after SIGUSR1/SIGUSR2:\n%s", s.stderr.String())
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.True(t, processAlive(pgPid))

	require.NoError(t, s.cmd.Process.Signal(syscall.SIGQUIT))
	select {
	case err := <-s.done:
		require.NoError(t, err, "SIGQUIT is a clean shutdown:\n%s", s.stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("strata did not stop on SIGQUIT:\n%s", s.stderr.String())
	}
	require.False(t, processAlive(pgPid), "its PostgreSQL stopped with it")
}
