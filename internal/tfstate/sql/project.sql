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
-- ProjectStateCount does) in this one statement (each count reads one project schema only,
-- so on Citus it is routed to the worker holding that project): the states tables live in the projects' own
-- schemas, which no static query can name, so each count runs through query_to_xml with the
-- schema quoted by format(%I) (never by the caller). A project whose table is gone counts 0.
SELECT name, created_at, created_by, adopted, coalesce(role_name, ''), encrypted,
	CASE WHEN to_regclass(format('%I.states', name)) IS NULL THEN 0 ELSE
		(xpath('/row/n/text()', query_to_xml(format(
			'SELECT count(*) AS n FROM %I.states s LEFT JOIN %I.tf_placeholders ph
				ON ph.workspace = s.name AND ph.md5 = md5(s.data) WHERE ph.workspace IS NULL',
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
-- The project's own id sequence (migration 0034): its range is set by ProjectSequenceRange.
CREATE SEQUENCE {{project}}.states_id_seq AS bigint

-- name: ProjectSequenceRange
-- Project k's ids start at k << 40, so ids (the pg backend's advisory lock keys) never repeat
-- across projects; range 0 is the shared public.global_states_id_seq's.
SELECT setval(format('%I.states_id_seq', $1::text)::regclass, nextval('{{schema}}.tf_project_ranges') << 40, false)

-- name: ProjectCreateTable
-- The pg backend's table, as Terraform and OpenTofu create it, except that the id default
-- names the project's own sequence rather than the shared public.global_states_id_seq.
CREATE TABLE IF NOT EXISTS {{project}}.states (
	id bigint NOT NULL DEFAULT nextval('{{project}}.states_id_seq'::regclass) PRIMARY KEY,
	name text UNIQUE,
	data text
)

-- name: ProjectSetIDDefault
-- Also for an adopted table, whose default named the shared sequence.
ALTER TABLE {{project}}.states ALTER COLUMN id SET DEFAULT nextval('{{project}}.states_id_seq'::regclass)

-- name: ProjectCreateIndex
CREATE UNIQUE INDEX IF NOT EXISTS states_by_name ON {{project}}.states (name)

-- name: ProjectCreateVersions
-- Every state written to the project, by any client (migration 0034).
CREATE TABLE {{project}}.tf_state_versions (
	workspace text COLLATE "C" NOT NULL,
	n bigint NOT NULL,
	serial bigint,
	lineage text,
	md5 text NOT NULL,
	size bigint NOT NULL,
	stored_size bigint,
	data text NOT NULL,
	source text NOT NULL,
	created_by text NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (workspace, n)
)

-- name: ProjectCreatePlaceholders
CREATE TABLE {{project}}.tf_placeholders (
	workspace text COLLATE "C" PRIMARY KEY,
	md5 text NOT NULL
)

-- name: ProjectCreateMeta
CREATE TABLE {{project}}.tf_project (
	one boolean PRIMARY KEY DEFAULT true CHECK (one),
	encrypted boolean NOT NULL DEFAULT false
)

-- name: ProjectInsertMeta
INSERT INTO {{project}}.tf_project (encrypted) VALUES (false)

-- name: ProjectUnsafeTriggers
-- Citus refuses a trigger on a distributed table unless this is on (its warning is about
-- triggers that read or write other nodes' tables; strata's touches only its own schema).
-- Without Citus it is an inert placeholder setting.
SELECT set_config('citus.enable_unsafe_triggers', 'on', true)

-- name: ProjectDistribute
-- On Citus: the project schema becomes a distributed (tenant) schema, all its tables one
-- co-located shard group on one worker. Run before the trigger exists (Citus copies the rows
-- with COPY, which would fire it before the versions table is on the worker).
SELECT citus_schema_distribute($1::text::regnamespace)

-- name: ProjectCreateTrigger
CREATE OR REPLACE TRIGGER strata_state_versions
AFTER INSERT OR UPDATE ON {{project}}.states
FOR EACH ROW EXECUTE FUNCTION {{schema}}.tf_states_changed()

-- name: ProjectAdoptVersions
-- History of an adopted schema starts with the rows it holds at adoption. Runs before the
-- schema is distributed, so on Citus this is a local INSERT … SELECT.
INSERT INTO {{project}}.tf_state_versions (workspace, n, serial, lineage, md5, size, data, source, created_by)
SELECT s.name, 1, (m).serial, (m).lineage, md5(s.data), octet_length(s.data), s.data, 'adopt', $1
FROM (SELECT name, data, {{schema}}.tf_state_meta(data) AS m FROM {{project}}.states
      WHERE name IS NOT NULL AND data IS NOT NULL) s
ON CONFLICT DO NOTHING

-- name: ProjectStateCount
SELECT count(*) FROM {{project}}.states s
LEFT JOIN {{project}}.tf_placeholders ph ON ph.workspace = s.name AND ph.md5 = md5(s.data)
WHERE ph.workspace IS NULL

-- name: ProjectLockTimeout
SELECT set_config('lock_timeout', '5s', true)

-- name: ProjectDropTrigger
DROP TRIGGER IF EXISTS strata_state_versions ON {{project}}.states

-- name: ProjectDropTable
DROP TABLE IF EXISTS {{project}}.states

-- name: ProjectDropHistory
DROP TABLE IF EXISTS {{project}}.tf_state_versions, {{project}}.tf_placeholders, {{project}}.tf_project

-- name: ProjectDropSequence
DROP SEQUENCE IF EXISTS {{project}}.states_id_seq

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

-- name: SharedSequenceCreate
-- The pg backend's shared sequence, which adopted or restored states tables may still name.
CREATE SEQUENCE IF NOT EXISTS public.global_states_id_seq AS bigint

-- name: SequenceAdvance
-- After a restore: the shared sequence of the pg backend moves past every restored row, so
-- new states never take a restored id.
SELECT setval('public.global_states_id_seq', greatest($1::bigint, (SELECT last_value FROM public.global_states_id_seq)))

-- name: ProjectNamesAll
SELECT name FROM {{schema}}.tf_projects ORDER BY name

-- name: ProjectPlacement
-- On Citus: the worker holding a project's schema, and the worker holding the fewest project
-- schemas (ties: the lowest port), with both counts, for ProjectBalance.
WITH per_node AS (
	SELECT n.nodename, n.nodeport, count(DISTINCT cs.schema_name) AS projects
	FROM pg_dist_node n
	LEFT JOIN (SELECT DISTINCT split_part(table_name::text, '.', 1) AS schema_name, nodename, nodeport
	           FROM citus_shards WHERE citus_table_type = 'schema') cs
	       ON cs.nodename = n.nodename AND cs.nodeport = n.nodeport
	WHERE n.groupid <> 0 AND n.isactive AND n.shouldhaveshards AND n.noderole = 'primary'
	GROUP BY 1, 2
), mine AS (
	SELECT DISTINCT nodename, nodeport FROM citus_shards
	WHERE citus_table_type = 'schema' AND split_part(table_name::text, '.', 1) = $1::text
)
SELECT m.nodename, m.nodeport, p.projects, l.nodename, l.nodeport, l.projects
FROM mine m
JOIN per_node p ON p.nodename = m.nodename AND p.nodeport = m.nodeport
CROSS JOIN LATERAL (SELECT * FROM per_node ORDER BY projects, nodeport LIMIT 1) l

-- name: ProjectMove
-- Moves a project's schema (all its co-located tables) to another worker, without blocking
-- writes (logical replication; the cluster has wal_level = logical).
SELECT citus_schema_move($1::text::regnamespace, $2::text, $3::int)

-- name: ProjectListNoCounts
-- ProjectList without the workspace counts, read from strata's tables only: when a Citus
-- worker does not answer, the list is read this way and each project counted on its own
-- (ProjectStateCount), so the projects of the other workers still list with their counts.
SELECT name, created_at, created_by, adopted, coalesce(role_name, ''), encrypted, 0::bigint
FROM {{schema}}.tf_projects
WHERE ($1::boolean OR name = ANY($2::text[])
       OR EXISTS (SELECT 1 FROM unnest($3::text[]) p WHERE starts_with(name, p)))
  AND name > $4
ORDER BY name
LIMIT $5
