-- name: ProjectInsert
INSERT INTO {{schema}}.tf_projects (name, created_by, adopted)
VALUES ($1, $2, $3)
ON CONFLICT (name) DO NOTHING

-- name: ProjectGet
SELECT name, created_at, created_by, adopted, coalesce(role_name, ''), encrypted
FROM {{schema}}.tf_projects
WHERE name = $1

-- name: ProjectGetForUpdate
SELECT name, created_at, created_by, adopted, coalesce(role_name, ''), encrypted
FROM {{schema}}.tf_projects
WHERE name = $1
FOR UPDATE

-- name: ProjectList
-- $1-$3 are the caller's auth.Filter on project names, $4 the last name of the previous
-- page, $5 the page size (NULL: all).
-- The last column counts each project's workspaces (placeholders left out, as
-- ProjectStateCount does) in this one statement: the states tables live in the projects' own
-- schemas, which no static query can name, so each count runs through query_to_xml with the
-- schema quoted by format(%I) (never by the caller). A project whose table is gone counts 0.
SELECT name, created_at, created_by, adopted, coalesce(role_name, ''), encrypted,
	CASE WHEN to_regclass(format('%I.states', name)) IS NULL THEN 0 ELSE
		(xpath('/row/n/text()', query_to_xml(format(
			'SELECT count(*) AS n FROM %I.states s WHERE NOT EXISTS (
				SELECT 1 FROM {{schema}}.tf_placeholders ph
				WHERE ph.project = %L AND ph.workspace = s.name AND ph.md5 = md5(s.data))',
			name, name), false, true, '')))[1]::text::bigint
	END
FROM {{schema}}.tf_projects
WHERE ($1::boolean OR name = ANY($2::text[])
       OR EXISTS (SELECT 1 FROM unnest($3::text[]) p WHERE starts_with(name, p)))
  AND name > $4
ORDER BY name
LIMIT $5

-- name: ProjectDeleteRow
DELETE FROM {{schema}}.tf_projects WHERE name = $1

-- name: ProjectSetRole
UPDATE {{schema}}.tf_projects SET role_name = $2 WHERE name = $1

-- name: ProjectRoleOwner
SELECT name FROM {{schema}}.tf_projects WHERE role_name = $1

-- name: ProjectDDLLock
-- Project DDL is serialized per strata installation: CREATE SEQUENCE/SCHEMA IF NOT EXISTS
-- are not safe against a concurrent creator of the same object (a unique violation in
-- pg_class instead of "already exists").
SELECT pg_advisory_xact_lock($1::int4, $2::int4)

-- name: ProjectSchemaExists
SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)

-- name: ProjectStatesColumns
-- The states table's columns, for checking that a schema to adopt has the pg backend's
-- layout.
SELECT a.attname, format_type(a.atttypid, a.atttypmod)
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = 'states' AND c.relkind IN ('r', 'p')
  AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum

-- name: ProjectStatesNameUnique
-- Whether some unique index covers exactly (name): the pg backend's upsert needs it.
SELECT EXISTS (
	SELECT 1
	FROM pg_index i
	JOIN pg_class c ON c.oid = i.indrelid
	JOIN pg_namespace n ON n.oid = c.relnamespace
	JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = i.indkey[0]
	WHERE n.nspname = $1 AND c.relname = 'states' AND i.indisunique
	  AND i.indnkeyatts = 1 AND a.attname = 'name' AND i.indpred IS NULL
)

-- name: ProjectCreateSchema
CREATE SCHEMA IF NOT EXISTS {{project}}

-- name: ProjectCreateSequence
CREATE SEQUENCE IF NOT EXISTS public.global_states_id_seq AS bigint

-- name: ProjectCreateTable
CREATE TABLE IF NOT EXISTS {{project}}.states (
	id bigint NOT NULL DEFAULT nextval('public.global_states_id_seq') PRIMARY KEY,
	name text UNIQUE,
	data text
)

-- name: ProjectCreateIndex
CREATE UNIQUE INDEX IF NOT EXISTS states_by_name ON {{project}}.states (name)

-- name: ProjectCreateTrigger
CREATE OR REPLACE TRIGGER strata_state_versions
AFTER INSERT OR UPDATE ON {{project}}.states
FOR EACH ROW EXECUTE FUNCTION {{schema}}.tf_states_changed()

-- name: ProjectAdoptVersions
-- History of an adopted schema starts with the rows it holds at adoption.
INSERT INTO {{schema}}.tf_state_versions (project, workspace, n, serial, lineage, md5, size, data, source, created_by)
SELECT $1, s.name, 1, (m).serial, (m).lineage, md5(s.data), octet_length(s.data), s.data, 'adopt', $2
FROM (SELECT name, data, {{schema}}.tf_state_meta(data) AS m FROM {{project}}.states
      WHERE name IS NOT NULL AND data IS NOT NULL) s
ON CONFLICT DO NOTHING

-- name: ProjectStateCount
SELECT count(*) FROM {{project}}.states s
WHERE NOT EXISTS (
	SELECT 1 FROM {{schema}}.tf_placeholders ph
	WHERE ph.project = $1 AND ph.workspace = s.name AND ph.md5 = md5(s.data))

-- name: ProjectLockTimeout
SELECT set_config('lock_timeout', '5s', true)

-- name: ProjectDropTrigger
DROP TRIGGER IF EXISTS strata_state_versions ON {{project}}.states

-- name: ProjectDropTable
DROP TABLE IF EXISTS {{project}}.states

-- name: ProjectDropSchemaIfEmpty
SELECT {{schema}}.tf_drop_schema_if_empty($1)

-- name: ProjectLockKeys
SELECT state_id, owner FROM {{schema}}.tf_locks WHERE project = $1

-- name: ProjectRoleApply
SELECT {{schema}}.tf_project_role($1, $2, $3)

-- name: ProjectRoleDrop
SELECT {{schema}}.tf_drop_project_role($1)

-- name: ProjectForeignRelations
-- Tables, views and sequences in a schema other than the pg backend's states table: strata
-- adopts only schemas that hold nothing else, so deleting a project can never take an
-- application's (or another strata installation's) tables with it.
SELECT coalesce(string_agg(c.relname, ', ' ORDER BY c.relname), '')
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S') AND c.relname <> 'states'

-- name: ProjectStatesMaxID
SELECT coalesce(max(id), 0) FROM {{project}}.states

-- name: SequenceAdvance
-- After a restore: the shared sequence of the pg backend moves past every restored row, so
-- new states never take a restored id.
SELECT setval('public.global_states_id_seq', greatest($1::bigint, (SELECT last_value FROM public.global_states_id_seq)))

-- name: ProjectNamesAll
SELECT name FROM {{schema}}.tf_projects ORDER BY name
