package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/pgembed"
	"github.com/stratahq/strata/internal/pgtest"
)

// TestSecretsEndToEnd (issue 22) through the binary: a category made secret is masked for a
// reader and in explain, history and audit, revealed to read-secrets; Salt without
// read-secrets gets _errors naming the scope, with it the plaintext; a replica without a key
// refuses to make a category secret naming the flag; a rotation to a new key while serving
// leaves the old key retirable, and a server holding only the new key (from a key command)
// reads everything; the server's log never holds a value.
func TestSecretsEndToEnd(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabaseURL(t)
	dir := t.TempDir()
	keyA, keyB := filepath.Join(dir, "a.key"), filepath.Join(dir, "b.key")
	_, err := cli(t, nil, "keys", "generate", keyA)
	require.NoError(t, err)
	out, err := cli(t, nil, "-o", "json", "keys", "generate", keyB)
	require.NoError(t, err)
	var genB struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(out), &genB))
	_, err = cli(t, nil, "keys", "generate", keyB)
	require.Error(t, err, "a key file is never overwritten")

	token := "strata_" + strings.Repeat("secretsE2Etok", 3)
	start := func(keys ...string) *server {
		args := []string{"--database-url", url, "--data-dir", dataDir(t)}
		for _, k := range keys {
			args = append(args, "--encryption-key-file", k)
		}
		return startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, args...)
	}
	s := start(keyA)
	env := []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + token}
	run := func(env []string, args ...string) string {
		t.Helper()
		out, errOut, err := cliStreams(t, env, args...)
		require.NoError(t, err, "strata %s: %s%s", strings.Join(args, " "), out, errOut)
		return out
	}
	file := filepath.Join(dir, "creds.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"db": {"user": "app", "password": "S3cr3t-Pa55-e2e"}}`), 0o600))
	run(env, "org", "create", "acme")
	run(env, "node", "create", "web01", "--org", "acme")
	run(env, "pillar", "set", "creds", "--node", "web01", "-f", file)
	require.NoError(t, os.WriteFile(file, []byte(`{"app": {"port": 8080}}`), 0o600))
	run(env, "pillar", "set", "app", "--org", "acme", "-f", file)
	// An encrypted project's state rotates with the pillars.
	run(env, "project", "create", "net", "--encrypt")
	require.NoError(t, os.WriteFile(file, []byte(`{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"l-1","outputs":{"pw":{"value":"S3cr3t-state-out","type":"string"}},"resources":[]}`), 0o600))
	run(env, "state", "push", "net", "default", file)

	// A replica sharing the database without a key refuses, naming the flag (it is not
	// ready: the database references key A, issue 28).
	keyless := startServerWaiting(t, "strata serving", false, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--database-url", url, "--data-dir", dataDir(t))
	_, errOut, err := cliStreams(t, []string{"STRATA_SERVER=" + keyless.url, "STRATA_TOKEN=" + token}, "pillar", "category", "set", "creds", "--secret")
	require.Error(t, err)
	require.Contains(t, errOut, "--encryption-key-file")

	_, errOut, err = cliStreams(t, env, "pillar", "category", "set", "creds", "--secret")
	require.NoError(t, err, errOut)
	require.Contains(t, errOut, "2 rows and history entries encrypted")
	require.Regexp(t, `creds\s+-\s+yes\s+1`, run(env, "pillar", "category", "get", "creds"))

	mk := func(name string, scopes ...string) []string {
		args := []string{"-o", "json", "token", "create", name}
		for _, sc := range scopes {
			args = append(args, "--scope", sc)
		}
		var tok struct{ Secret string }
		require.NoError(t, json.Unmarshal([]byte(run(env, args...)), &tok))
		return []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + tok.Secret}
	}
	reader := mk("reader", "pillars:read:*", "pillars:render:*", "audit:read:*")
	revealer := mk("revealer", "pillars:read:*", "pillars:render:*", "pillars:read-secrets:node/*")
	for _, args := range [][]string{
		{"pillar", "get", "creds", "--node", "web01"},
		{"pillar", "render", "web01"},
		{"pillar", "explain", "web01"},
		{"-o", "json", "pillar", "history", "creds", "--node", "web01"},
		{"-o", "json", "audit"},
	} {
		got := run(reader, args...)
		require.NotContains(t, got, "S3cr3t", args)
		if args[len(args)-1] != "audit" {
			require.Contains(t, got, "(secret)", args)
		}
	}
	require.Contains(t, run(revealer, "pillar", "get", "creds", "--node", "web01"), "S3cr3t-Pa55-e2e")
	require.Contains(t, run(revealer, "pillar", "render", "web01"), "S3cr3t-Pa55-e2e")
	require.Contains(t, run(revealer, "-o", "json", "pillar", "history", "creds", "--node", "web01"), "S3cr3t-Pa55-e2e")

	salt := func(s *server, env []string) map[string]any {
		t.Helper()
		var secret string
		for _, e := range env {
			if v, ok := strings.CutPrefix(e, "STRATA_TOKEN="); ok {
				secret = v
			}
		}
		req, err := http.NewRequest("GET", s.url+"/v1/salt/pillar/web01", nil)
		require.NoError(t, err)
		req.SetBasicAuth("salt", secret)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		require.Equal(t, 200, resp.StatusCode)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m), string(b))
		return m
	}
	renderOnly := mk("salt-old", "pillars:render:node/*")
	got := salt(s, renderOnly)
	require.Len(t, got, 1, "only _errors, never a masked pillar")
	require.Contains(t, got["_errors"].([]any)[0], "pillars:read-secrets:node/web01")
	require.Contains(t, got["_errors"].([]any)[0], "creds")
	master := mk("salt-master", "pillars:render:node/*", "pillars:read-secrets:node/*")
	require.Equal(t, "S3cr3t-Pa55-e2e", salt(s, master)["db"].(map[string]any)["password"])
	require.Contains(t, run(env, "salt", "config"), "pillars:read-secrets:node/*")

	// Rotation: the new key first (the old one still held), rotate while serving, retire.
	s.stop(t)
	keyless.stop(t)
	s2 := start(keyB, keyA)
	env2 := []string{"STRATA_SERVER=" + s2.url, "STRATA_TOKEN=" + token}
	var st struct {
		Primary   string
		Remaining int
		Retirable []string
	}
	require.NoError(t, json.Unmarshal([]byte(run(env2, "-o", "json", "keys", "status")), &st))
	require.Equal(t, genB.ID, st.Primary)
	require.Equal(t, 4, st.Remaining, "a pillar row and its history entry, a state and its version under the old key")
	require.Empty(t, st.Retirable)
	run(env2, "keys", "rotate", "--batch", "1")
	require.NoError(t, json.Unmarshal([]byte(run(env2, "-o", "json", "keys", "status")), &st))
	require.Zero(t, st.Remaining)
	require.Len(t, st.Retirable, 1)
	require.Contains(t, run(env2, "-o", "json", "audit"), "keys.rotate")
	s2.stop(t)
	// The old key retired; the new one fetched by a key command (as from a KMS).
	s3 := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--database-url", url, "--data-dir", dataDir(t), "--encryption-key-command", "cat "+keyB)
	require.Equal(t, "S3cr3t-Pa55-e2e", salt(s3, master)["db"].(map[string]any)["password"])
	require.Contains(t, run([]string{"STRATA_SERVER=" + s3.url, "STRATA_TOKEN=" + token}, "state", "pull", "net", "default"), "S3cr3t-state-out")

	// The acceptance's dump: the whole database, after secret pillars and an encrypted
	// project's state were written (and rotated), holds none of their plaintext.
	bindir, err := pgembed.FindBinaries()
	require.NoError(t, err)
	dump, err := exec.Command(filepath.Join(bindir, "pg_dump"), "--dbname", url).Output()
	require.NoError(t, err)
	require.Contains(t, string(dump), "(secret)", "the dump holds the masked shape")
	for _, v := range []string{"S3cr3t-Pa55-e2e", "S3cr3t-state-out"} {
		require.NotContains(t, string(dump), v)
	}

	for _, srv := range []*server{s, keyless, s2, s3} {
		require.NotContains(t, srv.stderr.String(), "S3cr3t", "the server's log")
	}
}
