package main_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
)

// TestLockConflictWords checks that every command that can meet a Terraform lock says, as
// `state lock` does, which workspace is locked, by whom, and how to free it — never the 423
// answer's raw LockInfo JSON (whose Path is empty: the words come from the arguments).
func TestLockConflictWords(t *testing.T) {
	t.Parallel()
	s, token, _, _ := encryptedServer(t) // project encrypt needs a key
	env := []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + token}
	_, err := cli(t, env, "project", "create", "net")
	require.NoError(t, err)
	state := filepath.Join(t.TempDir(), "state.json")
	require.NoError(t, os.WriteFile(state, []byte(`{"version":4,"serial":1,"lineage":"6f1c1b4e-0000-4000-8000-000000000001","resources":[],"outputs":{}}`), 0o600))
	_, err = cli(t, env, "state", "push", "net", "default", state)
	require.NoError(t, err)

	out, err := cli(t, env, "state", "lock", "net", "default", "--info", "maintenance")
	require.NoError(t, err)
	id := strings.TrimSpace(out)
	words := regexp.MustCompile(`net/default is locked by strata@\S+ \(lock ID ` + regexp.QuoteMeta(id) +
		`, strata-cli since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\); free it with strata state unlock net default ` + regexp.QuoteMeta(id))

	for _, args := range [][]string{
		{"state", "lock", "net", "default"},
		{"state", "push", "net", "default", state},
		{"state", "restore", "net", "default", "1"},
		{"project", "encrypt", "net", "-q"},
		{"state", "unlock", "net", "default", "6b1f0000-0000-4000-8000-00000000000a"}, // another ID
	} {
		_, err := cli(t, env, args...)
		require.Error(t, err, "strata %s", strings.Join(args, " "))
		require.Regexp(t, words, err.Error(), "strata %s", strings.Join(args, " "))
		require.NotContains(t, err.Error(), `"ID"`, "strata %s prints no JSON", strings.Join(args, " "))
		require.NotContains(t, err.Error(), "HTTP 423", "strata %s", strings.Join(args, " "))
	}
}

// TestLockHeldOnAnotherWorkspace is docs/terraform.md's old second-workspace recipe: address
// on net/staging, lock_address still on net/default. The write to staging carries the lock ID
// of default's lock; the 409 says so instead of "no longer held (force-unlocked?)".
func TestLockHeldOnAnotherWorkspace(t *testing.T) {
	t.Parallel()
	s, token, _ := stateServer(t)
	ctx := context.Background()
	c, err := client.New(s.url, token, nil)
	require.NoError(t, err)
	_, err = c.ProjectPut(ctx, "net")
	require.NoError(t, err)
	held, err := c.StateLock(ctx, "net", "default", client.LockInfo{ID: "7d0c35a4-1b2f-4c3e-9d8a-000000000001", Operation: "OperationTypeApply", Who: "ops@ci"})
	require.NoError(t, err)

	state := []byte(`{"version":4,"serial":1,"lineage":"6f1c1b4e-0000-4000-8000-000000000002","resources":[],"outputs":{}}`)
	_, err = c.StatePush(ctx, "net", "staging", state, held.ID)
	require.True(t, client.IsConflict(err), "%v", err)
	require.ErrorContains(t, err, "lock "+held.ID+" is held on net/default, not on net/staging")
	require.ErrorContains(t, err, "lock_address points at net/default")
	require.ErrorContains(t, err, "strata project backend-config net staging")
	require.NotContains(t, err.Error(), "force-unlocked")

	// A lock ID held nowhere is still the force-unlock case.
	_, err = c.StatePush(ctx, "net", "staging", state, "7d0c35a4-1b2f-4c3e-9d8a-000000000009")
	require.True(t, client.IsConflict(err), "%v", err)
	require.ErrorContains(t, err, "is no longer held (force-unlocked?)")

	// Through terraform: lock_address on default, address on staging. Terraform shows only
	// "HTTP error: 409"; the server refused the write, and staging holds nothing.
	require.NoError(t, c.StateUnlock(ctx, "net", "default", held.ID, false))
	base := s.url + "/v1/state/net/"
	tf := newTF(t, `terraform {
  backend "http" {
    address        = "`+base+`staging"
    lock_address   = "`+base+`default"
    unlock_address = "`+base+`default"
    username       = "strata"
  }
}

resource "terraform_data" "x" {
  input = "staging"
}
`, "TF_HTTP_PASSWORD="+token)
	tf.ok("init", "-no-color")
	out, err := tf.run("apply", "-auto-approve", "-no-color")
	require.Error(t, err, out)
	require.Contains(t, out, "409")
	_, err = c.StatePull(ctx, "net", "staging")
	require.True(t, client.IsNotFound(err), "staging holds no state: %v", err)

	// The recipe's fix: backend-config for the workspace points all three addresses at it.
	block, err := cli(t, []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + token}, "project", "backend-config", "net", "staging")
	require.NoError(t, err)
	require.Equal(t, 3, strings.Count(block, `"`+base+`staging"`), block)
	flags, err := cli(t, []string{"STRATA_SERVER=" + s.url}, "project", "backend-config", "net", "staging", "--flags")
	require.NoError(t, err)
	good := newTF(t, `terraform {
  backend "http" {
    username = "strata"
  }
}

resource "terraform_data" "x" {
  input = "staging"
}
`, "TF_HTTP_PASSWORD="+token)
	good.ok(append([]string{"init", "-no-color"}, strings.Fields(flags)...)...)
	good.ok("apply", "-auto-approve", "-no-color")
	pulled, err := c.StatePull(ctx, "net", "staging")
	require.NoError(t, err)
	require.Contains(t, string(pulled), `"staging"`)
}
