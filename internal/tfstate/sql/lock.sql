-- name: LockGet
-- key_held (tf_lock_key_held, migration 0004_tf_lock_key_held) is the fact behind "protected": the owner's
-- live keeper backend holds the lock's key, as pg_locks tells right now; the stored
-- unprotected_since only records gaps.
SELECT l.lock_id, l.info, l.state_id, l.owner, l.created_by, l.unprotected_since, l.created_at,
	l.last_gap_start, l.last_gap_end,
	{{schema}}.tf_lock_key_held(l.owner, l.state_id) AS key_held
FROM {{schema}}.tf_locks l
WHERE l.project = $1 AND l.workspace = $2

-- name: LockGetForShare
-- A write holds the lock row shared, so an UNLOCK cannot slip in between its check of the
-- lock ID and its commit. key_held as in LockGet.
SELECT l.lock_id, l.info, l.state_id, l.owner, l.created_by, l.unprotected_since, l.created_at,
	l.last_gap_start, l.last_gap_end,
	{{schema}}.tf_lock_key_held(l.owner, l.state_id) AS key_held
FROM {{schema}}.tf_locks l
WHERE l.project = $1 AND l.workspace = $2
FOR SHARE OF l

-- name: LockGetForUpdate
SELECT l.lock_id, l.info, l.state_id, l.owner, l.created_by, l.unprotected_since, l.created_at,
	l.last_gap_start, l.last_gap_end,
	{{schema}}.tf_lock_key_held(l.owner, l.state_id) AS key_held
FROM {{schema}}.tf_locks l
WHERE l.project = $1 AND l.workspace = $2
FOR UPDATE OF l

-- name: LockAcquire
-- The whole race between lockers is decided here, by the primary key.
INSERT INTO {{schema}}.tf_locks (project, workspace, lock_id, info, state_id, owner, created_by, remote_addr)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (project, workspace) DO NOTHING
RETURNING lock_id

-- name: LockRelease
DELETE FROM {{schema}}.tf_locks
WHERE project = $1 AND workspace = $2

-- name: LockNotify
SELECT pg_notify($1, $2)

-- name: LockHolders
-- Who holds advisory keys, as pg_locks and pg_stat_activity tell: a single-bigint key shows
-- as classid = key >> 32, objid = key & 0xffffffff, objsubid = 1. strata's own lock keepers
-- are left out (recognised by pid and backend start, since pids are reused).
SELECT (l.classid::bigint << 32) | l.objid::bigint AS key, l.pid,
	coalesce(a.usename::text, ''), CASE WHEN a.usename = current_user OR pg_has_role('pg_read_all_stats', 'MEMBER') THEN coalesce(host(a.client_addr), 'local socket') ELSE 'unknown (needs pg_read_all_stats)' END, CASE WHEN a.usename = current_user OR pg_has_role('pg_read_all_stats', 'MEMBER') THEN coalesce(a.application_name, '') ELSE 'unknown (needs pg_read_all_stats)' END,
	coalesce(a.xact_start, a.state_change, a.backend_start, now()), l.mode = 'ExclusiveLock'
FROM pg_locks l
LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND ((l.classid::bigint << 32) | l.objid::bigint) = ANY ($1::bigint[])
  AND l.pid <> pg_backend_pid()
  AND NOT EXISTS (SELECT 1 FROM {{schema}}.tf_keepers k
                  WHERE k.backend_pid = l.pid AND k.backend_start = a.backend_start)
ORDER BY l.mode = 'ExclusiveLock' DESC, 6

-- name: LockKeeperHolding
-- Whether a keeper session (pid) still holds key.
SELECT EXISTS (
	SELECT 1 FROM pg_locks l
	WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND l.pid = $1
	  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	  AND ((l.classid::bigint << 32) | l.objid::bigint) = $2)

-- name: LockTerminate
-- int: Citus adds pg_terminate_backend(bigint) for global pids, which makes an untyped
-- parameter ambiguous ("function pg_terminate_backend(unknown) is not unique").
SELECT pg_terminate_backend($1::int)

-- name: LockTerminateRefusal
-- Why pg_terminate_backend($1) was refused: whether strata's role is a member of
-- pg_signal_backend, and the backend's role and whether it is a superuser's (which only a
-- superuser may end, pg_signal_backend or not). pg_stat_activity shows every backend's role.
SELECT pg_has_role('pg_signal_backend', 'MEMBER'),
	coalesce((SELECT r.rolname FROM pg_stat_activity a JOIN pg_roles r ON r.oid = a.usesysid WHERE a.pid = $1), ''),
	coalesce((SELECT r.rolsuper FROM pg_stat_activity a JOIN pg_roles r ON r.oid = a.usesysid WHERE a.pid = $1), false)


-- name: LockCounts
-- HTTP locks held in the database, those marked unprotected, and the age in seconds of the
-- oldest unprotected one (metrics: strata_tf_locks*).
SELECT count(*), count(*) FILTER (WHERE unprotected_since IS NOT NULL),
       coalesce(extract(epoch FROM now() - min(unprotected_since)), 0)::float8
FROM {{schema}}.tf_locks

-- name: LocksReleaseRestored
-- After a restore from a backup: the locks the backup holds belonged to processes of the
-- installation it was taken from, which hold nothing here; they are released (and audited by
-- the caller), as are the old replicas' keeper records.
DELETE FROM {{schema}}.tf_locks RETURNING project, workspace, lock_id, info, created_by;

-- name: KeepersForget
DELETE FROM {{schema}}.tf_keepers;

-- name: LockWorkspaceOf
-- Where in the project a lock ID is held: a write naming a lock its workspace does not hold
-- was usually locked through a lock_address that points at another workspace.
SELECT workspace FROM {{schema}}.tf_locks WHERE project = $1 AND lock_id = $2 LIMIT 1

-- name: LockHoldersCitus
-- LockHolders on Citus: the pg backend's keys are held on the worker that holds the project,
-- by Citus's connection for the client's coordinator session, so they are read from
-- citus_locks (every node's pg_locks) and traced back, by global pid (coordinator node id
-- * 10^10 + pid), to the client's session on the coordinator, which pg_stat_activity
-- describes. The keeper's and this session's own holds are left out as in LockHolders.
SELECT (l.classid::bigint << 32) | l.objid::bigint AS key, a.pid,
	coalesce(a.usename::text, ''), CASE WHEN a.usename = current_user OR pg_has_role('pg_read_all_stats', 'MEMBER') THEN coalesce(host(a.client_addr), 'local socket') ELSE 'unknown (needs pg_read_all_stats)' END, CASE WHEN a.usename = current_user OR pg_has_role('pg_read_all_stats', 'MEMBER') THEN coalesce(a.application_name, '') ELSE 'unknown (needs pg_read_all_stats)' END,
	coalesce(a.xact_start, a.state_change, a.backend_start, now()), bool_or(l.mode = 'ExclusiveLock')
FROM citus_locks l
JOIN pg_stat_activity a ON a.pid = (l.global_pid % 10000000000)::int
	AND l.global_pid / 10000000000 = (SELECT nodeid FROM pg_dist_node WHERE groupid = 0 LIMIT 1)
	AND a.datname = current_database()
WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
  AND ((l.classid::bigint << 32) | l.objid::bigint) = ANY ($1::bigint[])
  AND a.pid <> pg_backend_pid()
  AND NOT EXISTS (SELECT 1 FROM {{schema}}.tf_keepers k
                  WHERE k.backend_pid = a.pid AND k.backend_start = a.backend_start)
GROUP BY 1, 2, 3, 4, 5, 6
ORDER BY 7 DESC, 6
