//go:build citus

package tfstate

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pgtest"
)

// Tests of strata on a Citus cluster (docs/scale-out.md), compiled only with the citus build
// tag and run in pgtest's Citus mode:
//
//	STRATA_TEST_CITUS=1 STRATA_TEST_DATABASE_URL='postgres://postgres@127.0.0.1:58630/postgres?sslmode=disable' \
//	  go test -tags citus -count=1 ./internal/tfstate/
//
// Every other test of the package runs in that mode too.

func requireCitusMode(t *testing.T) {
	t.Helper()
	if !pgtest.Citus() {
		t.Fatalf("the citus build tag needs %s=1 and %s naming a Citus coordinator", pgtest.EnvCitus, pgtest.EnvDatabaseURL)
	}
}

// TestCitusProjectsAreDistributedSchemas: projects strata creates are Citus distributed
// schemas spread over both workers; a write through strata's HTTP path and one by a pg client
// (with `strata project credentials`) are each recorded as a version with its source and
// author, on the worker that holds the project; deleting a project with states works.
func TestCitusProjectsAreDistributedSchemas(t *testing.T) {
	t.Parallel()
	requireCitusMode(t)
	b := setup(t, setupOpts{noKeeper: true})
	ctx := context.Background()
	projects := []string{"ca", "cb", "cc", "cd"}
	for _, p := range projects {
		b.project(t, p)
	}
	pg := rawSession(t, b.url)
	var schemas string
	require.NoError(t, pg.QueryRow(ctx, pqRaw(`SELECT string_agg(schema_name::text, ',' ORDER BY schema_name::text) FROM citus_schemas`)).Scan(&schemas))
	require.Equal(t, strings.Join(projects, ","), schemas)
	var nodes int
	require.NoError(t, pg.QueryRow(ctx, pqRaw(`SELECT count(DISTINCT nodeport) FROM citus_shards WHERE citus_table_type = 'schema'`)).Scan(&nodes))
	require.Equal(t, 2, nodes, "the projects are spread over both workers")
	var colocated int
	require.NoError(t, pg.QueryRow(ctx, pqRaw(`SELECT count(DISTINCT nodeport) FROM citus_shards WHERE citus_table_type = 'schema' AND table_name::text LIKE 'ca.%'`)).Scan(&colocated))
	require.Equal(t, 1, colocated, "a project's tables sit together on one worker")

	// strata's own write.
	_, err := b.svc.StateWrite(ctx, b.actor, "ca", "default", WriteRequest{Body: stateJSON(1, "l", 0)})
	require.NoError(t, err)
	// A pg client's write, as the pg backend writes, with the project's credentials role.
	creds, err := b.svc.ProjectCredentials(ctx, b.actor, "ca")
	require.NoError(t, err)
	client := rawSession(t, creds.ConnStr)
	rawExec(t, client, `INSERT INTO ca.states (name, data) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET data = $2 WHERE states.name = $1`, "default", string(stateJSON(2, "l", 0)))
	rawExec(t, client, `INSERT INTO ca.states (name, data) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET data = $2 WHERE states.name = $1`, "dev", string(stateJSON(1, "m", 0)))

	vs, err := b.svc.VersionList(ctx, "ca", "default")
	require.NoError(t, err)
	require.Len(t, vs, 2)
	require.Equal(t, "pg", vs[0].Source)
	require.True(t, strings.HasPrefix(vs[0].CreatedBy, "pg:"+creds.Role), vs[0].CreatedBy)
	require.Equal(t, int64(2), *vs[0].Serial)
	require.Equal(t, "http", vs[1].Source)
	require.Equal(t, b.actor.Name, vs[1].CreatedBy, "strata's attribution reaches the worker")
	vs, err = b.svc.VersionList(ctx, "ca", "dev")
	require.NoError(t, err)
	require.Len(t, vs, 1)

	// Ids are unique across projects (each project draws from its own range).
	_, err = b.svc.StateWrite(ctx, b.actor, "cb", "default", WriteRequest{Body: stateJSON(1, "n", 0)})
	require.NoError(t, err)
	var distinct, total int
	require.NoError(t, pg.QueryRow(ctx, pqRaw(`SELECT count(DISTINCT id), count(*) FROM (SELECT id FROM ca.states UNION ALL SELECT id FROM cb.states) s`)).Scan(&distinct, &total))
	require.Equal(t, total, distinct)

	list, _, err := b.svc.ProjectList(ctx, ProjectListOptions{Filter: auth.Filter{All: true}})
	require.NoError(t, err)
	require.Len(t, list, 4)
	require.Equal(t, 2, list[0].Workspaces)
	ws, _, err := b.svc.WorkspaceList(ctx, "ca", WorkspaceListOptions{})
	require.NoError(t, err)
	require.Len(t, ws, 2)

	require.NoError(t, b.svc.ProjectDelete(ctx, b.actor, "ca", true))
	require.NoError(t, pg.QueryRow(ctx, pqRaw(`SELECT string_agg(schema_name::text, ',' ORDER BY schema_name::text) FROM citus_schemas`)).Scan(&schemas))
	require.Equal(t, "cb,cc,cd", schemas)
	var left bool
	require.NoError(t, pg.QueryRow(ctx, &db.Query{Name: "t", Text: `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'ca')`}).Scan(&left))
	require.False(t, left)
}

// TestCitusNewProjectGoesToTheEmptierWorker: after deletions left the workers uneven, a new
// project does not pile onto the fuller worker: strata moves it (citus_schema_move) when
// Citus placed it where two more projects live than on the emptiest worker.
func TestCitusNewProjectGoesToTheEmptierWorker(t *testing.T) {
	t.Parallel()
	requireCitusMode(t)
	b := setup(t, setupOpts{noKeeper: true})
	ctx := context.Background()
	pg := rawSession(t, b.url)
	nodeOf := func(p string) int {
		var port int
		require.NoError(t, pg.QueryRow(ctx, pqRaw(`SELECT DISTINCT nodeport FROM citus_shards WHERE citus_table_type = 'schema' AND split_part(table_name::text, '.', 1) = $1`), p).Scan(&port))
		return port
	}
	for _, p := range []string{"ba", "bb", "bc", "bd", "be", "bf"} {
		b.project(t, p)
	}
	// Empty one worker of projects.
	first := nodeOf("ba")
	for _, p := range []string{"ba", "bb", "bc", "bd", "be", "bf"} {
		if nodeOf(p) != first {
			require.NoError(t, b.svc.ProjectDelete(ctx, b.actor, p, true))
		}
	}
	for _, p := range []string{"ca", "cb"} {
		b.project(t, p)
	}
	var spread string
	require.NoError(t, pg.QueryRow(ctx, pqRaw(`SELECT string_agg(n::text, ',' ORDER BY n) FROM (
		SELECT count(DISTINCT split_part(table_name::text, '.', 1)) AS n FROM citus_shards WHERE citus_table_type = 'schema' GROUP BY nodeport) c`)).Scan(&spread))
	require.Equal(t, "2,3", spread, "3 projects on the worker that kept them, the 2 new ones on the emptied worker")
}
