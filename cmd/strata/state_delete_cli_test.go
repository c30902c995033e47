package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStateDeleteCLI is finding 12 of issue 29: there was no `strata state delete`. It asks
// for --yes, says which version brings the state back, refuses while someone else holds
// the lock (in words, never the 423's JSON), works with the holder's --lock-id, and the
// deleted state comes back with `state restore`.
func TestStateDeleteCLI(t *testing.T) {
	t.Parallel()
	s, token, _ := stateServer(t)
	env := []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + token}
	_, err := cli(t, env, "project", "create", "net")
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "state.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"version":4,"terraform_version":"1.11.4","serial":7,"lineage":"del-test","outputs":{},"resources":[]}`), 0o600))
	_, err = cli(t, env, "state", "push", "net", "staging", file)
	require.NoError(t, err)

	_, err = cli(t, env, "state", "delete", "net", "nosuch", "--yes")
	requireFailsWith(t, err, "workspace net/nosuch has no state")
	_, err = cli(t, env, "state", "delete", "net", "staging")
	requireFailsWith(t, err, "deleting the state of net/staging (serial 7, version 1) leaves terraform an empty workspace: give --yes to delete it. Its versions are kept: strata state restore net staging 1 brings it back")

	lockID, err := cli(t, env, "state", "lock", "net", "staging")
	require.NoError(t, err)
	lockID = strings.TrimSpace(lockID)
	_, err = cli(t, env, "state", "delete", "net", "staging", "--yes")
	requireFailsWith(t, err, "net/staging is locked by strata@")
	require.ErrorContains(t, err, "(lock ID "+lockID+", strata-cli since ")
	require.ErrorContains(t, err, "free it with strata state unlock net staging "+lockID+", or pass --lock-id "+lockID)
	require.NotContains(t, err.Error(), `"ID"`, "never the 423's JSON")
	out, err := cli(t, env, "state", "pull", "net", "staging")
	require.NoError(t, err)
	require.Contains(t, out, "del-test", "a refused delete leaves the state")

	out, err = cli(t, env, "state", "delete", "net", "staging", "--yes", "--lock-id", lockID)
	require.NoError(t, err)
	require.Equal(t, "state of net/staging deleted; its versions are kept: strata state restore net staging 1 brings it back\n", out)
	out, err = cli(t, env, "state", "list", "net")
	require.NoError(t, err)
	require.NotContains(t, out, "staging")
	_, err = cli(t, env, "state", "pull", "net", "staging")
	require.Error(t, err)
	out, err = cli(t, env, "state", "show", "net", "staging", "-o", "json")
	require.NoError(t, err)
	require.NotContains(t, out, lockID, "the delete released the deleter's own lock")

	// What the answer said brings it back does.
	_, err = cli(t, env, "state", "restore", "net", "staging", "1")
	require.NoError(t, err)
	out, err = cli(t, env, "state", "pull", "net", "staging")
	require.NoError(t, err)
	require.Contains(t, out, "del-test")
}
