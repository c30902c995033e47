package db_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/db/migrations"
)

// TestProjectHistoryMigration (issue 32): migration 0034 moves each project's versions and
// placeholder marks from strata's central tables into the project's schema, gives its states
// table its own id sequence in the project's range (ids stay unique across projects), and the
// versions trigger then records new writes there, numbered after the moved ones.
func TestProjectHistoryMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := emptyDB(t)
	all, err := migrations.Embedded()
	require.NoError(t, err)
	var upTo33 []db.Migration
	for _, m := range all {
		if m.Version <= 33 {
			upTo33 = append(upTo33, m)
		}
	}
	_, err = d.MigrateWith(ctx, db.MigrateOptions{Migrations: upTo33})
	require.NoError(t, err)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := d.Exec(ctx, &db.Query{Name: "seed", Text: sql}, args...)
		require.NoError(t, err, sql)
	}
	// Two projects as release 33 made them: the pg backend's DDL and strata's trigger.
	for _, p := range []string{"net", "app"} {
		exec("INSERT INTO {{schema}}.tf_projects (name, created_by) VALUES ($1, 't')", p)
		exec("CREATE SCHEMA " + p)
		exec("CREATE SEQUENCE IF NOT EXISTS public.global_states_id_seq AS bigint")
		exec("CREATE TABLE " + p + ".states (id bigint NOT NULL DEFAULT nextval('public.global_states_id_seq') PRIMARY KEY, name text UNIQUE, data text)")
		exec("CREATE TRIGGER strata_state_versions AFTER INSERT OR UPDATE ON " + p + ".states FOR EACH ROW EXECUTE FUNCTION {{schema}}.tf_states_changed()")
	}
	exec(`INSERT INTO net.states (name, data) VALUES ('default', '{"version":4,"serial":1,"lineage":"l"}')`)
	exec(`UPDATE net.states SET data = '{"version":4,"serial":2,"lineage":"l"}' WHERE name = 'default'`)
	exec(`INSERT INTO {{schema}}.tf_placeholders (project, workspace, md5) VALUES ('app', 'new', 'abc')`)

	_, err = d.Migrate(ctx)
	require.NoError(t, err)
	count := func(sql string) int {
		t.Helper()
		var n int
		require.NoError(t, d.QueryRow(ctx, &db.Query{Name: "count", Text: sql}).Scan(&n))
		return n
	}
	require.Equal(t, 2, count("SELECT count(*) FROM net.tf_state_versions WHERE workspace = 'default'"))
	require.Equal(t, 1, count("SELECT count(*) FROM app.tf_placeholders WHERE workspace = 'new' AND md5 = 'abc'"))
	require.Equal(t, 0, count("SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'strata' AND c.relname IN ('tf_state_versions', 'tf_placeholders')"))

	// New rows draw ids from their project's own range; a write is numbered after the moved versions.
	exec(`INSERT INTO net.states (name, data) VALUES ('dev', '{"version":4,"serial":1,"lineage":"m"}')`)
	exec(`INSERT INTO app.states (name, data) VALUES ('default', '{"version":4,"serial":1,"lineage":"n"}')`)
	exec(`UPDATE net.states SET data = '{"version":4,"serial":3,"lineage":"l"}' WHERE name = 'default'`)
	require.Equal(t, 1, count("SELECT count(*) FROM net.states WHERE name = 'dev' AND id >= (1::bigint << 40)"))
	require.Equal(t, 1, count("SELECT count(*) FROM app.states WHERE id >= (1::bigint << 40)"))
	require.Equal(t, 0, count("SELECT count(*) FROM net.states a JOIN app.states b ON a.id = b.id"))
	require.Equal(t, 3, count("SELECT max(n) FROM net.tf_state_versions WHERE workspace = 'default'"))
	require.Equal(t, 1, count("SELECT count(*) FROM app.tf_state_versions"))
}
