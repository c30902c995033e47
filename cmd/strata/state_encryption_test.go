package main_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/pgembed"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/secret"
)

// encryptedServer starts strata with a key file on a fresh database and returns it, its
// admin token, the database URL and the key file.
func encryptedServer(t *testing.T) (*server, string, string, string) {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "state.key")
	_, err := secret.GenerateKeyFile(keyFile)
	require.NoError(t, err)
	url := pgtest.NewDatabaseURL(t)
	token := "strata_" + strings.Repeat("tfEncryptToken00", 3)
	s := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--database-url", url, "--data-dir", dataDir(t), "--encryption-key-file", keyFile)
	return s, token, url, keyFile
}

// pgDumpAll is a plain-text pg_dump of the whole database.
func pgDumpAll(t *testing.T, url string) string {
	t.Helper()
	bindir, err := pgembed.FindBinaries()
	require.NoError(t, err)
	out, err := exec.Command(filepath.Join(bindir, "pg_dump"), "--dbname", url).Output()
	require.NoError(t, err)
	return string(out)
}

func randomSecret(prefix string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// TestTerraformEncryptedProject (issue 22 item 4): real terraform on an encrypted project
// through the http backend — init, apply, state pull, versions and restore, and
// terraform_remote_state with an outputs-only token — while a pg_dump of the whole database
// holds none of the state's secrets; the pg backend gets no credentials for it (409).
func TestTerraformEncryptedProject(t *testing.T) {
	t.Parallel()
	s, admin, url, _ := encryptedServer(t)
	env := []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + admin}
	out, err := cli(t, env, "project", "create", "vault", "--encrypt", "-o", "json")
	require.NoError(t, err)
	var p client.Project
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.True(t, p.Encryption)

	first, second := randomSecret("first-"), randomSecret("second-")
	up := newTF(t, upstreamConfig(s.url, "vault", first), "TF_HTTP_PASSWORD="+admin)
	up.ok("init", "-no-color")
	up.ok("apply", "-auto-approve", "-no-color")
	pulled := up.stdout("state", "pull")
	require.Contains(t, pulled, first, "state pull gives the plaintext")
	up2 := newTF(t, upstreamConfig(s.url, "vault", second), "TF_HTTP_PASSWORD="+admin)
	up2.ok("init", "-no-color")
	up2.ok("apply", "-auto-approve", "-no-color")
	require.Contains(t, up2.stdout("state", "pull"), second)

	dump := pgDumpAll(t, url)
	for _, v := range []string{first, second, "key-shared-with-downstream", "terraform_data"} {
		require.NotContains(t, dump, v, "pg_dump of the whole database")
	}
	require.Contains(t, dump, "strata:sv1:")

	// Versions and restore work as for any project.
	out, err = cli(t, env, "state", "versions", "vault", "default", "-o", "json")
	require.NoError(t, err)
	var vs struct{ Items []client.StateVersion }
	require.NoError(t, json.Unmarshal([]byte(out), &vs))
	require.Len(t, vs.Items, 2)
	v1, err := cli(t, env, "state", "versions", "vault", "default", "1")
	require.NoError(t, err)
	require.Contains(t, v1, first)
	_, err = cli(t, env, "state", "restore", "vault", "default", "1")
	require.NoError(t, err)
	plan, err := up.run("plan", "-detailed-exitcode", "-no-color")
	require.NoError(t, err, "the restored state matches the first configuration: no changes\n%s", plan)

	// terraform_remote_state with an outputs-only token.
	out, err = cli(t, env, "token", "create", "downstream", "--scope", "state:read-outputs:vault", "-o", "json")
	require.NoError(t, err)
	var tok client.Token
	require.NoError(t, json.Unmarshal([]byte(out), &tok))
	down := newTF(t, downstreamConfig(s.url, "vault"), "TF_VAR_upstream_token="+tok.Secret)
	down.ok("init", "-no-color")
	down.ok("apply", "-auto-approve", "-no-color")
	downOut := outputsOf(t, down)
	require.JSONEq(t, `"key-shared-with-downstream"`, string(downOut["api_key"].Value))
	require.Contains(t, string(downOut["endpoint"].Value), "db-")
	status, _, body := getState(t, s.url, "vault", tok.Secret)
	require.Equal(t, 200, status)
	require.NotContains(t, string(body), first)

	_, err = cli(t, env, "project", "credentials", "vault")
	require.Error(t, err)
	require.Contains(t, err.Error(), "is encrypted")
	admc, err := client.New(s.url, admin, nil)
	require.NoError(t, err)
	_, err = admc.ProjectCredentials(context.Background(), "vault")
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 409, ae.Status)
}

// TestTerraformProjectEncryptInPlace (issue 22 item 4): `strata project encrypt` converts an
// existing project with history; afterwards a pg_dump holds none of its secrets, terraform
// plan shows no changes, and terraform keeps applying.
func TestTerraformProjectEncryptInPlace(t *testing.T) {
	t.Parallel()
	s, admin, url, _ := encryptedServer(t)
	env := []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + admin}
	_, err := cli(t, env, "project", "create", "net")
	require.NoError(t, err)
	first, second := randomSecret("first-"), randomSecret("second-")
	up := newTF(t, upstreamConfig(s.url, "net", first), "TF_HTTP_PASSWORD="+admin)
	up.ok("init", "-no-color")
	up.ok("apply", "-auto-approve", "-no-color")
	up2 := newTF(t, upstreamConfig(s.url, "net", second), "TF_HTTP_PASSWORD="+admin)
	up2.ok("init", "-no-color")
	up2.ok("apply", "-auto-approve", "-no-color")
	require.Contains(t, pgDumpAll(t, url), first, "control: before the conversion the dump holds the secrets")

	out, errOut, err := cliStreams(t, env, "project", "encrypt", "net", "--batch", "1")
	require.NoError(t, err, errOut)
	require.Contains(t, out, "project net encrypted (3 states and versions converted)")
	require.Contains(t, errOut, "states and versions encrypted", "progress on stderr")

	dump := pgDumpAll(t, url)
	require.NotContains(t, dump, first)
	require.NotContains(t, dump, second)
	plan, err := up2.run("plan", "-detailed-exitcode", "-no-color")
	require.NoError(t, err, "exit 0 is no changes:\n%s", plan)
	require.Contains(t, plan, "No changes")
	third := randomSecret("third-")
	up3 := newTF(t, upstreamConfig(s.url, "net", third), "TF_HTTP_PASSWORD="+admin)
	up3.ok("init", "-no-color")
	up3.ok("apply", "-auto-approve", "-no-color")
	require.NotContains(t, pgDumpAll(t, url), third)
	out, err = cli(t, env, "project", "list")
	require.NoError(t, err)
	require.Regexp(t, `net\s+1\s+false\s+\S+\s+true`, out)
}

// TestStateDecryptOffline (issue 22 item 6): with the server stopped, `strata state decrypt`
// reads an encrypted state, and any version of it, straight from the database and from a
// backup file, with the key file; without the right key it fails naming the key it needs.
func TestStateDecryptOffline(t *testing.T) {
	t.Parallel()
	s, admin, url, keyFile := encryptedServer(t)
	ctx := context.Background()
	c, err := client.New(s.url, admin, nil)
	require.NoError(t, err)
	_, err = c.ProjectCreate(ctx, "vault", client.Project{Encryption: true})
	require.NoError(t, err)
	value := randomSecret("offline-")
	// Tabs, backslashes and newlines exercise the COPY text of a backup.
	v1 := `{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"l-off","outputs":{"pw":{"value":"` + value + `-1\t\\x","type":"string"}},"resources":[]}` + "\n"
	v2 := `{"version":4,"terraform_version":"1.11.4","serial":2,"lineage":"l-off","outputs":{"pw":{"value":"` + value + `-2","type":"string"}},"resources":[]}` + "\n"
	_, err = c.StatePush(ctx, "vault", "default", []byte(v1), "")
	require.NoError(t, err)
	_, err = c.StatePush(ctx, "vault", "default", []byte(v2), "")
	require.NoError(t, err)
	backup := filepath.Join(t.TempDir(), "strata.backup")
	_, errOut, err := cliStreams(t, nil, "backup", "create", backup, "--database-url", url, "-q")
	require.NoError(t, err, errOut)
	s.stop(t)

	decrypt := func(args ...string) (string, error) {
		out, errOut, err := cliStreams(t, nil, append([]string{"state", "decrypt", "--project", "vault", "--workspace", "default"}, args...)...)
		if err != nil {
			return out, &decryptError{err: err, stderr: errOut}
		}
		return out, nil
	}
	for _, from := range [][]string{{"--database-url", url}, {"--backup", backup}} {
		out, err := decrypt(append([]string{"--key-file", keyFile}, from...)...)
		require.NoError(t, err, "%v", from)
		require.Equal(t, v2, out, "%v: the current state", from)
		out, err = decrypt(append([]string{"--key-file", keyFile, "--version", "1"}, from...)...)
		require.NoError(t, err, "%v", from)
		require.Equal(t, v1, out, "%v: version 1", from)
	}
	file := filepath.Join(t.TempDir(), "plain.tfstate")
	_, err = decrypt("--key-file", keyFile, "--backup", backup, "--out", file)
	require.NoError(t, err)
	got, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, v2, string(got))

	other := filepath.Join(t.TempDir(), "other.key")
	k, err := secret.GenerateKeyFile(other)
	require.NoError(t, err)
	_, err = decrypt("--key-file", other, "--database-url", url)
	require.Error(t, err)
	require.Contains(t, err.Error(), "encryption key missing")
	require.Contains(t, err.Error(), k.ID, "names the keys it has")
	_, err = decrypt("--key-file", other, "--key-file", keyFile, "--backup", backup)
	require.NoError(t, err, "any of several key files may hold the key")
}

type decryptError struct {
	err    error
	stderr string
}

func (e *decryptError) Error() string { return e.err.Error() + ": " + e.stderr }
