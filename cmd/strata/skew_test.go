//go:build skew

package main_test

// The version-skew test (issue 28, item 3): a migration's `compatible-since` is a promise
// that every release from that version on stays correct on the schema it produces, and this
// test keeps the promise honest instead of trusting the header. It builds the oldest release
// the current schema declares compatible from the repository's own history and runs it beside
// the current binary on one database, through what users do: the README tour, a sync import,
// a secret pillar category, an encrypted Terraform project, a Terraform round and Salt
// renders. Every answer of the old release must be correct or a refusal (503, or a 403 that
// serves nothing), never a wrong 200 and never a 500. The release just before it, which the
// schema declares incompatible, must turn not ready.
//
// It is built only with the tag `skew` and run once per CI run by .ci/run
// (`go test -tags skew -count=1 -run TestVersionSkew ./cmd/strata/`), not in the suite's two
// -race passes: it builds a whole release and needs nothing the race detector would find.
// docs/operations.md ("Writing a migration") makes it part of adding any migration.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db/migrations"
	"github.com/stratahq/strata/internal/pgtest"
)

const migrationsDir = "internal/db/migrations"

// TestVersionSkew runs release R, the oldest one the current schema declares compatible (R
// is the highest compatible-since of the current migrations), beside the current binary, and
// checks that release R-1, which the schema declares incompatible, turns not ready once the
// current binary migrates. When R is the current schema version itself, no older release may
// run on it, and only the second part applies.
func TestVersionSkew(t *testing.T) {
	ms, err := migrations.Embedded()
	require.NoError(t, err)
	newest := ms[len(ms)-1].Version
	var bound int64
	for _, m := range ms {
		bound = max(bound, m.CompatibleSince)
	}
	top := repoTop(t)
	if bound < newest {
		commit := releaseCommit(t, top, bound)
		t.Logf("schema version %d is compatible since %d: running release %d (commit %s) beside this one", newest, bound, bound, commit)
		old := buildRelease(t, top, commit)
		skewScenario(t, old)
	}
	if bound > 1 {
		prev := releaseCommit(t, top, bound-1)
		t.Logf("release %d (commit %s) must turn not ready on schema version %d", bound-1, prev, newest)
		old := buildRelease(t, top, prev)
		t.Run("the previous release turns not ready", func(t *testing.T) { skewTurnsNotReady(t, old, bound-1) })
	}
}

// git runs git in the repository and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), errb.String())
	return strings.TrimSpace(string(out))
}

// repoTop finds the repository and fails — never skips — when its history is incomplete: the
// release to run is found in it.
func repoTop(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("git", "rev-parse", "--show-toplevel")
	out, err := cmd.Output()
	require.NoError(t, err, "the version-skew test builds an older release from this repository's git history: run it in a git clone of strata (with git on PATH), not in an exported tree")
	top := strings.TrimSpace(string(out))
	require.Equal(t, "false", git(t, top, "rev-parse", "--is-shallow-repository"),
		"the version-skew test builds an older release from this repository's history, and this clone is shallow: run `git fetch --unshallow` (or clone without --depth) and run it again")
	return top
}

// newestMigration is the highest migration version in commit's tree (0 for none).
func newestMigration(t *testing.T, top, commit string) int64 {
	t.Helper()
	var newest int64
	for _, name := range strings.Fields(git(t, top, "ls-tree", "--name-only", commit, migrationsDir+"/")) {
		base := filepath.Base(name)
		if len(base) > 5 && base[4] == '_' && strings.HasSuffix(base, ".sql") {
			if v, err := strconv.ParseInt(base[:4], 10, 64); err == nil {
				newest = max(newest, v)
			}
		}
	}
	return newest
}

// releaseCommit is release v: the last commit, on the first-parent line of HEAD (main's
// history of merges), whose newest migration is v — the parent of the oldest commit that
// brought a newer one, or HEAD itself when none did yet.
func releaseCommit(t *testing.T, top string, v int64) string {
	t.Helper()
	var after string // the oldest commit seen so far whose newest migration is above v
	for _, c := range strings.Fields(git(t, top, "rev-list", "--first-parent", "HEAD", "--", migrationsDir)) {
		if newestMigration(t, top, c) <= v {
			break
		}
		after = c
	}
	release := "HEAD"
	if after != "" {
		release = after + "^1"
	}
	commit := git(t, top, "rev-parse", "--verify", release+"^{commit}")
	require.Equal(t, v, newestMigration(t, top, commit),
		"no commit on HEAD's first-parent line has %04d as its newest migration (found %s): the history is incomplete, or two migrations landed in one commit", v, commit)
	return commit
}

// buildRelease builds strata from commit's tree (git archive into a temporary directory),
// with -trimpath so unchanged packages come from the build cache on later runs.
func buildRelease(t *testing.T, top, commit string) string {
	t.Helper()
	start := time.Now()
	dir := t.TempDir()
	archive := exec.Command("git", "archive", "--format=tar", commit)
	archive.Dir = top
	tar := exec.Command("tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	require.NoError(t, err)
	tar.Stdin = pipe
	var errb bytes.Buffer
	archive.Stderr, tar.Stderr = &errb, &errb
	require.NoError(t, tar.Start())
	require.NoError(t, archive.Run(), errb.String())
	require.NoError(t, tar.Wait(), errb.String())
	bin := filepath.Join(dir, "strata-"+commit[:12])
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/strata")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build the release at %s:\n%s", commit, out)
	t.Logf("built the release at %s in %s", commit[:12], time.Since(start).Round(time.Second))
	return bin
}

// knowsFlag reports whether bin's `serve` has flag.
func knowsFlag(t *testing.T, bin, flag string) bool {
	t.Helper()
	out, _ := exec.Command(bin, "serve", "--help").CombinedOutput()
	return strings.Contains(string(out), flag)
}

// skewTurnsNotReady starts release old on a fresh database (it migrates to its own version),
// then the current binary (it migrates further), and requires old's /readyz to turn 503.
func skewTurnsNotReady(t *testing.T, old string, oldVersion int64) {
	url := pgtest.NewEmptyDatabaseURL(t)
	env := []string{"STRATA_BOOTSTRAP_TOKEN=" + skewToken}
	o := startBinaryWaiting(t, old, "strata serving", true, env, "--database-url", url, "--data-dir", dataDir(t))
	startServer(t, env, "--database-url", url, "--data-dir", dataDir(t))
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, body := skewCall(t, o.url, "GET", "/readyz", "", "")
		if status == http.StatusServiceUnavailable {
			require.Contains(t, body, "upgrade strata", "release %d says why it is not ready", oldVersion)
			return
		}
		require.Equal(t, http.StatusOK, status, body)
		require.True(t, time.Now().Before(deadline), "release %d is still ready 30 s after the current schema was applied: %s", oldVersion, body)
		time.Sleep(100 * time.Millisecond)
	}
}

const skewToken = "strata_skewTestBootstrapToken00000000000000"

// skewCall sends one request (token as Bearer; basicUser set: as basic auth's password) and
// returns the status and body.
func skewCall(t *testing.T, base, method, path, token, body string, basicUser ...string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		if len(basicUser) > 0 {
			req.SetBasicAuth(basicUser[0], token)
		} else {
			req.Header.Set("Authorization", "Bearer "+token)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// skewJudge holds the rule for the old release's answers.
type skewJudge struct {
	t       *testing.T
	refused []string
}

// old judges one answer of the old release, as a subtest named what (so one run lists every
// wrong answer): a refusal (503: not ready, or the release's own refusal) is recorded and
// reported false — a 403 is not one, since an old release that wrongly denies what the current
// one allows is a wrong answer too; a
// 500 or any other status fails; a 2xx runs check, which requires the answer to be correct,
// and reports true (the request took effect).
func (j *skewJudge) old(what string, status int, body string, check func(t *testing.T, body string)) bool {
	j.t.Helper()
	accepted := false
	j.t.Run(what, func(t *testing.T) {
		switch {
		case status == http.StatusServiceUnavailable:
			j.refused = append(j.refused, fmt.Sprintf("%s: %d", what, status))
		case status >= 200 && status < 300:
			accepted = true
			check(t, body)
		default:
			require.Failf(t, "the old release answered neither correctly nor with a refusal", "%d %s", status, body)
		}
	})
	return accepted
}

// oldRefuses judges an answer that must be a refusal: want (the status the current release
// gives, e.g. 422 for invalid input) or a 503; a 2xx (the bad request took effect), a 500 or
// another status fails.
func (j *skewJudge) oldRefuses(what string, status int, body string, want int) {
	j.t.Helper()
	j.t.Run(what, func(t *testing.T) {
		if status == http.StatusServiceUnavailable {
			j.refused = append(j.refused, fmt.Sprintf("%s: %d", what, status))
			return
		}
		require.Equal(t, want, status, "the old release answers as the current one does, or with a 503: %s", body)
	})
}

func accept(*testing.T, string) {}

// jsonAt decodes body and walks the keys.
func jsonAt(t *testing.T, body string, keys ...string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(body), &v), body)
	for _, k := range keys {
		m, ok := v.(map[string]any)
		require.True(t, ok, "%q in %s", k, body)
		v = m[k]
	}
	return v
}

// skewScenario: the old release first (it migrates to its version, as the replicas of a
// running installation did), then the current binary migrates the database further; the old
// one must stay ready (the schema declares it compatible), and then both serve the scenario.
func skewScenario(t *testing.T, oldBin string) {
	j := &skewJudge{t: t}
	url := pgtest.NewEmptyDatabaseURL(t)
	keyFile := filepath.Join(t.TempDir(), "skew.key")
	_, err := cli(t, nil, "keys", "generate", keyFile)
	require.NoError(t, err)
	env := []string{"STRATA_BOOTSTRAP_TOKEN=" + skewToken}
	oldArgs := []string{"--database-url", url, "--data-dir", dataDir(t)}
	if knowsFlag(t, oldBin, "--encryption-key-file") {
		oldArgs = append(oldArgs, "--encryption-key-file", keyFile)
	}
	o := startBinaryWaiting(t, oldBin, "strata serving", true, env, oldArgs...)
	n := startServer(t, env, "--database-url", url, "--data-dir", dataDir(t), "--encryption-key-file", keyFile)
	status, body := skewCall(t, o.url, "GET", "/readyz", "", "")
	require.Equal(t, http.StatusOK, status, "the schema declares the old release compatible, so it stays ready beside it: %s", body)
	admin := skewToken

	// The README tour: writes through one replica are what the other reads.
	status, body = skewCall(t, o.url, "POST", "/v1/orgs", admin, `{"metadata":{"name":"acme","labels":{"env":"prod"}},"spec":{"displayName":"ACME"}}`)
	if !j.old("create an org", status, body, accept) {
		status, body = skewCall(t, n.url, "POST", "/v1/orgs", admin, `{"metadata":{"name":"acme","labels":{"env":"prod"}},"spec":{"displayName":"ACME"}}`)
		require.Equal(t, http.StatusCreated, status, body)
	}
	status, body = skewCall(t, n.url, "GET", "/v1/orgs/acme", admin, "")
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, "ACME", jsonAt(t, body, "spec", "displayName"))
	status, body = skewCall(t, n.url, "POST", "/v1/nodes", admin, `{"metadata":{"name":"web01","labels":{"role":"web"}},"spec":{"org":"acme"}}`)
	require.Equal(t, http.StatusCreated, status, body)
	status, body = skewCall(t, o.url, "GET", "/v1/nodes/web01", admin, "")
	j.old("get a node", status, body, func(t *testing.T, body string) {
		require.Equal(t, "web", jsonAt(t, body, "metadata", "labels", "role"), body)
	})
	status, body = skewCall(t, o.url, "GET", "/v1/nodes?labelSelector=role%3Dweb", admin, "")
	j.old("list nodes by label", status, body, func(t *testing.T, body string) {
		items := jsonAt(t, body, "items").([]any)
		require.Len(t, items, 1, body)
	})
	status, body = skewCall(t, o.url, "PUT", "/v1/orgs/acme/pillars/apache", admin, `{"apache":{"port":8080}}`)
	if !j.old("set an org pillar", status, body, accept) {
		status, body = skewCall(t, n.url, "PUT", "/v1/orgs/acme/pillars/apache", admin, `{"apache":{"port":8080}}`)
		require.Less(t, status, 300, body)
	}
	for _, s := range []*server{n, o} {
		status, body = skewCall(t, s.url, "GET", "/v1/nodes/web01/pillar", admin, "")
		check := func(t *testing.T, body string) { require.EqualValues(t, 8080, jsonAt(t, body, "apache", "port"), body) }
		if s == o {
			j.old("render a pillar", status, body, check)
			continue
		}
		require.Equal(t, http.StatusOK, status, body)
		check(t, body)
	}

	// A group made through the old release selects the node the current one made.
	status, body = skewCall(t, o.url, "POST", "/v1/orgs/acme/groups", admin, `{"metadata":{"name":"webservers"},"spec":{"selector":"role=web","priority":10}}`)
	if !j.old("create a group", status, body, accept) {
		status, body = skewCall(t, n.url, "POST", "/v1/orgs/acme/groups", admin, `{"metadata":{"name":"webservers"},"spec":{"selector":"role=web","priority":10}}`)
		require.Equal(t, http.StatusCreated, status, body)
	}
	status, body = skewCall(t, n.url, "GET", "/v1/orgs/acme/groups/webservers/members", admin, "")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"node":"web01"`)

	// A kind of one's own, registered on the current release: the old one stores valid
	// objects and refuses invalid ones.
	status, body = skewCall(t, n.url, "PUT", "/v1/kinds/Database", admin, `{"scope":"org","schema":{"type":"object","required":["engine"],"properties":{"engine":{"type":"string","enum":["postgres","mysql"]},"size":{"type":"integer","minimum":1,"maximum":100}}}}`)
	require.Equal(t, http.StatusCreated, status, body)
	status, body = skewCall(t, o.url, "POST", "/v1/orgs/acme/resources/Database", admin, `{"metadata":{"name":"main","labels":{"env":"prod"}},"spec":{"engine":"postgres","size":80}}`)
	if !j.old("create an object of a user kind", status, body, accept) {
		status, body = skewCall(t, n.url, "POST", "/v1/orgs/acme/resources/Database", admin, `{"metadata":{"name":"main","labels":{"env":"prod"}},"spec":{"engine":"postgres","size":80}}`)
		require.Equal(t, http.StatusCreated, status, body)
	}
	status, body = skewCall(t, n.url, "GET", "/v1/orgs/acme/resources/Database/main", admin, "")
	require.Equal(t, http.StatusOK, status, body)
	require.EqualValues(t, 80, jsonAt(t, body, "spec", "size"), body)
	status, body = skewCall(t, o.url, "POST", "/v1/orgs/acme/resources/Database", admin, `{"metadata":{"name":"bad"},"spec":{"engine":"oracle"}}`)
	j.oldRefuses("create an invalid object of a user kind", status, body, http.StatusUnprocessableEntity)

	// A sync import through the old release: the history entries it adds claim another
	// installation's actor and date, and the current release must be able to tell them from
	// its own (importedBy), or the claim reads as witnessed here.
	status, body = skewCall(t, n.url, "PUT", "/v1/pillars/global/app", admin, `{"port":80}`)
	require.Equal(t, http.StatusCreated, status, body)
	stream := `{"type":"header","version":1}` + "\n" +
		`{"type":"row","target":"global","category":"app","data":{"port":80},"history":[{"revision":1,"old":null,"new":{"port":1},"actor":"alice","at":"2001-02-03T04:05:06Z"}]}` + "\n"
	req, err := http.NewRequest("POST", o.url+"/v1/pillars:import?format=ndjson", strings.NewReader(stream))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	if j.old("sync import with history", resp.StatusCode, string(b), accept) {
		t.Run("the current release after the old one's import", func(t *testing.T) {
			status, body := skewCall(t, n.url, "GET", "/v1/pillars/global/app/history", admin, "")
			require.Equal(t, http.StatusOK, status, body)
			var hist struct {
				Items []map[string]any `json:"items"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &hist))
			var claimed int
			for _, h := range hist.Items {
				if h["actor"] == "alice" {
					claimed++
					require.NotEmpty(t, h["importedBy"], "an imported entry is marked as imported: %v", h)
				}
			}
			require.Equal(t, 1, claimed, body)
		})
	}

	// A watch through the old release sees what the current one writes.
	status, body = skewCall(t, n.url, "GET", "/v1/nodes", admin, "")
	require.Equal(t, http.StatusOK, status, body)
	rv := jsonAt(t, body, "resourceVersion").(string)
	t.Run("watch through the old release", func(t *testing.T) {
		req, err := http.NewRequest("GET", o.url+"/v1/nodes?watch=true&resourceVersion="+rv, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			j.refused = append(j.refused, "watch: 503")
			return
		}
		require.Equal(t, http.StatusOK, resp.StatusCode)
		status, body := skewCall(t, n.url, "POST", "/v1/nodes", admin, `{"metadata":{"name":"web02","labels":{"role":"web"}},"spec":{"org":"acme"}}`)
		require.Equal(t, http.StatusCreated, status, body)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var ev struct {
				Type   string `json:"type"`
				Object struct {
					Metadata struct{ Name string } `json:"metadata"`
				} `json:"object"`
			}
			require.NoError(t, json.Unmarshal(sc.Bytes(), &ev), sc.Text())
			require.Contains(t, []string{"ADDED", "BOOKMARK"}, ev.Type, sc.Text())
			if ev.Type == "ADDED" {
				require.Equal(t, "web02", ev.Object.Metadata.Name, "the first change after the list's version")
				return
			}
		}
		t.Fatalf("the watch ended without the change: %v", sc.Err())
	})

	// Tokens (made on the current release: the old one only has to honour them).
	mk := func(name string, scopes ...string) string {
		b, _ := json.Marshal(map[string]any{"name": name, "scopes": scopes})
		status, body := skewCall(t, n.url, "POST", "/v1/tokens", admin, string(b))
		require.Equal(t, http.StatusCreated, status, body)
		return jsonAt(t, body, "secret").(string)
	}
	reader := mk("reader", "pillars:read:*", "pillars:render:*")
	saltOnly := mk("salt-render", "pillars:render:node/*")
	master := mk("salt-master", "pillars:render:node/*", "pillars:read-secrets:node/*")

	// A secret category made on the current release.
	status, body = skewCall(t, n.url, "PUT", "/v1/pillar-categories/creds", admin, `{"secret":true}`)
	require.Less(t, status, 300, body)
	status, body = skewCall(t, n.url, "PUT", "/v1/nodes/web01/pillars/creds", admin, `{"db":{"password":"Skew-S3cret-one"}}`)
	require.Less(t, status, 300, body)
	plain := "Skew-S3cret-one"

	// Salt renders through the old release: the plaintext for the master, never a masked
	// "(secret)" Salt would apply, never the plaintext for a token without read-secrets.
	status, body = skewCall(t, o.url, "GET", "/v1/salt/pillar/web01", master, "", "salt")
	j.old("Salt render with read-secrets", status, body, func(t *testing.T, body string) {
		require.Equal(t, plain, jsonAt(t, body, "db", "password"), "Salt gets the value itself: %s", body)
	})
	status, body = skewCall(t, o.url, "GET", "/v1/salt/pillar/web01", saltOnly, "", "salt")
	j.old("Salt render without read-secrets", status, body, func(t *testing.T, body string) {
		require.NotContains(t, body, plain)
		require.NotContains(t, body, "(secret)", "a masked pillar would be applied by Salt as it stands: %s", body)
		require.NotNil(t, jsonAt(t, body, "_errors"), body)
	})
	// Reads through the old release: the admin sees the value, a reader the mask.
	status, body = skewCall(t, o.url, "GET", "/v1/nodes/web01/pillars/creds", admin, "")
	j.old("read a secret row with read-secrets", status, body, func(t *testing.T, body string) {
		require.Equal(t, plain, jsonAt(t, body, "data", "db", "password"), body)
	})
	status, body = skewCall(t, o.url, "GET", "/v1/nodes/web01/pillars/creds", reader, "")
	j.old("read a secret row without read-secrets", status, body, func(t *testing.T, body string) {
		require.NotContains(t, body, plain)
		require.Equal(t, "(secret)", jsonAt(t, body, "data", "db", "password"), body)
	})
	// A write through the old release is what everyone reads next, and stays secret.
	status, body = skewCall(t, o.url, "PUT", "/v1/nodes/web01/pillars/creds", admin, `{"db":{"password":"Skew-S3cret-two"}}`)
	if j.old("write a secret row", status, body, accept) {
		plain = "Skew-S3cret-two"
	}
	t.Run("the current release after the old one's write", func(t *testing.T) {
		status, body := skewCall(t, n.url, "GET", "/v1/nodes/web01/pillars/creds", admin, "")
		require.Equal(t, http.StatusOK, status, body)
		require.Equal(t, plain, jsonAt(t, body, "data", "db", "password"), "an acknowledged write is what the current release reads: %s", body)
		status, body = skewCall(t, n.url, "GET", "/v1/nodes/web01/pillars/creds", reader, "")
		require.Equal(t, http.StatusOK, status, body)
		require.NotContains(t, body, "Skew-S3cret", "the current release masks the row for a reader, whoever wrote it")
		status, body = skewCall(t, n.url, "GET", "/v1/salt/pillar/web01", master, "", "salt")
		require.Equal(t, http.StatusOK, status, body)
		require.Equal(t, plain, jsonAt(t, body, "db", "password"), body)
	})

	// An encrypted project made on the current release.
	status, body = skewCall(t, n.url, "PUT", "/v1/projects/vault", admin, `{"encryption":true}`)
	require.Equal(t, http.StatusCreated, status, body)
	state1 := `{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"skew-l","outputs":{"pw":{"value":"Skew-state-one","type":"string"}},"resources":[]}`
	status, body = skewCall(t, n.url, "POST", "/v1/state/vault/default", admin, state1, "strata")
	require.Less(t, status, 300, body)
	status, body = skewCall(t, o.url, "GET", "/v1/state/vault/default", admin, "", "strata")
	j.old("read an encrypted project's state", status, body, func(t *testing.T, body string) {
		require.JSONEq(t, state1, body, "the state Terraform gets is the plaintext")
	})
	state2 := strings.Replace(strings.Replace(state1, `"serial":1`, `"serial":2`, 1), "Skew-state-one", "Skew-state-two", 1)
	want := state1
	status, body = skewCall(t, o.url, "POST", "/v1/state/vault/default", admin, state2, "strata")
	if j.old("write an encrypted project's state", status, body, accept) {
		want = state2
	}
	t.Run("the current release after the old one's state write", func(t *testing.T) {
		status, body := skewCall(t, n.url, "GET", "/v1/state/vault/default", admin, "", "strata")
		require.Equal(t, http.StatusOK, status, body)
		require.JSONEq(t, want, body, "an acknowledged state write is what the current release serves")
	})

	// A Terraform round on a plain project: applied through the old release, read and applied
	// again through the current one, read through the old one.
	status, body = skewCall(t, n.url, "PUT", "/v1/projects/net", admin, "")
	require.Equal(t, http.StatusCreated, status, body)
	tfOld := newTF(t, httpBackendConfig(o.url, "net", "default", "skew-first"), "TF_HTTP_PASSWORD="+admin)
	tfOld.ok("init", "-no-color")
	tfOld.ok("apply", "-auto-approve", "-no-color")
	status, body = skewCall(t, n.url, "GET", "/v1/state/net/default", admin, "", "strata")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "skew-first")
	tfNew := newTF(t, httpBackendConfig(n.url, "net", "default", "skew-second"), "TF_HTTP_PASSWORD="+admin)
	tfNew.ok("init", "-no-color")
	tfNew.ok("apply", "-auto-approve", "-no-color")
	status, body = skewCall(t, o.url, "GET", "/v1/state/net/default", admin, "", "strata")
	j.old("read a plain state", status, body, func(t *testing.T, body string) {
		require.Contains(t, body, "skew-second")
	})
	plan, err := tfOld.run("plan", "-detailed-exitcode", "-no-color", "-var", "input=skew-second")
	require.NoError(t, err, "terraform through the old release sees the state the current one wrote:\n%s", plan)

	status, body = skewCall(t, o.url, "GET", "/readyz", "", "")
	require.Equal(t, http.StatusOK, status, body)
	t.Logf("refusals of the old release: %d %v", len(j.refused), j.refused)
}
