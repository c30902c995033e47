package main_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
)

// TestStateCLI drives the project and state commands, and uses what `project credentials`
// and `project backend-config` print with the real terraform.
func TestStateCLI(t *testing.T) {
	t.Parallel()
	s, token, _ := stateServer(t)
	env := []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + token}
	// `project credentials` makes a cluster-wide role named after the project, and test
	// databases may share a cluster (STRATA_TEST_DATABASE_URL): a name of its own per run.
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	proj := "infra_" + hex.EncodeToString(suffix)

	out, err := cli(t, env, "project", "create", proj)
	require.NoError(t, err)
	require.Contains(t, out, proj)
	_, err = cli(t, env, "project", "create", "Bad-Name")
	requireFailsWith(t, err, "project name \"Bad-Name\" must match")
	out, err = cli(t, env, "project", "list", "-o", "json")
	require.NoError(t, err)
	require.Contains(t, out, `"name": "`+proj+`"`)

	// backend-config prints a block terraform accepts as is.
	block, err := cli(t, env, "project", "backend-config", proj, "default")
	require.NoError(t, err)
	require.Contains(t, block, "strata token create "+proj+"-team --scope state:write:"+proj+" --scope state:force-unlock:"+proj,
		"the block says which scope terraform force-unlock needs")
	tf := newTF(t, block+`
resource "terraform_data" "x" {
  input = "cli"
}
`, "TF_HTTP_PASSWORD="+token)
	tf.ok("init", "-no-color")
	tf.ok("apply", "-auto-approve", "-no-color")

	out, err = cli(t, env, "state", "list", proj)
	require.NoError(t, err)
	require.Contains(t, out, "default")
	pulled, err := cli(t, env, "state", "pull", proj, "default")
	require.NoError(t, err)
	require.Contains(t, pulled, `"cli"`)

	// push: a copy of the state with a higher serial is accepted; the original (now stale) is not.
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(pulled), &st))
	st["serial"] = st["serial"].(float64) + 1
	newer, err := json.Marshal(st)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "state.json")
	require.NoError(t, os.WriteFile(file, newer, 0o600))
	_, err = cli(t, env, "state", "push", proj, "default", file)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, []byte(pulled), 0o600))
	_, err = cli(t, env, "state", "push", proj, "default", file)
	requireFailsWith(t, err, "stale state for")

	// lock / unlock.
	lockID, err := cli(t, env, "state", "lock", proj, "default", "--info", "maintenance")
	require.NoError(t, err)
	lockID = strings.TrimSpace(lockID)
	_, err = cli(t, env, "state", "lock", proj, "default")
	require.ErrorContains(t, err, lockID)
	out, err = cli(t, env, "state", "show", proj, "default", "-o", "json")
	require.NoError(t, err)
	require.Contains(t, out, lockID)
	_, err = cli(t, env, "state", "unlock", proj, "default")
	require.ErrorContains(t, err, "--force")
	_, err = cli(t, env, "state", "unlock", proj, "default", lockID)
	require.NoError(t, err)

	// versions and restore.
	out, err = cli(t, env, "state", "versions", proj, "default", "-o", "json")
	require.NoError(t, err)
	var versions struct {
		Items []client.StateVersion `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &versions))
	vs := versions.Items
	require.GreaterOrEqual(t, len(vs), 2)
	v1, err := cli(t, env, "state", "versions", proj, "default", "1")
	require.NoError(t, err)
	require.Contains(t, v1, `"lineage"`)
	out, err = cli(t, env, "state", "restore", proj, "default", "1")
	require.NoError(t, err)
	require.Contains(t, out, "restored version 1")

	// credentials: a role that the pg backend can use for this project only.
	out, err = cli(t, env, "project", "credentials", proj, "-o", "json")
	require.NoError(t, err)
	var creds client.ProjectCredentials
	require.NoError(t, json.Unmarshal([]byte(out), &creds))
	require.NotEmpty(t, creds.ConnStr)
	pg := newTF(t, creds.Backend+`
resource "terraform_data" "x" {
  input = "cli"
}
`)
	pg.ok("init", "-no-color")
	out = pg.ok("state", "list", "-no-color")
	require.Contains(t, out, "terraform_data.x")

	_, err = cli(t, env, "project", "delete", proj)
	requireFailsWith(t, err, "still holds 1 state(s); delete with --force")
	_, err = cli(t, env, "project", "delete", proj, "--force")
	require.NoError(t, err)
}
