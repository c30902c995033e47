package tfstate

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
)

// catalog describes what a schema holds, as PostgreSQL's catalog tells it, with the
// schema's name abstracted away: columns with types, defaults and NOT NULL; indexes and
// constraints with their definitions; relations; triggers.
func catalog(t *testing.T, s *db.Session, schema string) (objects, triggers []string) {
	t.Helper()
	const text = `
SELECT 'column ' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' notnull=' || a.attnotnull
	|| ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname = $1 AND c.relname = 'states' AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'index ' || replace(pg_get_indexdef(i.indexrelid), quote_ident($1) || '.', 'S.')
FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = 'states'
UNION ALL
SELECT 'constraint ' || co.conname || ' ' || co.contype::text || ' ' || pg_get_constraintdef(co.oid)
FROM pg_constraint co JOIN pg_namespace n ON n.oid = co.connamespace
WHERE n.nspname = $1 AND co.conrelid = to_regclass(quote_ident($1) || '.states')
UNION ALL
SELECT 'relation ' || c.relname || ' ' || c.relkind::text || ' owner-is-sequence-owner=' || (pg_get_serial_sequence(quote_ident($1) || '.states', 'id') IS NOT NULL)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = 'states'
UNION ALL
SELECT 'sequence ' || s.seqrelid::regclass::text || ' ' || format_type(s.seqtypid, NULL) || ' start=' || s.seqstart || ' incr=' || s.seqincrement
	|| ' min=' || s.seqmin || ' max=' || s.seqmax || ' cache=' || s.seqcache || ' cycle=' || s.seqcycle
FROM pg_sequence s WHERE s.seqrelid = 'public.global_states_id_seq'::regclass
ORDER BY 1`
	rows, err := s.Query(context.Background(), &db.Query{Name: "test", Text: text}, schema)
	require.NoError(t, err)
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		objects = append(objects, line)
	}
	require.NoError(t, rows.Err())
	rows, err = s.Query(context.Background(), &db.Query{Name: "test", Text: `
SELECT tg.tgname || ' ' || pg_get_triggerdef(tg.oid) FROM pg_trigger tg
JOIN pg_class c ON c.oid = tg.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND NOT tg.tgisinternal ORDER BY 1`}, schema)
	require.NoError(t, err)
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		triggers = append(triggers, line)
	}
	require.NoError(t, rows.Err())
	return objects, triggers
}

// TestProjectDDLMatchesPgBackend compares the states table strata creates for a project with
// what the real terraform 1.11.4 creates with backend "pg": same columns, defaults, indexes
// and constraints, except that the id default names the project's own sequence (migration
// 0034: one per project, so a project schema is self-contained, as a Citus distributed
// schema must be). strata adds its versions trigger and its own tables beside the states
// table. Then terraform uses strata's project with every skip_* flag set, and without them.
func TestProjectDDLMatchesPgBackend(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{noKeeper: true})
	tf := newTFDir(t, b.url, "made_by_terraform", "")
	tf.init(t)
	b.project(t, "made_by_strata")

	pg := rawSession(t, b.url)
	tfObjects, tfTriggers := catalog(t, pg, "made_by_terraform")
	ours, ourTriggers := catalog(t, pg, "made_by_strata")
	require.NotEmpty(t, tfObjects)
	normalized := make([]string, len(ours))
	for i, line := range ours {
		normalized[i] = strings.ReplaceAll(line, "nextval('made_by_strata.states_id_seq'::regclass)", "nextval('global_states_id_seq'::regclass)")
	}
	require.Contains(t, strings.Join(ours, "\n"), "default=nextval('made_by_strata.states_id_seq'::regclass)")
	require.Equal(t, tfObjects, normalized)
	var own string
	require.NoError(t, pg.QueryRow(context.Background(), &db.Query{Name: "t", Text: `SELECT string_agg(c.relname || ':' || c.relkind::text, ',' ORDER BY c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'made_by_strata' AND c.relkind IN ('r', 'S')`}).Scan(&own))
	require.Equal(t, "states:r,states_id_seq:S,tf_placeholders:r,tf_project:r,tf_state_versions:r", own)
	t.Logf("pg backend layout:\n%s", strings.Join(ours, "\n"))
	require.Empty(t, tfTriggers)
	require.Len(t, ourTriggers, 1)
	require.Contains(t, ourTriggers[0], "strata_state_versions AFTER INSERT OR UPDATE")

	for _, flags := range []string{"", "    skip_schema_creation = true\n    skip_table_creation = true\n    skip_index_creation = true\n"} {
		tf := newTFDir(t, b.url, "made_by_strata", flags)
		tf.init(t)
		tf.mustRun(t, "apply", "-auto-approve", "-input=false", "-no-color", "-var", "input="+flags)
	}
	objects, _ := catalog(t, pg, "made_by_strata")
	require.Equal(t, ours, objects, "terraform's DDL on strata's project changes nothing")
}

// TestProjectAdopt: an existing pg backend schema is adopted as it is; its rows are not
// touched and become the first versions.
func TestProjectAdopt(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{noKeeper: true})
	ctx := context.Background()
	pg := rawSession(t, b.url)
	// What the pg backend made on an earlier day.
	rawExec(t, pg, `CREATE SCHEMA terraform_remote_state`)
	rawExec(t, pg, `CREATE SEQUENCE IF NOT EXISTS public.global_states_id_seq AS bigint`)
	rawExec(t, pg, `CREATE TABLE terraform_remote_state.states (id bigint NOT NULL DEFAULT nextval('public.global_states_id_seq') PRIMARY KEY, name text UNIQUE, data text)`)
	rawExec(t, pg, `CREATE UNIQUE INDEX states_by_name ON terraform_remote_state.states (name)`)
	rawExec(t, pg, `INSERT INTO terraform_remote_state.states (name, data) VALUES ('default', $1), ('dev', $2)`, string(stateJSON(4, "l", 1)), "opaque")
	var before string
	require.NoError(t, pg.QueryRow(ctx, &db.Query{Name: "t", Text: `SELECT string_agg(id || name || data, ',' ORDER BY id) FROM terraform_remote_state.states`}).Scan(&before))

	p, created, err := b.svc.ProjectPut(ctx, b.actor, "terraform_remote_state")
	require.NoError(t, err)
	require.True(t, created)
	require.True(t, p.Adopted)
	require.Equal(t, 2, p.Workspaces)
	list, _, err := b.svc.ProjectList(ctx, ProjectListOptions{Filter: auth.Filter{All: true}})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, 2, list[0].Workspaces, "lists count workspaces too")
	var after string
	require.NoError(t, pg.QueryRow(ctx, &db.Query{Name: "t", Text: `SELECT string_agg(id || name || data, ',' ORDER BY id) FROM terraform_remote_state.states`}).Scan(&after))
	require.Equal(t, before, after)

	vs, err := b.svc.VersionList(ctx, "terraform_remote_state", "default")
	require.NoError(t, err)
	require.Len(t, vs, 1)
	require.Equal(t, "adopt", vs[0].Source)
	require.Equal(t, int64(4), *vs[0].Serial)
	p, err = b.svc.ProjectGet(ctx, "terraform_remote_state")
	require.NoError(t, err)
	require.Equal(t, 2, p.Workspaces)
	requireAudit(t, b, "project.adopt", "terraform_remote_state")

	// PUT again: nothing to do.
	_, created, err = b.svc.ProjectPut(ctx, b.actor, "terraform_remote_state")
	require.NoError(t, err)
	require.False(t, created)

	// A schema whose states table the pg backend could not use is refused.
	rawExec(t, pg, `CREATE SCHEMA odd`)
	rawExec(t, pg, `CREATE TABLE odd.states (id int, name text, data jsonb)`)
	_, _, err = b.svc.ProjectPut(ctx, b.actor, "odd")
	requireKind(t, err, fault.KindConflict)

	// A schema that holds other tables (an application's, another strata's) is not adopted.
	rawExec(t, pg, `CREATE SCHEMA app`)
	rawExec(t, pg, `CREATE TABLE app.customers (id int)`)
	_, _, err = b.svc.ProjectPut(ctx, b.actor, "app")
	fe := requireKind(t, err, fault.KindConflict)
	require.Contains(t, fe.Detail, "customers")

	// Deleting an adopted project with states needs force, and keeps its schema when
	// something else lives there.
	rawExec(t, pg, `CREATE TABLE terraform_remote_state.notes (x int)`)
	requireKind(t, b.svc.ProjectDelete(ctx, b.actor, "terraform_remote_state", false), fault.KindConflict)
	require.NoError(t, b.svc.ProjectDelete(ctx, b.actor, "terraform_remote_state", true))
	require.True(t, rawBool(t, pg, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'terraform_remote_state')`))
	require.False(t, rawBool(t, pg, `SELECT to_regclass('terraform_remote_state.states') IS NOT NULL`))
	_, err = b.svc.ProjectGet(ctx, "terraform_remote_state")
	requireKind(t, err, fault.KindNotFound)
}

func TestProjectLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	for _, bad := range []string{"strata", "public", "pg_temp", "information_schema", "Bad"} {
		_, _, err := b.svc.ProjectPut(ctx, b.actor, bad)
		requireKind(t, err, fault.KindInvalid)
	}
	b.project(t, "net")
	b.project(t, "app")
	ps, _, err := b.svc.ProjectList(ctx, ProjectListOptions{Filter: auth.Filter{All: true}})
	require.NoError(t, err)
	require.Len(t, ps, 2)
	require.Equal(t, "app", ps[0].Name)
	require.False(t, ps[0].Adopted)

	// An empty project (a lock's placeholder is no state) deletes without force, with its
	// locks (their keys released) and its schema.
	_, err = b.svc.Lock(ctx, b.actor, "net", "default", lockBody("L"))
	require.NoError(t, err)
	pg := rawSession(t, b.url)
	key := stateID(t, pg, "net", "default")
	require.NoError(t, b.svc.ProjectDelete(ctx, b.actor, "net", false))
	require.False(t, rawBool(t, pg, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'net')`))
	require.True(t, pgClientTry(t, pg, key))
	requireKind(t, b.svc.ProjectDelete(ctx, b.actor, "net", false), fault.KindNotFound)
	requireAudit(t, b, "project.delete", "net")

	_, err = b.svc.StateWrite(ctx, b.actor, "app", "default", WriteRequest{Body: stateJSON(1, "l", 1)})
	require.NoError(t, err)
	requireKind(t, b.svc.ProjectDelete(ctx, b.actor, "app", false), fault.KindConflict)
	require.NoError(t, b.svc.ProjectDelete(ctx, b.actor, "app", true))
	// The same name can be made again, fresh.
	b.project(t, "app")
	vs, err := b.svc.VersionList(ctx, "app", "default")
	require.NoError(t, err)
	require.Empty(t, vs)
}

// TestProjectCredentials: the role can use its project's states table, with every write
// recorded as a version in its name, and nothing of strata's or other projects'.
func TestProjectCredentials(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{noKeeper: true})
	ctx := context.Background()
	// Roles are cluster-wide and test databases share a cluster: random names.
	name, other := randName("cred_"), randName("other_")
	b.project(t, name)
	b.project(t, other)
	cred, err := b.svc.ProjectCredentials(ctx, b.actor, name)
	require.NoError(t, err)
	require.Equal(t, "tf_"+name, cred.Role)
	// ConnStr keeps the form of strata's own URL (keyword/value or postgres://): the
	// connection below, as current_user, is what proves the role and password are in it.
	require.Contains(t, cred.ConnStr, cred.Password)
	require.Contains(t, cred.Backend, "skip_table_creation  = true")
	t.Cleanup(func() { _ = b.svc.ProjectDelete(context.Background(), b.actor, name, true) })

	s, err := db.OpenSession(ctx, cred.ConnStr, "strata", "cred-test")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	var who string
	require.NoError(t, s.QueryRow(ctx, &db.Query{Name: "whoami", Text: "SELECT current_user"}).Scan(&who))
	require.Equal(t, cred.Role, who)
	rawExec(t, s, `INSERT INTO `+name+`.states (name, data) VALUES ('default', $1) ON CONFLICT (name) DO UPDATE SET data = $1`, string(stateJSON(1, "l", 1)))
	vs, err := b.svc.VersionList(ctx, name, "default")
	require.NoError(t, err)
	require.Len(t, vs, 1)
	require.True(t, strings.HasPrefix(vs[0].CreatedBy, "pg:"+cred.Role), vs[0].CreatedBy)

	// A pg client cannot pose as strata: the settings strata passes to the trigger are
	// ignored from any other role (no forged author, no write hidden as a placeholder).
	rawExec(t, s, `SELECT set_config('strata.actor', 'bob (tok_forged)', false), set_config('strata.source', 'placeholder', false)`)
	rawExec(t, s, `UPDATE `+name+`.states SET data = $1 WHERE name = 'default'`, string(stateJSON(2, "l", 1)))
	vs, err = b.svc.VersionList(ctx, name, "default")
	require.NoError(t, err)
	require.Len(t, vs, 2, "the forged placeholder write is still a version")
	last := vs[len(vs)-1]
	if vs[0].N > last.N {
		last = vs[0]
	}
	require.Equal(t, "pg", last.Source)
	require.True(t, strings.HasPrefix(last.CreatedBy, "pg:"+cred.Role), last.CreatedBy)
	_, err = b.svc.StateGet(ctx, name, "default")
	require.NoError(t, err, "the state is not hidden as a placeholder")
	for _, forbidden := range []string{`SELECT count(*) FROM strata.tf_locks`, `SELECT count(*) FROM ` + other + `.states`} {
		_, err := s.Exec(ctx, &db.Query{Name: "t", Text: forbidden})
		require.ErrorIs(t, err, db.ErrPermission, forbidden)
	}
	// The pg backend's DDL needs the skip flags for this role (CREATE … IF NOT EXISTS checks
	// privileges first), which is why the backend block sets them.
	_, err = s.Exec(ctx, &db.Query{Name: "t", Text: `CREATE TABLE IF NOT EXISTS ` + name + `.states (id bigint)`})
	require.ErrorIs(t, err, db.ErrPermission)

	// Asking again re-keys the same role. (The test cluster trusts its socket, so the check is
	// on the stored SCRAM verifier rather than on a refused login.)
	verifier := func() string {
		var v string
		require.NoError(t, rawSession(t, b.url).QueryRow(ctx, &db.Query{Name: "t", Text: `SELECT rolpassword FROM pg_authid WHERE rolname = $1`}, cred.Role).Scan(&v))
		return v
	}
	before := verifier()
	require.True(t, strings.HasPrefix(before, "SCRAM-SHA-256$"), "only a verifier is stored")
	again, err := b.svc.ProjectCredentials(ctx, b.actor, name)
	require.NoError(t, err)
	require.Equal(t, cred.Role, again.Role)
	require.NotEqual(t, cred.Password, again.Password)
	require.NotEqual(t, before, verifier(), "the old password no longer matches")
	p, err := b.svc.ProjectGet(ctx, name)
	require.NoError(t, err)
	require.Equal(t, cred.Role, p.CredentialsRole)

	_ = s.Close(ctx)
	require.NoError(t, b.svc.ProjectDelete(ctx, b.actor, name, true))
	pg := rawSession(t, b.url)
	require.False(t, rawBool(t, pg, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, cred.Role))
}

func TestSCRAMVerifierFormat(t *testing.T) {
	t.Parallel()
	v := db.SCRAMVerifier("secret")
	require.Regexp(t, `^SCRAM-SHA-256\$4096:[A-Za-z0-9+/=]{24}\$[A-Za-z0-9+/=]{44}:[A-Za-z0-9+/=]{44}$`, v)
	require.Equal(t, "postgres://u:p@h:5432/d?sslmode=require", db.ClientConnString("postgres://strata:x@h:5432/d?sslmode=require&pool_max_conns=5", "u", "p"))
	require.Equal(t, "host=/tmp port=5 dbname=d sslmode=disable user=u password=p", db.ClientConnString("host=/tmp port=5 user=postgres dbname=d sslmode=disable", "u", "p"))
}
