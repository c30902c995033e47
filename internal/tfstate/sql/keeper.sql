-- name: KeeperRegister
INSERT INTO {{schema}}.tf_keepers (replica, backend_pid, backend_start)
VALUES ($1, $2, $3)
ON CONFLICT (replica) DO UPDATE
SET backend_pid = excluded.backend_pid, backend_start = excluded.backend_start,
	heartbeat_at = now(), started_at = now()

-- name: KeeperHeartbeat
UPDATE {{schema}}.tf_keepers SET heartbeat_at = now() WHERE replica = $1

-- name: KeeperUnregister
DELETE FROM {{schema}}.tf_keepers WHERE replica = $1

-- name: KeeperBackendAlive
-- Whether a keeper's backend (pid and start, since pids are reused) is still running. A
-- backend lets its advisory keys go before it leaves pg_stat_activity (the lock release is a
-- before-shmem-exit step, the activity entry is cleared after), so once it is gone, so are
-- its keys.
SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND backend_start = $2)

-- name: KeeperGet
SELECT backend_pid, backend_start, heartbeat_at, now() - heartbeat_at
FROM {{schema}}.tf_keepers
WHERE replica = $1

-- name: KeeperTerminate
-- Ends a keeper's backend, only if it is still the recorded one.
SELECT pg_terminate_backend(a.pid)
FROM {{schema}}.tf_keepers k
JOIN pg_stat_activity a ON a.pid = k.backend_pid AND a.backend_start = k.backend_start
WHERE k.replica = $1

-- name: KeeperAdopt
-- Locks whose owner's keeper backend is gone (or that no keeper protected) are taken over,
-- so their keys are held again: the lock rows outlive the replica that made them. Their keys
-- were free since that backend ended, so they are marked unprotected until this keeper has
-- taken and verified them. SKIP LOCKED: a row an UNLOCK is deleting is left to it.
-- The gap starts when the key was lost, not when this replica noticed (up to a reconcile
-- interval later, or much later when no other replica ran): the dead keeper's last heartbeat
-- is the last moment its session (which held the key) is known alive, so the gap starts there
-- — at most one heartbeat early, never late — or when the lock was made, if that was later.
-- An owner without a keeper row (none ever ran) gives now(), all that is known.
WITH gone AS (
	SELECT l.project, l.workspace, l.owner,
		coalesce((SELECT least(now(), greatest(k.heartbeat_at, l.created_at)) FROM {{schema}}.tf_keepers k WHERE k.replica = l.owner), now()) AS lost_at
	FROM {{schema}}.tf_locks l
	WHERE l.owner <> $1
	  AND NOT EXISTS (
		SELECT 1 FROM {{schema}}.tf_keepers k
		JOIN pg_stat_activity a ON a.pid = k.backend_pid AND a.backend_start = k.backend_start
		WHERE k.replica = l.owner)
	FOR UPDATE OF l SKIP LOCKED
)
UPDATE {{schema}}.tf_locks l
SET owner = $1, unprotected_since = coalesce(l.unprotected_since, g.lost_at)
FROM gone g
WHERE l.project = g.project AND l.workspace = g.workspace
RETURNING l.project, l.workspace, g.owner, l.unprotected_since

-- name: KeeperLocks
SELECT DISTINCT state_id FROM {{schema}}.tf_locks WHERE owner = $1

-- name: KeeperWants
SELECT EXISTS (SELECT 1 FROM {{schema}}.tf_locks WHERE owner = $1 AND state_id = $2)

-- name: KeeperTryLocks
-- Takes many session-level keys, each with its witness (tf_keeper_take, migration 0017), in
-- one round trip. PostgreSQL counts repeated holds of one key by one session, so the caller
-- passes only keys it does not hold yet.
SELECT k, {{schema}}.tf_keeper_take(k) FROM unnest($1::bigint[]) AS k

-- name: KeeperUnlocks
-- Lets keys go, each witness first (tf_keeper_release).
SELECT k, {{schema}}.tf_keeper_release(k) FROM unnest($1::bigint[]) AS k

-- name: KeeperVerify
-- The keys among $1 that this session holds exclusively, as pg_locks (not memory) tells.
SELECT (l.classid::bigint << 32) | l.objid::bigint
FROM pg_locks l
WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND l.mode = 'ExclusiveLock'
  AND l.pid = pg_backend_pid()
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND ((l.classid::bigint << 32) | l.objid::bigint) = ANY ($1::bigint[])

-- name: KeeperMarkUnprotected
-- Marks the replica's locks (all of them when $2 is NULL, else those with the keys in $2)
-- unprotected since $3 (when the gap began: recorded late when the database could not be
-- written then), returning those newly marked so the gap's start is audited once.
UPDATE {{schema}}.tf_locks SET unprotected_since = least($3::timestamptz, now())
WHERE owner = $1 AND unprotected_since IS NULL AND ($2::bigint[] IS NULL OR state_id = ANY ($2::bigint[]))
RETURNING project, workspace, unprotected_since

-- name: KeeperMarkProtected
-- Clears the mark of locks whose keys the keeper has taken back and verified, keeping the
-- window as the lock's last gap.
UPDATE {{schema}}.tf_locks
SET last_gap_start = unprotected_since, last_gap_end = now(), unprotected_since = NULL
WHERE owner = $1 AND state_id = ANY ($2::bigint[]) AND unprotected_since IS NOT NULL
RETURNING project, workspace, last_gap_start, last_gap_end

-- name: KeeperCleanup
-- Forgets keepers of replicas that are gone: their backend no longer exists, they have not
-- heart-beaten for $1, and they own no lock (a lock's owner is kept until it is adopted).
DELETE FROM {{schema}}.tf_keepers k
WHERE k.heartbeat_at < now() - make_interval(secs => $1::float8)
  AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = k.backend_pid AND a.backend_start = k.backend_start)
  AND NOT EXISTS (SELECT 1 FROM {{schema}}.tf_locks l WHERE l.owner = k.replica)

-- name: KeeperCitusSession
-- On Citus: the keeper's connections to the workers, which hold its keys there (see
-- KeeperTakeOnWorker), are kept for the life of its session instead of being recycled after
-- citus.max_cached_connection_lifetime (10 minutes), which would let the keys go silently.
SELECT set_config('citus.max_cached_connection_lifetime', '-1', false)

-- name: KeeperTakeOnWorker
-- On Citus the pg backend takes a workspace's key on the worker holding the project (its lock
-- query names the states table, so Citus runs it there). The keeper takes the same key there
-- too, through the project's one-row tf_project (so Citus routes it to that worker, in the
-- keeper session's connection to it, even for a row a LOCK is still creating).
SELECT pg_try_advisory_lock($1::bigint) FROM {{project}}.tf_project

-- name: KeeperReleaseOnWorker
SELECT pg_advisory_unlock($1::bigint) FROM {{project}}.tf_project

-- name: KeeperLockProjects
-- The projects of this replica's lock keys, for taking them on the workers (Citus).
SELECT DISTINCT state_id, project FROM {{schema}}.tf_locks WHERE owner = $1
