package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/pgtest"
)

// TestContexts is item 7 of issue 29: one CLI for two installations. Two servers each hold
// an org of their own, so `org list` tells which one a command reached. Contexts name the
// servers with their token files; use-context and --context switch between them; a flag
// beats the environment, which beats the context, which beats <data-dir>/admin-token. The
// file is owner-only and holds paths, never tokens.
func TestContexts(t *testing.T) {
	t.Parallel()
	tokA := "strata_" + strings.Repeat("ctxAlphaToken00", 3)
	tokB := "strata_" + strings.Repeat("ctxBetaToken000", 3)
	a := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + tokA}, "--database-url", pgtest.NewDatabaseURL(t), "--data-dir", dataDir(t))
	b := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + tokB}, "--database-url", pgtest.NewDatabaseURL(t), "--data-dir", dataDir(t))
	_, err := cli(t, []string{"STRATA_SERVER=" + a.url, "STRATA_TOKEN=" + tokA}, "org", "create", "alpha")
	require.NoError(t, err)
	_, err = cli(t, []string{"STRATA_SERVER=" + b.url, "STRATA_TOKEN=" + tokB}, "org", "create", "beta")
	require.NoError(t, err)

	dir := t.TempDir()
	fileA, fileB := filepath.Join(dir, "a-token"), filepath.Join(dir, "b-token")
	require.NoError(t, os.WriteFile(fileA, []byte(tokA+"\n"), 0o600))
	require.NoError(t, os.WriteFile(fileB, []byte(tokB+"\n"), 0o600))
	config := filepath.Join(dir, "xdg")
	// Neither STRATA_SERVER nor STRATA_TOKEN: whatever the test process has is blanked.
	env := []string{"XDG_CONFIG_HOME=" + config, "STRATA_SERVER=", "STRATA_TOKEN=", "STRATA_CA_CERT="}
	reached := func(extraEnv []string, args ...string) string {
		t.Helper()
		out, err := cli(t, append(append([]string(nil), env...), extraEnv...), append(args, "org", "list")...)
		require.NoError(t, err)
		switch {
		case strings.Contains(out, "alpha") && !strings.Contains(out, "beta"):
			return "a"
		case strings.Contains(out, "beta") && !strings.Contains(out, "alpha"):
			return "b"
		}
		t.Fatalf("org list names neither server alone:\n%s", out)
		return ""
	}

	out, err := cli(t, env, "config", "set-context", "a", "--server", a.url, "--token-file", fileA)
	require.NoError(t, err)
	require.Contains(t, out, `context "a" created`)
	_, err = cli(t, env, "config", "set-context", "b", "--server", b.url, "--token-file", fileB)
	require.NoError(t, err)
	_, err = cli(t, env, "config", "set-context", "c", "--token-file", fileB)
	requireFailsWith(t, err, `context "c" is new: give its --server URL`)

	path := filepath.Join(config, "strata", "config.yaml")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the contexts file is owner-only")
	body, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(body), fileA, "the file names the token file")
	require.NotContains(t, string(body), tokA, "and never holds the token")
	require.NotContains(t, string(body), tokB)

	_, err = cli(t, env, "config", "current-context")
	requireFailsWith(t, err, "no current context")
	out, err = cli(t, env, "config", "use-context", "a")
	require.NoError(t, err)
	require.Contains(t, out, `switched to context "a"`)
	out, err = cli(t, env, "config", "current-context")
	require.NoError(t, err)
	require.Equal(t, "a\n", out)
	out, err = cli(t, env, "config", "get-contexts")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.Regexp(t, `^CURRENT\s+NAME\s+SERVER\s+TOKEN-FILE`, lines[0])
	require.Regexp(t, `^\*\s+a\s+`+a.url+`\s+`+fileA, lines[1], "the current context is marked")
	require.Regexp(t, `^\s+b\s+`+b.url, lines[2])

	// The current context, then --context, pick the server and its token.
	require.Equal(t, "a", reached(nil))
	require.Equal(t, "b", reached(nil, "--context", "b"))
	_, err = cli(t, env, "config", "use-context", "b")
	require.NoError(t, err)
	require.Equal(t, "b", reached(nil))
	require.Equal(t, "a", reached(nil, "--context", "a"))

	// Precedence: the environment beats the context, a flag beats the environment.
	require.Equal(t, "a", reached([]string{"STRATA_SERVER=" + a.url, "STRATA_TOKEN=" + tokA}))
	require.Equal(t, "a", reached([]string{"STRATA_SERVER=" + a.url, "STRATA_TOKEN=" + tokA}, "--context", "b"))
	require.Equal(t, "b", reached([]string{"STRATA_SERVER=" + a.url, "STRATA_TOKEN=" + tokA}, "--server", b.url, "--token", tokB))
	// A context's token goes only to its own server.
	_, err = cli(t, append(env, "STRATA_SERVER="+a.url), "org", "list")
	requireFailsWith(t, err, `the server is `+a.url+` (from STRATA_SERVER), not context "b"'s `+b.url)
	_, err = cli(t, env, "--server", a.url, "org", "list")
	requireFailsWith(t, err, `(from --server)`)

	// The context beats <data-dir>/admin-token for the server, and without a token file the
	// admin-token file still gives the token.
	data := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(data, "admin-token"), []byte(tokA), 0o600))
	_, err = cli(t, env, "config", "set-context", "local", "--server", a.url)
	require.NoError(t, err)
	require.Equal(t, "a", reached(nil, "--context", "local", "--data-dir", data))
	out, err = cli(t, env, "--context", "local", "project", "backend-config", "net", "default")
	require.NoError(t, err)
	require.Contains(t, out, `"`+a.url+`/v1/state/net/default"`, "backend-config names the context's server")

	// An unreachable server says which context named it.
	_, err = cli(t, env, "config", "set-context", "gone", "--server", "http://127.0.0.1:1", "--token-file", fileA)
	require.NoError(t, err)
	_, err = cli(t, env, "--context", "gone", "org", "list")
	requireFailsWith(t, err, `cannot reach a strata server at http://127.0.0.1:1`)
	require.ErrorContains(t, err, `the server of context "gone"`)
	_, err = cli(t, env, "config", "delete-context", "gone")
	require.NoError(t, err)

	_, err = cli(t, env, "--context", "nosuch", "org", "list")
	requireFailsWith(t, err, `--context "nosuch" is not in `+path+` (contexts: a, b, local)`)

	// A file that others may write is refused: it decides where tokens go.
	require.NoError(t, os.Chmod(path, 0o664))
	_, err = cli(t, env, "org", "list")
	requireFailsWith(t, err, "is writable by others (mode 0664)")
	_, err = cli(t, env, "project", "backend-config", "net", "default")
	requireFailsWith(t, err, "is writable by others (mode 0664)", "printing a context's server is using it")
	_, err = cli(t, env, "docs", "man", t.TempDir())
	require.NoError(t, err, "a command that uses no server does not read the contexts")
	require.NoError(t, os.Chmod(path, 0o600))

	// Deleting the current context leaves none; the commands then use the defaults again.
	out, err = cli(t, env, "config", "delete-context", "b")
	require.NoError(t, err)
	require.Contains(t, out, "there is none now")
	_, err = cli(t, env, "config", "current-context")
	requireFailsWith(t, err, "no current context")
	out, err = cli(t, env, "config", "get-contexts", "-o", "json")
	require.NoError(t, err)
	require.Contains(t, out, `"name": "a"`)
	require.NotContains(t, out, `"name": "b"`)
}

// TestContextCACert: a context's ca-cert is trusted for its https server, and STRATA_CA_CERT
// (here a CA that does not match) wins over it, as a flag wins over both.
func TestContextCACert(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeSelfSigned(t, certFile, keyFile)
	otherCert, otherKey := filepath.Join(dir, "other.pem"), filepath.Join(dir, "other-key.pem")
	writeSelfSigned(t, otherCert, otherKey)
	token := "strata_" + strings.Repeat("ctxTLSToken0000", 3)
	s := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--database-url", pgtest.NewDatabaseURL(t),
		"--data-dir", dataDir(t), "--tls-cert", certFile, "--tls-key", keyFile)
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token), 0o600))
	env := []string{"XDG_CONFIG_HOME=" + filepath.Join(dir, "xdg"), "STRATA_SERVER=", "STRATA_TOKEN=", "STRATA_CA_CERT="}

	_, err := cli(t, env, "config", "set-context", "tls", "--server", s.url, "--token-file", tokenFile)
	require.NoError(t, err)
	_, err = cli(t, env, "--context", "tls", "org", "list")
	require.ErrorContains(t, err, "certificate", "without the context's CA the server is not trusted")
	_, err = cli(t, env, "config", "set-context", "tls", "--ca-cert", certFile)
	require.NoError(t, err)
	out, err := cli(t, env, "--context", "tls", "org", "list", "-o", "json")
	require.NoError(t, err)
	require.Contains(t, out, `"items"`)

	_, err = cli(t, append(env, "STRATA_CA_CERT="+otherCert), "--context", "tls", "org", "list")
	require.ErrorContains(t, err, "certificate", "the environment's CA wins over the context's")
	_, err = cli(t, append(env, "STRATA_CA_CERT="+otherCert), "--context", "tls", "--ca-cert", certFile, "org", "list")
	require.NoError(t, err, "and the flag over the environment")
}
