package tfstate

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/api"
	"github.com/stretchr/testify/require"
)

// tfDir is a Terraform working directory configured with backend "pg" on a project schema,
// holding one terraform_data resource (built in: no provider download).
type tfDir struct {
	dir string
	env []string
}

func newTFDir(t *testing.T, connStr, schema, extraBackend string) *tfDir {
	t.Helper()
	bin, err := exec.LookPath("terraform")
	if err != nil {
		// State tests drive the real terraform; without it they fail rather than skip.
		t.Fatalf("terraform is not on PATH (these tests drive the real binary; install terraform 1.x): %v", err)
	}
	_ = bin
	dir := t.TempDir()
	cfg := fmt.Sprintf(`terraform {
  backend "pg" {
    conn_str    = %q
    schema_name = %q
%s  }
}

variable "input" {
  type    = string
  default = "hello"
}

resource "terraform_data" "x" {
  input = var.input
}

# A run that takes var.sleep seconds while it holds the workspace's lock.
variable "sleep" {
  type    = string
  default = "0"
}

resource "terraform_data" "slow" {
  triggers_replace = [var.input]
  provisioner "local-exec" {
    command = "sleep ${var.sleep}"
  }
}
`, connStr, schema, extraBackend)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o600))
	rc := filepath.Join(dir, "terraformrc")
	require.NoError(t, os.WriteFile(rc, nil, 0o600))
	env := append(os.Environ(), "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE="+rc, "HOME="+dir,
		"TF_DATA_DIR="+filepath.Join(dir, ".terraform"), "PG_CONN_STR=", "PG_SCHEMA_NAME=")
	return &tfDir{dir: dir, env: env}
}

// run runs terraform with args and returns its combined output and error.
func (d *tfDir) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "terraform", args...)
	cmd.Dir = d.dir
	cmd.Env = d.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (d *tfDir) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := d.run(t, args...)
	require.NoError(t, err, out)
	return out
}

func (d *tfDir) init(t *testing.T) {
	t.Helper()
	d.mustRun(t, "init", "-input=false", "-no-color")
}

func (d *tfDir) apply(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return d.run(t, append([]string{"apply", "-auto-approve", "-input=false", "-no-color"}, args...)...)
}

// TestTerraformPgClientRespectsHTTPLock: with the real terraform 1.11.4 and backend "pg" on
// a strata project, an HTTP lock makes terraform apply fail with "already locked", for an
// existing workspace and for one only the lock created; after UNLOCK it goes through, and
// strata sees what terraform wrote (as the current state and as a version). The control
// repeats it on a service without a keeper: terraform gets in while the HTTP lock is held.
func TestTerraformPgClientRespectsHTTPLock(t *testing.T) {
	t.Parallel()
	for _, keeper := range []bool{true, false} {
		t.Run(fmt.Sprintf("keeper=%v", keeper), func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{noKeeper: !keeper})
			ctx := context.Background()
			b.project(t, "proj_a")
			tf := newTFDir(t, b.url, "proj_a", "")
			tf.init(t)

			// A workspace that does not exist yet, locked over HTTP (Terraform's http backend
			// locks before its first write): the placeholder row keeps terraform out.
			_, err := b.svc.Lock(ctx, b.actor, "proj_a", "default", lockBody("L1"))
			require.NoError(t, err)
			out, err := tf.apply(t)
			if !keeper {
				require.NoError(t, err, "control: without the keeper terraform gets in\n%s", out)
				return
			}
			require.Error(t, err, out)
			require.Contains(t, out, "Workspace is already locked: default")
			require.NoError(t, b.svc.Unlock(ctx, b.actor, "proj_a", "default", UnlockRequest{ID: "L1"}))

			tf.mustRun(t, "apply", "-auto-approve", "-input=false", "-no-color")
			st, err := b.svc.StateGet(ctx, "proj_a", "default")
			require.NoError(t, err)
			m := parseState(st.Data)
			require.Equal(t, int64(1), m.Serial)
			require.True(t, m.HasResources)
			vs, err := b.svc.VersionList(ctx, "proj_a", "default")
			require.NoError(t, err)
			require.Len(t, vs, 1)
			require.Equal(t, "pg", vs[0].Source)

			// An existing workspace, locked over HTTP.
			_, err = b.svc.Lock(ctx, b.actor, "proj_a", "default", lockBody("L2"))
			require.NoError(t, err)
			out, err = tf.apply(t, "-var", "input=changed")
			require.Error(t, err, out)
			require.Contains(t, out, "already locked")
			// A state written over HTTP meanwhile is what terraform reads next.
			next := strings.Replace(string(st.Data), `"serial": 1`, `"serial": 2`, 1)
			_, err = b.svc.StateWrite(ctx, b.actor, "proj_a", "default", WriteRequest{LockID: "L2", Body: []byte(next)})
			require.NoError(t, err)
			require.NoError(t, b.svc.Unlock(ctx, b.actor, "proj_a", "default", UnlockRequest{ID: "L2"}))
			out = tf.mustRun(t, "state", "pull")
			require.Equal(t, int64(2), parseState([]byte(out)).Serial)
			tf.mustRun(t, "apply", "-auto-approve", "-input=false", "-no-color", "-var", "input=changed")
			vs, err = b.svc.VersionList(ctx, "proj_a", "default")
			require.NoError(t, err)
			require.Len(t, vs, 3)
			require.Equal(t, int64(3), *vs[0].Serial)

			// The reverse: while terraform holds the workspace (a pg client's session lock),
			// strata's LOCK answers 423 at once. Hold it the way terraform does, from a
			// session, since a terraform run is too short to catch reliably.
			pg := rawSession(t, b.url)
			key := stateID(t, pg, "proj_a", "default")
			rawBool(t, pg, `SELECT pg_advisory_lock($1) IS NULL`, key)
			_, err = b.svc.Lock(ctx, b.actor, "proj_a", "default", lockBody("L3"))
			requireLocked(t, err)
		})
	}
}

// TestTerraformAdoptsPlaceholder: the placeholder a LOCK writes is a state both pg clients
// accept (Terraform 1.11.4 checked here; OpenTofu 1.11.14 by hand, see docs/terraform.md):
// if it is still there when terraform runs (the lock was lost), terraform writes serial 1
// on its lineage instead of failing with "no state" as it does on an empty row.
func TestTerraformAdoptsPlaceholder(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{noKeeper: true})
	ctx := context.Background()
	b.project(t, "p")
	tf := newTFDir(t, b.url, "p", "")
	tf.init(t)
	_, err := b.svc.Lock(ctx, b.actor, "p", "default", lockBody("L"))
	require.NoError(t, err)
	pg := rawSession(t, b.url)
	var placeholder string
	require.NoError(t, pg.QueryRow(ctx, q.Get("StateGetID").WithIdent("project", "p"), "default").Scan(new(int64)))
	require.NoError(t, pg.QueryRow(ctx, pq("StateGet", "p"), "default").Scan(&placeholder, new(bool)))
	tf.mustRun(t, "apply", "-auto-approve", "-input=false", "-no-color")
	out := tf.mustRun(t, "state", "pull")
	m := parseState([]byte(out))
	require.Equal(t, int64(1), m.Serial)
	require.Equal(t, parseState([]byte(placeholder)).Lineage, m.Lineage)
}

// TestTerraformApplyBlocksHTTPLock: while a real terraform apply (backend "pg") runs on a
// workspace, strata's LOCK answers 423 at once with a LockInfo naming terraform's backend;
// once the apply ends, the LOCK succeeds.
func TestTerraformApplyBlocksHTTPLock(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	b.project(t, "p")
	tf := newTFDir(t, b.url, "p", "")
	tf.init(t)
	tf.mustRun(t, "apply", "-auto-approve", "-input=false", "-no-color")

	done := make(chan error, 1)
	var out string
	go func() {
		var err error
		out, err = tf.apply(t, "-var", "input=again", "-var", "sleep=10") // long enough for a loaded machine
		done <- err
	}()
	var st api.LockStatus
	require.Eventually(t, func() bool {
		var err error
		st, err = b.svc.LockStatus(ctx, "p", "default")
		return err == nil && st.Locked
	}, 10*time.Second, 20*time.Millisecond, "terraform holds the workspace")
	require.Equal(t, "pg", st.Kind)
	quick, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := b.svc.Lock(quick, b.actor, "p", "default", lockBody("L"))
	holder := requireLocked(t, err) // at once: a wait would end in the deadline's error
	require.Equal(t, fmt.Sprintf("pg-backend-pid-%d", st.PG.PID), holder.ID)

	require.NoError(t, <-done, out)
	_, err = b.svc.Lock(ctx, b.actor, "p", "default", lockBody("L"))
	require.NoError(t, err)
}
