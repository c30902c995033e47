package main_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/db/migrations"
	"github.com/stratahq/strata/internal/pgtest"
)

// Keys as facts (issue 28): the database records the key ids its sealed values are wrapped
// with, and a replica that lacks any of them is not ready and refuses secrets, while plain
// data is still served; an embedded data dir restored from a backup never mints a key over
// them; a rotation with both keys keeps every replica ready.

// genKey writes a key file and returns its path and key id.
func genKey(t *testing.T, dir, name string) (string, string) {
	t.Helper()
	path := filepath.Join(dir, name)
	out, err := cli(t, nil, "-o", "json", "keys", "generate", path)
	require.NoError(t, err)
	var g struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(out), &g))
	require.Len(t, g.ID, 16)
	return path, g.ID
}

// problemOf answers method path on s with token and returns the status and problem body.
func problemOf(t *testing.T, s *server, token, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if m == nil {
		m = map[string]any{"raw": string(b)}
	}
	return resp.StatusCode, m
}

// waitReadyz polls /readyz until it answers want (30 s at most) and returns its body.
func waitReadyz(t *testing.T, s *server, want int) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := problemOf(t, s, "", "GET", "/readyz", "")
		if code == want {
			return body
		}
		require.True(t, time.Now().Before(deadline), "/readyz stays %d (%v), want %d:\n%s", code, body, want, s.stderr.String())
		time.Sleep(100 * time.Millisecond)
	}
}

// metricLine returns the strata_ready sample of s's /metrics.
func readyMetric(t *testing.T, s *server) string {
	t.Helper()
	resp, err := http.Get(s.url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "strata_ready{") {
			return l
		}
	}
	t.Fatalf("no strata_ready in /metrics")
	return ""
}

// requireKeysRefusal checks that a replica lacking key id is not ready for reason keys (in
// /readyz and in strata_ready alike), refuses a secret write and a secret read with a 503
// naming the id and the flag, and still serves plain data.
func requireKeysRefusal(t *testing.T, s *server, token, id string) {
	t.Helper()
	body := waitReadyz(t, s, 503)
	require.Equal(t, "keys", body["reason"], body)
	require.Contains(t, body["detail"], id)
	require.Contains(t, body["detail"], "--encryption-key-file")
	require.Contains(t, body["detail"], "--encryption-key-command")
	require.Equal(t, `strata_ready{reason="keys"} 0`, readyMetric(t, s), "the metric gives /readyz's reason")

	code, p := problemOf(t, s, token, "PUT", "/v1/nodes/web01/pillars/creds", `{"db": {"password": "other-Pa55"}}`)
	require.Equal(t, 503, code, p)
	require.Equal(t, "keys", p["reason"], p)
	require.Contains(t, p["detail"], id)
	require.Contains(t, p["detail"], "--encryption-key-file")
	code, p = problemOf(t, s, token, "GET", "/v1/nodes/web01/pillars/creds", "")
	require.Equal(t, 503, code, "an admin's read of a secret: %v", p)
	require.Contains(t, p["detail"], id)
	code, p = problemOf(t, s, token, "GET", "/v1/orgs/acme", "")
	require.Equal(t, 200, code, "plain data is still served: %v", p)
	code, p = problemOf(t, s, token, "PUT", "/v1/orgs/acme/pillars/app", `{"port": 8081}`)
	require.Contains(t, []int{200, 201}, code, "a plain pillar is still written: %v", p)
}

// TestKeysDivergentReplicaNotReady: a replica started with another key file, and one with no
// key, on a database whose values are sealed under key A are not ready (reason keys, naming
// A and the flags), answer 503 for secret reads and writes and 200 for plain data, and seal
// nothing under their own key; `keys status` on them says "missing", not "rotate". A rotation
// (B added, then first, then rotate) keeps replicas holding both keys ready, and a replica
// holding only B is ready once nothing references A.
func TestKeysDivergentReplicaNotReady(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabaseURL(t)
	dir := t.TempDir()
	keyA, idA := genKey(t, dir, "a.key")
	keyB, idB := genKey(t, dir, "b.key")
	token := "strata_" + strings.Repeat("keysFactsTok1", 3)
	benv := []string{"STRATA_BOOTSTRAP_TOKEN=" + token}
	start := func(ready bool, keys ...string) *server {
		args := []string{"--database-url", url, "--data-dir", dataDir(t)}
		for _, k := range keys {
			args = append(args, "--encryption-key-file", k)
		}
		return startServerWaiting(t, "strata serving", ready, benv, args...)
	}
	a := start(true, keyA)
	env := []string{"STRATA_SERVER=" + a.url, "STRATA_TOKEN=" + token}
	run := func(env []string, args ...string) string {
		t.Helper()
		out, errOut, err := cliStreams(t, env, args...)
		require.NoError(t, err, "strata %s: %s%s", strings.Join(args, " "), out, errOut)
		return out
	}
	file := filepath.Join(dir, "creds.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"db": {"password": "S3cr3t-keys-facts"}}`), 0o600))
	run(env, "org", "create", "acme")
	run(env, "node", "create", "web01", "--org", "acme")
	run(env, "pillar", "category", "set", "creds", "--secret")
	run(env, "pillar", "set", "creds", "--node", "web01", "-f", file)
	stateFile := filepath.Join(dir, "state.json")
	require.NoError(t, os.WriteFile(stateFile, []byte(`{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"l-1","outputs":{"pw":{"value":"S3cr3t-state","type":"string"}},"resources":[]}`), 0o600))
	run(env, "project", "create", "net", "--encrypt")
	run(env, "state", "push", "net", "default", stateFile)
	run(env, "project", "create", "plainnet")
	run(env, "state", "push", "plainnet", "default", stateFile)

	// Another key file: not ready, and nothing sealed under B.
	other := start(false, keyB)
	requireKeysRefusal(t, other, token, idA)
	otherEnv := []string{"STRATA_SERVER=" + other.url, "STRATA_TOKEN=" + token}
	// An encrypted project's state is a secret too: pull and push are refused naming A; a
	// plain project's state is served.
	for _, args := range [][]string{{"state", "pull", "net", "default"}, {"state", "push", "net", "default", stateFile}} {
		_, errOut, err := cliStreams(t, otherEnv, args...)
		require.Error(t, err, args)
		require.Contains(t, errOut, idA, args)
	}
	require.Contains(t, run(otherEnv, "state", "pull", "plainnet", "default"), "S3cr3t-state")
	out := run(otherEnv, "keys", "status")
	require.Contains(t, out, "missing: start this replica with the key file holding "+idA)
	require.NotContains(t, out, "strata keys rotate")
	_, errOut, err := cliStreams(t, otherEnv, "keys", "rotate")
	require.Error(t, err)
	require.Contains(t, errOut, idA)
	require.Contains(t, errOut, "--encryption-key-file")
	var st struct {
		Referenced []string
		Missing    []string
		Retirable  []string
		Remaining  int
	}
	require.NoError(t, json.Unmarshal([]byte(run(env, "-o", "json", "keys", "status")), &st))
	require.Equal(t, []string{idA}, st.Referenced, "the replica with another key sealed nothing")
	other.stop(t)

	// No key at all: the same, instead of a 409 for every secret.
	keyless := start(false)
	requireKeysRefusal(t, keyless, token, idA)
	keyless.stop(t)

	// Rotation: B added last, then first; every replica holding both stays ready.
	a.stop(t)
	both := start(true, keyA, keyB)
	first := start(true, keyB, keyA)
	fenv := []string{"STRATA_SERVER=" + first.url, "STRATA_TOKEN=" + token}
	require.NoError(t, os.WriteFile(file, []byte(`{"db": {"password": "S3cr3t-keys-facts-2"}}`), 0o600))
	run(fenv, "pillar", "set", "creds", "--node", "web01", "-f", file)
	waitReadyz(t, both, 200)
	// A replica still holding only A now lacks B, which a value is sealed under.
	onlyA := start(false, keyA)
	body := waitReadyz(t, onlyA, 503)
	require.Contains(t, body["detail"], idB)
	onlyA.stop(t)
	// Before the rotation, B alone is not enough: history still holds values under A.
	onlyB := start(false, keyB)
	body = waitReadyz(t, onlyB, 503)
	require.Contains(t, body["detail"], idA)
	onlyB.stop(t)
	run(fenv, "keys", "rotate")
	require.NoError(t, json.Unmarshal([]byte(run(fenv, "-o", "json", "keys", "status")), &st))
	require.Equal(t, []string{idB}, st.Referenced, "the old key is no longer referenced once everything is re-wrapped")
	require.Equal(t, []string{idA}, st.Retirable)
	both.stop(t)
	first.stop(t)
	retired := start(true, keyB)
	renv := []string{"STRATA_SERVER=" + retired.url, "STRATA_TOKEN=" + token}
	require.Contains(t, run(renv, "pillar", "get", "creds", "--node", "web01"), "S3cr3t-keys-facts-2")
}

// TestRestoreIntoNewDataDirDoesNotMintKey: a backup of an embedded installation with secret
// values, restored into a new data dir, does not start with a freshly minted key: serve exits 1
// naming the key id and the flag, and makes no key file; given the original key file it serves
// the secrets.
func TestRestoreIntoNewDataDirDoesNotMintKey(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	token := "strata_" + strings.Repeat("keysFactsTok2", 3)
	s := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--data-dir", dir)
	env := []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + token}
	for _, args := range [][]string{
		{"org", "create", "acme"},
		{"node", "create", "web01", "--org", "acme"},
		{"pillar", "category", "set", "creds", "--secret"},
	} {
		_, err := cli(t, env, args...)
		require.NoError(t, err)
	}
	file := filepath.Join(t.TempDir(), "creds.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"db": {"password": "S3cr3t-restored"}}`), 0o600))
	_, err := cli(t, env, "pillar", "set", "creds", "--node", "web01", "-f", file)
	require.NoError(t, err)
	out, err := cli(t, env, "-o", "json", "keys", "status")
	require.NoError(t, err)
	var st struct{ Primary string }
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	backup := filepath.Join(t.TempDir(), "strata.backup")
	_, err = cli(t, nil, "backup", "create", backup, "--data-dir", dir, "-q")
	require.NoError(t, err)
	s.stop(t)

	restored := dataDir(t)
	_, err = cli(t, nil, "backup", "restore", backup, "--data-dir", restored, "-q")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", restored)
	outb, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "serve refuses to start:\n%s", outb)
	require.Equal(t, 1, exit.ExitCode(), string(outb))
	require.Contains(t, string(outb), st.Primary)
	require.Contains(t, string(outb), "--encryption-key-file")
	require.NoFileExists(t, filepath.Join(restored, "encryption-key"), "no key minted")

	r := startServer(t, nil, "--data-dir", restored, "--encryption-key-file", filepath.Join(dir, "encryption-key"))
	out, err = cli(t, []string{"STRATA_SERVER=" + r.url, "STRATA_TOKEN=" + token}, "pillar", "get", "creds", "--node", "web01")
	require.NoError(t, err)
	require.Contains(t, out, "S3cr3t-restored")
}

// doctorRun runs strata doctor -o json and returns its checks by feature, stderr and error.
func doctorRun(t *testing.T, env []string, args ...string) (map[string]map[string]any, string, error) {
	t.Helper()
	out, errOut, err := cliStreams(t, env, append([]string{"doctor", "-o", "json"}, args...)...)
	var list struct {
		Items []map[string]any `json:"items"`
	}
	byFeature := map[string]map[string]any{}
	if json.Unmarshal([]byte(out), &list) == nil {
		for _, c := range list.Items {
			byFeature[c["feature"].(string)] = c
		}
	}
	return byFeature, errOut, err
}

const keysFeature = "encryption keys (secret pillars, encrypted projects)"

// TestDoctorBesideEmbeddedServerChecksKeys (issue 28): strata doctor runs beside a running
// strata on the embedded cluster (through its socket, as backup create does), checks the
// keys — the data dir's own key passes, another key file fails naming the id — and says so.
func TestDoctorBesideEmbeddedServerChecksKeys(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	token := "strata_" + strings.Repeat("keysFactsTok3", 3)
	s := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--data-dir", dir)
	env := []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + token}
	for _, args := range [][]string{{"org", "create", "acme"}, {"node", "create", "web01", "--org", "acme"}, {"pillar", "category", "set", "creds", "--secret"}} {
		_, err := cli(t, env, args...)
		require.NoError(t, err)
	}
	file := filepath.Join(t.TempDir(), "creds.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"db": {"password": "S3cr3t-doctor"}}`), 0o600))
	_, err := cli(t, env, "pillar", "set", "creds", "--node", "web01", "-f", file)
	require.NoError(t, err)

	checks, errOut, err := doctorRun(t, nil, "--data-dir", dir)
	require.NoError(t, err, errOut)
	require.Equal(t, true, checks[keysFeature]["ok"], checks)
	require.Equal(t, true, checks["serve (schema "+fmt.Sprint(migrations.Latest())+")"]["ok"], checks)

	other, otherID := genKey(t, t.TempDir(), "other.key")
	_, own := genKeyID(t, filepath.Join(dir, "encryption-key"))
	checks, errOut, err = doctorRun(t, nil, "--data-dir", dir, "--encryption-key-file", other)
	require.Error(t, err, "a replica with another key would not be ready")
	require.Equal(t, false, checks[keysFeature]["ok"], checks)
	require.Contains(t, checks[keysFeature]["needs"], own)
	require.NotContains(t, checks[keysFeature]["needs"], otherID)
	require.Contains(t, errOut, "--encryption-key-file")
	// The server was never disturbed.
	waitReadyz(t, s, 200)
}

// genKeyID returns a key file's id through strata doctor's sibling, keys generate's format:
// the key id is the first 8 bytes of the key's SHA-256.
func genKeyID(t *testing.T, path string) (string, string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	sum := sha256.Sum256(raw)
	return path, hex.EncodeToString(sum[:8])
}

// TestDoctorFreshDatabase (issue 28): on a fresh database strata doctor passes (serve creates
// the schema and migrates at start) and says so.
func TestDoctorFreshDatabase(t *testing.T) {
	t.Parallel()
	fresh := pgtest.NewEmptyDatabaseURL(t)
	checks, errOut, err := doctorRun(t, nil, "--database-url", fresh)
	require.NoError(t, err, errOut)
	serve := checks["serve (schema "+fmt.Sprint(migrations.Latest())+")"]
	require.Equal(t, true, serve["ok"], checks)
	require.Contains(t, serve["note"], "migrations")
}

// TestDoctorRoleWithoutRights (issue 28): for a role that may not use strata's schema strata
// doctor fails naming the schema's owner and the grant, not only PostgreSQL's "permission
// denied for schema".
func TestDoctorRoleWithoutRights(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabaseURL(t)
	target, err := pgconnParse(url)
	require.NoError(t, err)
	ctx := context.Background()
	admin, err := db.Open(ctx, db.Options{URL: url, MaxConns: 1})
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	var owner string
	require.NoError(t, admin.QueryRow(ctx, &db.Query{Name: "owner", Text: "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'strata'"}).Scan(&owner))
	role := fmt.Sprintf("norights_%s_%d", strings.TrimPrefix(target.database, "t_"), time.Now().UnixNano()%1_000_000)
	_, err = admin.Exec(ctx, &db.Query{Name: "role", Text: `DO $$ BEGIN EXECUTE format('CREATE ROLE %I LOGIN', '` + role + `'); END $$`})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), &db.Query{Name: "drop", Text: `DO $$ BEGIN EXECUTE format('DROP OWNED BY %I', '` + role + `'); EXECUTE format('DROP ROLE %I', '` + role + `'); END $$`})
	})
	checks, errOut, err := doctorRun(t, nil, "--database-url", target.as(role))
	require.Error(t, err)
	serve := checks["serve (schema "+fmt.Sprint(migrations.Latest())+")"]
	require.Equal(t, false, serve["ok"], checks)
	for _, want := range []string{"schema strata", owner, "GRANT " + owner + " TO " + role} {
		require.Contains(t, serve["needs"], want)
		require.Contains(t, errOut, want)
	}
}
