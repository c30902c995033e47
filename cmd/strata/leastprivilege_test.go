package main_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pgtest"
)

// TestCredentialsOnLeastPrivilege (issue 28, finding 4): strata runs as a role with CREATEROLE
// and nothing else of a superuser's, owning its database. Issuing `strata project credentials`
// and `strata salt credentials` works, and so does issuing them again (a password rotation):
// PostgreSQL 15 lets only a superuser name SUPERUSER or NOSUPERUSER in ALTER ROLE, so the
// second run used to fail. `strata doctor` tests the real operation. A backup restored into a
// second database of the same cluster (the roles are the cluster's and already exist) issues
// both again. Without CREATEROLE, the failure says what PostgreSQL refused. Deleting the
// project drops its role, as on a superuser.
func TestCredentialsOnLeastPrivilege(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, err := db.Open(ctx, db.Options{URL: pgtest.AdminURL(t), MaxConns: 1})
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	role := "lp_" + hex.EncodeToString(suffix)
	project := "lp" + hex.EncodeToString(suffix)
	exec := func(stmt string, args ...any) {
		t.Helper()
		_, err := admin.Exec(ctx, &db.Query{Name: "lp", Text: stmt}, args...)
		require.NoError(t, err, stmt)
	}
	exec(`DO $$ BEGIN EXECUTE format('CREATE ROLE %I LOGIN CREATEROLE', '` + role + `'); END $$`)
	// Registered before the databases, so it runs after they are dropped.
	t.Cleanup(func() {
		for _, r := range []string{"tf_" + project, role} {
			_, _ = admin.Exec(context.Background(), &db.Query{Name: "drop", Text: `DO $$ BEGIN EXECUTE format('DROP OWNED BY %I', '` + r + `'); EXECUTE format('DROP ROLE IF EXISTS %I', '` + r + `'); END $$`})
		}
	})
	ownedDatabase := func() string {
		t.Helper()
		target, err := pgconnParse(pgtest.NewEmptyDatabaseURL(t))
		require.NoError(t, err)
		exec(`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I OWNER TO %I', '` + target.database + `', '` + role + `'); END $$`)
		return target.as(role)
	}
	source := ownedDatabase()
	token := "strata_" + strings.Repeat("leastPrivToken", 3)
	a := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--database-url", source, "--data-dir", dataDir(t))
	env := []string{"STRATA_SERVER=" + a.url, "STRATA_TOKEN=" + token}
	run := func(env []string, args ...string) string {
		t.Helper()
		out, errOut, err := cliStreams(t, env, args...)
		require.NoError(t, err, "strata %s: %s%s", strings.Join(args, " "), out, errOut)
		return out
	}
	issue := func(env []string) {
		t.Helper()
		var creds struct {
			Role     string `json:"role"`
			Password string `json:"password"`
		}
		for i := 0; i < 2; i++ { // issued, then re-issued (rotated)
			require.NoError(t, json.Unmarshal([]byte(run(env, "project", "credentials", project, "-o", "json")), &creds))
			require.Equal(t, "tf_"+project, creds.Role)
			require.NotEmpty(t, creds.Password)
			require.Contains(t, run(env, "salt", "credentials"), "node_pillars(%s)")
		}
	}
	run(env, "project", "create", project)
	issue(env)

	var checks struct {
		Items []map[string]any `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(run(nil, "doctor", "--database-url", source, "-o", "json")), &checks))
	found := false
	for _, c := range checks.Items {
		if c["feature"] == "project and Salt credentials (login roles)" {
			found = true
			require.Equal(t, true, c["ok"], "doctor tests the real operation: %v", c)
		}
	}
	require.True(t, found, "%v", checks.Items)
	var left int
	require.NoError(t, admin.QueryRow(ctx, &db.Query{Name: "left", Text: `SELECT count(*) FROM pg_roles WHERE rolname LIKE 'strata_doctor_%'`}).Scan(&left))
	require.Zero(t, left, "doctor drops its throwaway role")

	// After a restore onto the same cluster, the credentials commands run again.
	file := filepath.Join(t.TempDir(), "lp.backup")
	run(nil, "backup", "create", file, "--database-url", source, "-q")
	restored := ownedDatabase()
	run(nil, "backup", "restore", file, "--database-url", restored, "-q")
	b := startServer(t, nil, "--database-url", restored, "--data-dir", dataDir(t))
	issue([]string{"STRATA_SERVER=" + b.url, "STRATA_TOKEN=" + token})

	// Without CREATEROLE the answer says what PostgreSQL refused, with its SQLSTATE.
	exec(`DO $$ BEGIN EXECUTE format('ALTER ROLE %I NOCREATEROLE', '` + role + `'); END $$`)
	out, errOut, err := cliStreams(t, env, "project", "credentials", project)
	require.Error(t, err, out)
	require.Contains(t, errOut, "tf_"+project)
	require.Contains(t, errOut, "permission denied (SQLSTATE 42501)")
	require.Contains(t, errOut, "CREATEROLE")
	exec(`DO $$ BEGIN EXECUTE format('ALTER ROLE %I CREATEROLE', '` + role + `'); END $$`)

	// Deleting the project drops its role (DROP OWNED BY needs a superuser or a member of the
	// role, so it failed here): on the restored copy the role stays, because the source's
	// database still grants it, and on the source it goes.
	roleExists := func() bool {
		var n int
		require.NoError(t, admin.QueryRow(ctx, &db.Query{Name: "exists", Text: `SELECT count(*) FROM pg_roles WHERE rolname = $1`}, "tf_"+project).Scan(&n))
		return n == 1
	}
	run([]string{"STRATA_SERVER=" + b.url, "STRATA_TOKEN=" + token}, "project", "delete", project)
	require.True(t, roleExists(), "the source's database still grants the role")
	run(env, "project", "delete", project)
	require.False(t, roleExists(), "deleting the project dropped its role")
}

// TestForceUnlockOfASuperusersBackend (issue 28, item 7): strata runs as a role with
// pg_signal_backend; a pg client connected as a superuser holds a workspace's key. PostgreSQL
// lets only a superuser end a superuser's backend, so force-unlock is refused — and the answer
// says that, with PostgreSQL's words, instead of "grant it pg_signal_backend", which the role
// already has. Seen failing before the fix (it said to grant what was granted).
func TestForceUnlockOfASuperusersBackend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, err := db.Open(ctx, db.Options{URL: pgtest.AdminURL(t), MaxConns: 1})
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	role := "fu_" + hex.EncodeToString(suffix)
	exec := func(stmt string) {
		t.Helper()
		_, err := admin.Exec(ctx, &db.Query{Name: "fu", Text: stmt})
		require.NoError(t, err, stmt)
	}
	exec(`DO $$ BEGIN EXECUTE format('CREATE ROLE %I LOGIN', '` + role + `'); EXECUTE format('GRANT pg_signal_backend TO %I', '` + role + `'); END $$`)
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), &db.Query{Name: "drop", Text: `DO $$ BEGIN EXECUTE format('DROP OWNED BY %I', '` + role + `'); EXECUTE format('DROP ROLE IF EXISTS %I', '` + role + `'); END $$`})
	})
	superURL := pgtest.NewEmptyDatabaseURL(t)
	target, err := pgconnParse(superURL)
	require.NoError(t, err)
	exec(`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I OWNER TO %I', '` + target.database + `', '` + role + `'); END $$`)
	token := "strata_" + strings.Repeat("forceUnlockTok", 3)
	a := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--database-url", target.as(role), "--data-dir", dataDir(t))
	env := []string{"STRATA_SERVER=" + a.url, "STRATA_TOKEN=" + token}
	run := func(args ...string) string {
		t.Helper()
		out, errOut, err := cliStreams(t, env, args...)
		require.NoError(t, err, "strata %s: %s%s", strings.Join(args, " "), out, errOut)
		return out
	}
	run("project", "create", "p")
	state := filepath.Join(t.TempDir(), "s.json")
	require.NoError(t, os.WriteFile(state, []byte(`{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"l","outputs":{},"resources":[]}`), 0o600))
	run("state", "push", "p", "default", state)

	// A pg client connected as a superuser holds the workspace's key, as Terraform's pg
	// backend does for a whole apply.
	pg, err := db.OpenSession(ctx, superURL, "strata", "pg-client-superuser")
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Close(context.Background()) })
	var id int64
	require.NoError(t, pg.QueryRow(ctx, &db.Query{Name: "id", Text: `SELECT id FROM p.states WHERE name = 'default'`}).Scan(&id))
	var locked bool
	require.NoError(t, pg.QueryRow(ctx, &db.Query{Name: "lock", Text: `SELECT pg_try_advisory_lock($1)`}, id).Scan(&locked))
	require.True(t, locked)

	out, errOut, err := cliStreams(t, env, "state", "unlock", "p", "default", "--force")
	require.Error(t, err, out)
	require.Contains(t, errOut, "superuser")
	require.Contains(t, errOut, fmt.Sprintf("SELECT pg_terminate_backend(%d)", pg.PID()))
	require.Contains(t, errOut, "SQLSTATE 42501")
	require.NotContains(t, errOut, "grant it pg_signal_backend")
	_, err = pg.Exec(ctx, &db.Query{Name: "alive", Text: "SELECT 1"})
	require.NoError(t, err, "the superuser's backend was not ended")
}
