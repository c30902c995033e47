package main_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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
