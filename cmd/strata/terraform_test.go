package main_test

// End-to-end tests with the real terraform binary (1.11.4 on these machines) against the
// real strata binary: the http backend's whole flow, locking, versions and restore, and the
// pg backend on the same project. terraform_data resources need no provider download.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/pgtest"
)

// terraformBinary finds terraform or fails the test with the fix: state tests never skip.
func terraformBinary(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("terraform")
	require.NoError(t, err, "the state end-to-end tests drive the real terraform binary: put terraform (1.x) on PATH")
	return path
}

type tfRun struct {
	t   *testing.T
	bin string
	dir string
	env []string
}

func newTF(t *testing.T, config string, env ...string) *tfRun {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.tf"), []byte(config), 0o600))
	return &tfRun{t: t, bin: terraformBinary(t), dir: dir, env: env}
}

// command builds a terraform invocation in the run's directory, bounded in time.
func (r *tfRun) command(args ...string) (*exec.Cmd, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	cmd := exec.CommandContext(ctx, r.bin, args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), append([]string{"TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1"}, r.env...)...)
	return cmd, cancel
}

// run runs terraform and returns its combined output and error.
func (r *tfRun) run(args ...string) (string, error) {
	r.t.Helper()
	cmd, cancel := r.command(args...)
	defer cancel()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// stdout runs terraform and returns only its standard output (for `state pull`).
func (r *tfRun) stdout(args ...string) string {
	r.t.Helper()
	cmd, cancel := r.command(args...)
	defer cancel()
	out, err := cmd.Output()
	require.NoError(r.t, err, "terraform %s", strings.Join(args, " "))
	return string(out)
}

func (r *tfRun) ok(args ...string) string {
	r.t.Helper()
	out, err := r.run(args...)
	require.NoError(r.t, err, "terraform %s:\n%s", strings.Join(args, " "), out)
	return out
}

func httpBackendConfig(serverURL, project, workspace, input string) string {
	addr := serverURL + "/v1/state/" + project + "/" + workspace
	return fmt.Sprintf(`terraform {
  backend "http" {
    address        = %[1]q
    lock_address   = %[1]q
    unlock_address = %[1]q
    username       = "strata"
  }
}

variable "input" {
  type    = string
  default = %[2]q
}

resource "terraform_data" "x" {
  input = var.input
}

output "x" {
  value = terraform_data.x.output
}
`, addr, input)
}

func pgBackendConfig(connStr, project, input string) string {
	return fmt.Sprintf(`terraform {
  backend "pg" {
    conn_str    = %[1]q
    schema_name = %[2]q
  }
}

resource "terraform_data" "x" {
  input = %[3]q
}
`, connStr, project, input)
}

// stateServer starts strata on a fresh database and returns it, its admin token and the
// database URL (which the pg backend uses too).
func stateServer(t *testing.T) (*server, string, string) {
	t.Helper()
	url := pgtest.NewDatabaseURL(t)
	token := "strata_" + strings.Repeat("tfBootstrapToken0", 3)
	s := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--database-url", url, "--data-dir", dataDir(t))
	return s, token, url
}

func TestTerraformHTTPBackend(t *testing.T) {
	t.Parallel()
	s, token, _ := stateServer(t)
	ctx := context.Background()
	c, err := client.New(s.url, token, nil)
	require.NoError(t, err)
	_, err = c.ProjectPut(ctx, "net")
	require.NoError(t, err)

	tf := newTF(t, httpBackendConfig(s.url, "net", "default", "one"), "TF_HTTP_PASSWORD="+token)
	tf.ok("init", "-no-color")
	tf.ok("apply", "-auto-approve", "-no-color")
	require.NoError(t, os.WriteFile(filepath.Join(tf.dir, "main.tf"), []byte(httpBackendConfig(s.url, "net", "default", "two")), 0o600))
	out := tf.ok("plan", "-no-color")
	require.Contains(t, out, "1 to change")
	tf.ok("apply", "-auto-approve", "-no-color")

	vs, err := c.StateVersions(ctx, "net", "default")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(vs), 2, "versions listed after two applies")
	first := vs[0]
	for _, v := range vs {
		if v.N < first.N {
			first = v
		}
	}
	state, err := c.StatePull(ctx, "net", "default")
	require.NoError(t, err)
	require.Contains(t, string(state), `"two"`)

	// Restore the first version: the state goes back to "one" with a higher serial, and
	// terraform sees it as current.
	_, err = c.StateRestore(ctx, "net", "default", first.N, "")
	require.NoError(t, err)
	state, err = c.StatePull(ctx, "net", "default")
	require.NoError(t, err)
	require.Contains(t, string(state), `"one"`)
	out = tf.ok("output", "-no-color", "x")
	require.Contains(t, out, "one")

	// A lock held elsewhere: terraform fails naming the holder's lock ID.
	holder, err := c.StateLock(ctx, "net", "default", client.LockInfo{ID: "11111111-2222-3333-4444-555555555555", Operation: "OperationTypeApply", Who: "alice@ops", Version: "1.11.4", Created: time.Now().UTC()})
	require.NoError(t, err)
	out, err = tf.run("apply", "-auto-approve", "-no-color", "-lock-timeout=0s")
	require.Error(t, err, "apply must fail while the lock is held:\n%s", out)
	// Terraform ≤ 1.14 prints the holder's ID in "ID=…" but its own LockInfo below it;
	// GET …/lock names the holder in full.
	require.Contains(t, out, "ID="+holder.ID)
	st, err := c.StateLockStatus(ctx, "net", "default")
	require.NoError(t, err)
	require.True(t, st.Locked)
	require.Equal(t, holder.ID, st.Info.ID)
	require.Equal(t, "alice@ops", st.Info.Who)

	// force-unlock: refused (403) to a token without force rights, done for one with them.
	writer, err := c.TokenCreate(ctx, client.TokenCreateRequest{Name: "writer", Scopes: []string{"state:write:net"}})
	require.NoError(t, err)
	weak := newTF(t, httpBackendConfig(s.url, "net", "default", "one"), "TF_HTTP_PASSWORD="+writer.Secret)
	weak.ok("init", "-no-color")
	out, err = weak.run("force-unlock", "-force", "-no-color", holder.ID)
	require.Error(t, err, out)
	require.Contains(t, out, "403")
	st, err = c.StateLockStatus(ctx, "net", "default")
	require.NoError(t, err)
	require.True(t, st.Locked, "a refused force-unlock leaves the lock")
	tf.ok("force-unlock", "-force", "-no-color", holder.ID)
	st, err = c.StateLockStatus(ctx, "net", "default")
	require.NoError(t, err)
	require.False(t, st.Locked)
	audit, err := c.AuditList(ctx, client.AuditListOptions{Action: "state.force-unlock"})
	require.NoError(t, err)
	require.NotEmpty(t, audit.Items, "force-unlock is audited")

	tf.ok("apply", "-auto-approve", "-no-color")
	out = tf.ok("destroy", "-auto-approve", "-no-color")
	require.Contains(t, out, "1 destroyed")
	ws, err := c.WorkspaceList(ctx, "net")
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.False(t, ws[0].Lock != nil && ws[0].Lock.Locked, "terraform released its lock")
}

func TestTerraformPGBackendSharesProject(t *testing.T) {
	t.Parallel()
	s, token, url := stateServer(t)
	ctx := context.Background()
	c, err := client.New(s.url, token, nil)
	require.NoError(t, err)
	_, err = c.ProjectPut(ctx, "shared")
	require.NoError(t, err)

	// strata (http backend) writes the default workspace …
	viaHTTP := newTF(t, httpBackendConfig(s.url, "shared", "default", "from-http"), "TF_HTTP_PASSWORD="+token)
	viaHTTP.ok("init", "-no-color")
	viaHTTP.ok("apply", "-auto-approve", "-no-color")

	// … and a pg backend client on the same project sees it.
	viaPG := newTF(t, pgBackendConfig(url, "shared", "from-http"))
	viaPG.ok("init", "-no-color")
	out := viaPG.ok("state", "list", "-no-color")
	require.Contains(t, out, "terraform_data.x")
	pulled := viaPG.ok("state", "pull")
	require.Contains(t, pulled, "from-http")

	// The pg client writes a new workspace; strata sees it, with a version recorded.
	viaPG.ok("workspace", "new", "-no-color", "staging")
	viaPG.ok("apply", "-auto-approve", "-no-color")
	ws, err := c.WorkspaceList(ctx, "shared")
	require.NoError(t, err)
	var names []string
	for _, w := range ws {
		names = append(names, w.Name)
	}
	require.Contains(t, names, "staging")
	vs, err := c.StateVersions(ctx, "shared", "staging")
	require.NoError(t, err)
	require.NotEmpty(t, vs, "writes by pg clients are versioned too")
	require.Equal(t, "pg", vs[len(vs)-1].Source)

	// An HTTP lock keeps the pg client out.
	held, err := c.StateLock(ctx, "shared", "default", client.LockInfo{ID: "aaaaaaaa-0000-0000-0000-000000000001", Operation: "OperationTypeApply", Who: "bob@ci", Created: time.Now().UTC()})
	require.NoError(t, err)
	viaPG.ok("workspace", "select", "-no-color", "default")
	out, err = viaPG.run("apply", "-auto-approve", "-no-color", "-lock-timeout=0s")
	require.Error(t, err, "the pg client must not get in while the HTTP lock is held:\n%s", out)
	require.Contains(t, strings.ToLower(out), "already locked")
	require.NoError(t, c.StateUnlock(ctx, "shared", "default", held.ID, false))
	viaPG.ok("apply", "-auto-approve", "-no-color")

	b, err := json.Marshal(ws)
	require.NoError(t, err)
	t.Logf("workspaces: %s", b)
}

// TestTerraformMigrateAndPush: the flows around the rules — `init -migrate-state` from the
// local backend and from the pg backend into strata's http backend, `state push` of a newer
// state, and `state push -force` of an older one, which strata refuses (restore a version
// instead).
func TestTerraformMigrateAndPush(t *testing.T) {
	t.Parallel()
	s, token, url := stateServer(t)
	ctx := context.Background()
	c, err := client.New(s.url, token, nil)
	require.NoError(t, err)
	_, err = c.ProjectPut(ctx, "mig")
	require.NoError(t, err)

	// local → http.
	resources := `
resource "terraform_data" "x" {
  input = "local"
}
`
	tf := newTF(t, resources, "TF_HTTP_PASSWORD="+token)
	tf.ok("init", "-no-color")
	tf.ok("apply", "-auto-approve", "-no-color")
	cfg := httpBackendConfig(s.url, "mig", "fromlocal", "local")
	require.NoError(t, os.WriteFile(filepath.Join(tf.dir, "main.tf"), []byte(cfg), 0o600))
	tf.ok("init", "-migrate-state", "-force-copy", "-no-color")
	out := tf.ok("plan", "-no-color")
	require.Contains(t, out, "terraform_data.x: Refreshing state", "the migrated state holds the resource")
	require.NotContains(t, out, "will be created")
	vs, err := c.StateVersions(ctx, "mig", "fromlocal")
	require.NoError(t, err)
	require.NotEmpty(t, vs)

	// pg → http.
	pg := newTF(t, pgBackendConfig(url, "legacy_pg", "pg"))
	pg.ok("init", "-no-color")
	pg.ok("apply", "-auto-approve", "-no-color")
	pgState := pg.stdout("state", "pull")
	require.NoError(t, os.WriteFile(filepath.Join(pg.dir, "main.tf"), []byte(httpBackendConfig(s.url, "mig", "frompg", "pg")), 0o600))
	pg.env = append(pg.env, "TF_HTTP_PASSWORD="+token)
	pg.ok("init", "-migrate-state", "-force-copy", "-no-color")
	got, err := c.StatePull(ctx, "mig", "frompg")
	require.NoError(t, err)
	// Terraform copies the resources (it gives the http backend's state a lineage of its own).
	type instances struct {
		Resources []struct {
			Instances []struct {
				Attributes struct {
					ID string `json:"id"`
				} `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	var before, after instances
	require.NoError(t, json.Unmarshal([]byte(pgState), &before))
	require.NoError(t, json.Unmarshal(got, &after))
	require.Len(t, after.Resources, 1)
	require.Equal(t, before.Resources[0].Instances[0].Attributes.ID, after.Resources[0].Instances[0].Attributes.ID)

	// state push of a newer state.
	pulled := tf.stdout("state", "pull")
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(pulled), &st))
	oldSerial := st["serial"].(float64)
	st["serial"] = oldSerial + 5
	newer, err := json.Marshal(st)
	require.NoError(t, err)
	file := filepath.Join(tf.dir, "push.json")
	require.NoError(t, os.WriteFile(file, newer, 0o600))
	tf.ok("state", "push", "-no-color", file)
	cur, err := c.StatePull(ctx, "mig", "fromlocal")
	require.NoError(t, err)
	var curSt struct {
		Serial float64 `json:"serial"`
	}
	require.NoError(t, json.Unmarshal(cur, &curSt))
	require.GreaterOrEqual(t, curSt.Serial, oldSerial+5, "the pushed state is current (terraform may bump the serial once more)")

	// state push -force of the older file: terraform sends it, strata refuses the lower serial.
	require.NoError(t, os.WriteFile(file, []byte(pulled), 0o600))
	out, err = tf.run("state", "push", "-force", "-no-color", file)
	require.Error(t, err, "a lower serial is refused even with -force:\n%s", out)
	require.Contains(t, out, "409")
	// One serial behind: terraform raises the file's serial to the stored one; the other bytes
	// under the same serial are refused too.
	st["serial"] = curSt.Serial - 1
	st["outputs"] = map[string]any{"changed": map[string]any{"value": "yes", "type": "string"}}
	oneBehind, err := json.Marshal(st)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, oneBehind, 0o600))
	out, err = tf.run("state", "push", "-force", "-no-color", file)
	require.Error(t, err, "a file one serial behind is refused even with -force:\n%s", out)
	require.Contains(t, out, "409")
	st2, err := c.StateLockStatus(ctx, "mig", "fromlocal")
	require.NoError(t, err)
	require.False(t, st2.Locked, "terraform released its lock after the refused push")
}
