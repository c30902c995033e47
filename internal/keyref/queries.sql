-- name: Referenced
-- The key ids the database's sealed values reference (migration 0031): a small table, read at
-- every readiness probe.
SELECT key_id FROM {{schema}}.key_refs ORDER BY key_id

-- name: Unreferenced
-- Recorded ids no sealed value references any more: a scan of every sealed value, without
-- a lock (candidates only; Prune checks them again under the lock).
SELECT r.key_id FROM {{schema}}.key_refs r
WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.sealed_key_ids() k WHERE k = r.key_id)
ORDER BY r.key_id

-- name: LockTimeout
SELECT set_config('lock_timeout', $1, true)

-- name: LockForPrune
-- SHARE conflicts with the ROW EXCLUSIVE lock every recording trigger's INSERT takes: it
-- waits for the writers of sealed values in flight to commit (their values are then seen by
-- the recount) and holds new ones back until the prune commits (they then record their key
-- again), so a committed value's key is never dropped.
LOCK TABLE {{schema}}.key_refs IN SHARE MODE

-- name: DeleteUnreferenced
-- Of the candidates $1, those still referenced by no sealed value, removed.
DELETE FROM {{schema}}.key_refs r
WHERE r.key_id = ANY($1::text[])
  AND NOT EXISTS (SELECT 1 FROM {{schema}}.sealed_key_ids() k WHERE k = r.key_id)
RETURNING r.key_id
