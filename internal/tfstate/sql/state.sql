-- name: StateProjectExists
SELECT EXISTS (SELECT 1 FROM {{schema}}.tf_projects WHERE name = $1)

-- name: StateGet
-- A placeholder (a row a LOCK created, still holding the empty state it wrote) is no state.
SELECT s.data, coalesce(ph.md5 = md5(s.data), false)
FROM {{project}}.states s
LEFT JOIN {{project}}.tf_placeholders ph ON ph.workspace = s.name
WHERE s.name = $1

-- name: StateGetForUpdate
SELECT s.id, coalesce(s.data, ''), coalesce(ph.md5 = md5(s.data), false)
FROM {{project}}.states s
LEFT JOIN {{project}}.tf_placeholders ph ON ph.workspace = s.name
WHERE s.name = $1
FOR UPDATE OF s

-- name: StateGetNoRowLock
-- StateGetForUpdate without the row lock, only for the control of the concurrent-writers
-- test (it shows that without FOR UPDATE two writers of the same serial both succeed).
SELECT s.id, coalesce(s.data, ''), coalesce(ph.md5 = md5(s.data), false)
FROM {{project}}.states s
LEFT JOIN {{project}}.tf_placeholders ph ON ph.workspace = s.name
WHERE s.name = $1

-- name: StateGetID
SELECT id FROM {{project}}.states WHERE name = $1

-- name: StateCreationKeys
-- Workspace creation takes the creation keys of both generations of pg clients: -1
-- (Terraform, OpenTofu < 1.10) and OpenTofu's -fnv1_32(schema \0 table). Shared, so strata's
-- own creators never refuse each other, while a pg client's exclusive probe fails; for this
-- transaction only, because Terraform probes -1 on every lock in every schema; try, so a
-- key held by a pg client answers at once.
SELECT pg_try_advisory_xact_lock_shared(-1::bigint), pg_try_advisory_xact_lock_shared($1::bigint)

-- name: StateRowKey
-- An unlocked write (terraform -lock=false, or no lock configured) still must not overwrite
-- a state a pg client has locked: take the row's key for this transaction, without waiting.
-- Shared: a pg client's exclusive lock still refuses it (and its exclusive probe fails while
-- the write runs), but lock listings can tell strata's own hold from a pg client's.
SELECT pg_try_advisory_xact_lock_shared($1::bigint)

-- name: StateRowKeyWorker
-- StateRowKey on Citus, in addition: the pg backend takes a workspace's key on the worker
-- holding the project (its lock query names states), so the key is taken there as well,
-- through the project's one-row tf_project, which Citus routes to that worker.
SELECT pg_try_advisory_xact_lock_shared($1::bigint) FROM {{project}}.tf_project

-- name: StateInsert
INSERT INTO {{project}}.states (name, data) VALUES ($1, $2)
ON CONFLICT (name) DO NOTHING
RETURNING id

-- name: StateUpdate
UPDATE {{project}}.states SET data = $2 WHERE id = $1

-- name: StateDelete
DELETE FROM {{project}}.states WHERE id = $1

-- name: StateSetActor
-- The trigger that records versions reads who wrote, and how, from these settings; they
-- last until the end of the transaction. Read through the project's one-row tf_project so
-- that on Citus the statement runs on the worker holding the project, in the worker
-- transaction the write then uses, where the trigger fires (a table-less set_config would
-- stay on the coordinator); on one PostgreSQL it is the same statement.
SELECT set_config('strata.actor', $1, true), set_config('strata.source', $2, true)
FROM {{project}}.tf_project

-- name: StateProjectForWrite
-- The project check of a write, with whether the project is encrypted. FOR KEY SHARE holds
-- off `project encrypt` (which takes the row FOR UPDATE) until the write commits, so a write
-- that read "not encrypted" never lands plaintext after the conversion began; writes do not
-- block one another.
SELECT count(*) > 0, coalesce(bool_or(encrypted), false)
FROM (SELECT encrypted FROM {{schema}}.tf_projects WHERE name = $1 FOR KEY SHARE) p

-- name: StateSetPlain
-- What the versions trigger records for a sealed state it cannot read: serial, lineage, MD5
-- and size of the plaintext, for the workspace named by strata.plain_for ($1).
SELECT set_config('strata.plain_for', $1, true), set_config('strata.plain_serial', $2, true),
	set_config('strata.plain_lineage', $3, true), set_config('strata.plain_md5', $4, true),
	set_config('strata.plain_size', $5, true)
FROM {{project}}.tf_project

-- name: PlaceholderDelete
DELETE FROM {{project}}.tf_placeholders WHERE workspace = $1

-- name: PlaceholderStateDelete
-- Unlocking a workspace that only a lock created, and that nobody wrote, removes the row
-- again, so a plan on a new workspace leaves nothing behind.
DELETE FROM {{project}}.states s
USING {{project}}.tf_placeholders ph
WHERE s.name = $1 AND ph.workspace = s.name AND ph.md5 = md5(s.data)

-- name: WorkspaceList
-- Serial, lineage and size come from each workspace's latest version row, which the
-- versions trigger writes for every write by any client, so listing never parses or hashes
-- the states (up to 64 MiB each). Only a workspace whose latest version is not of its
-- current size (a schema adopted with states written before strata, or a write that bypassed
-- the trigger) is parsed. A placeholder is recognised by its recorded MD5: only workspaces
-- with a placeholder record are hashed, and those states are a few bytes. The lock columns
-- are those of LockGet, so an HTTP lock reads as GET …/lock shows it. $2 is the last name
-- of the previous page ('' from the start), $3 the page size (NULL: all).
WITH holders AS (
	SELECT DISTINCT ON (key) key, pid, usename, client_addr, application_name, since
	FROM (
		SELECT (l.classid::bigint << 32) | l.objid::bigint AS key, l.pid,
			coalesce(a.usename::text, '') AS usename, CASE WHEN a.usename = current_user OR pg_has_role('pg_read_all_stats', 'MEMBER') THEN coalesce(host(a.client_addr), 'local socket') ELSE 'unknown (needs pg_read_all_stats)' END AS client_addr,
			CASE WHEN a.usename = current_user OR pg_has_role('pg_read_all_stats', 'MEMBER') THEN coalesce(a.application_name, '') ELSE 'unknown (needs pg_read_all_stats)' END AS application_name,
			coalesce(a.xact_start, a.state_change, a.backend_start, now()) AS since
		FROM pg_locks l
		LEFT JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND l.mode = 'ExclusiveLock'
		  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND NOT EXISTS (SELECT 1 FROM {{schema}}.tf_keepers k
		                  WHERE k.backend_pid = l.pid AND k.backend_start = a.backend_start)
	) h
	ORDER BY key, since
)
-- The project's part is a MATERIALIZED CTE naming only the project's tables: on Citus it runs
-- on the worker holding the project and the rest (locks, keepers, pg_locks) on the
-- coordinator, never a join between the two (which Citus refuses); on one PostgreSQL it is
-- the same plan. Only a state whose latest version does not describe it is sent back for
-- parsing (tf_state_meta is strata's, on the coordinator).
, w AS MATERIALIZED (
	SELECT s.id, s.name, s.size, v.n, v.created_at, v.serial, v.lineage,
		coalesce(v.stored_size, v.size) = s.size AS described, v.size AS vsize,
		CASE WHEN coalesce(v.stored_size, v.size) = s.size THEN NULL ELSE s.data END AS unparsed,
		CASE WHEN ph.md5 IS NULL THEN false ELSE ph.md5 = md5(s.data) END AS placeholder
	FROM (SELECT id, name, data, coalesce(octet_length(data), 0) AS size FROM {{project}}.states
		WHERE name IS NOT NULL AND name COLLATE "C" > $2
		ORDER BY name COLLATE "C" LIMIT $3) s
	LEFT JOIN {{project}}.tf_placeholders ph ON ph.workspace = s.name
	LEFT JOIN LATERAL (
		SELECT n, created_at, serial, lineage, size, stored_size FROM {{project}}.tf_state_versions
		WHERE workspace = s.name ORDER BY n DESC LIMIT 1) v ON true
)
SELECT s.name, CASE WHEN coalesce(s.described, false) THEN s.vsize ELSE s.size END,
	CASE WHEN coalesce(s.described, false) THEN s.serial ELSE ({{schema}}.tf_state_meta(s.unparsed)).serial END,
	coalesce(CASE WHEN coalesce(s.described, false) THEN s.lineage ELSE ({{schema}}.tf_state_meta(s.unparsed)).lineage END, ''),
	s.placeholder,
	coalesce(s.n, 0), s.created_at,
	h.pid, h.usename, h.client_addr, h.application_name, h.since, h.key,
	l.lock_id, l.info, l.state_id, l.owner, l.created_by, l.unprotected_since, l.created_at,
	l.last_gap_start, l.last_gap_end, {{schema}}.tf_lock_key_held(l.owner, l.state_id)
FROM w s
LEFT JOIN {{schema}}.tf_locks l ON l.project = $1 AND l.workspace = s.name
LEFT JOIN holders h ON h.key = s.id
ORDER BY s.name COLLATE "C"

-- name: KeyRefRecord
-- The key id of a sealed state ($1), recorded in key_refs (see keyRefStep).
INSERT INTO {{schema}}.key_refs (key_id)
SELECT k FROM (SELECT {{schema}}.sealed_state_key_id($1::text) AS k) s
WHERE k IS NOT NULL
ON CONFLICT DO NOTHING
