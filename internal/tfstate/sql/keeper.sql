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

-- name: KeeperGet
SELECT backend_pid, backend_start, heartbeat_at, now() - heartbeat_at
FROM {{schema}}.tf_keepers
WHERE replica = $1

-- name: KeeperAlive
-- A keeper is alive while its backend (pid and start time) exists.
SELECT EXISTS (
	SELECT 1 FROM {{schema}}.tf_keepers k
	JOIN pg_stat_activity a ON a.pid = k.backend_pid AND a.backend_start = k.backend_start
	WHERE k.replica = $1)

-- name: KeeperTerminate
-- Ends a keeper's backend, only if it is still the recorded one.
SELECT pg_terminate_backend(a.pid)
FROM {{schema}}.tf_keepers k
JOIN pg_stat_activity a ON a.pid = k.backend_pid AND a.backend_start = k.backend_start
WHERE k.replica = $1

-- name: KeeperAdopt
-- Locks whose owner's keeper is gone (or that no keeper protected) are taken over, so their
-- keys are held again: the lock rows outlive the replica that made them.
UPDATE {{schema}}.tf_locks l
SET owner = $1
WHERE l.owner <> $1
  AND NOT EXISTS (
	SELECT 1 FROM {{schema}}.tf_keepers k
	JOIN pg_stat_activity a ON a.pid = k.backend_pid AND a.backend_start = k.backend_start
	WHERE k.replica = l.owner)
RETURNING state_id

-- name: KeeperLocks
SELECT DISTINCT state_id FROM {{schema}}.tf_locks WHERE owner = $1

-- name: KeeperWants
SELECT EXISTS (SELECT 1 FROM {{schema}}.tf_locks WHERE owner = $1 AND state_id = $2)

-- name: KeeperMarkUnprotected
UPDATE {{schema}}.tf_locks SET unprotected_since = coalesce(unprotected_since, now())
WHERE owner = $1 AND state_id = $2

-- name: KeeperMarkProtected
UPDATE {{schema}}.tf_locks SET unprotected_since = NULL
WHERE owner = $1 AND state_id = $2 AND unprotected_since IS NOT NULL

-- name: KeeperUnprotectedCount
SELECT count(*) FROM {{schema}}.tf_locks WHERE owner = $1 AND unprotected_since IS NOT NULL
