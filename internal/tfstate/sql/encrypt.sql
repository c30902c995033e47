-- Encrypted projects (encrypt.go). A sealed state is stored as 'strata:sv1:' || base64 of
-- package secret's sealed bytes; bytes 4-11 of those are the id of the key that wraps its
-- data key, which the first 16 base64 characters after the prefix (12 bytes) hold, so key
-- ids are read here without decoding whole states.

-- name: EncryptProjectEncrypted
-- Whether a project is encrypted, for a transaction that is about to create a row in it
-- (a LOCK's placeholder). FOR KEY SHARE: see StateProjectForWrite.
SELECT coalesce(bool_or(encrypted), false)
FROM (SELECT encrypted FROM {{schema}}.tf_projects WHERE name = $1 FOR KEY SHARE) p

-- name: EncryptMarkProject
UPDATE {{schema}}.tf_projects SET encrypted = true WHERE name = $1

-- name: EncryptMarkProjectMeta
-- The project's own copy of the mark, which the versions trigger reads (migration 0034).
UPDATE {{project}}.tf_project SET encrypted = true

-- name: EncryptFirstLock
-- Any HTTP lock on the project: its holder is running Terraform now.
SELECT workspace, info FROM {{schema}}.tf_locks WHERE project = $1 ORDER BY workspace LIMIT 1

-- name: EncryptRowKeys
-- Every workspace's advisory key, taken exclusively for this transaction without waiting: a
-- row whose key cannot be had is in use by a pg backend client (the keeper's keys belong to
-- HTTP locks, which EncryptFirstLock has already refused).
SELECT name, id FROM (
	SELECT name, id, pg_try_advisory_xact_lock(id) AS took
	FROM {{project}}.states WHERE name IS NOT NULL
) k
WHERE NOT took
ORDER BY name
LIMIT 1

-- name: EncryptSetSource
-- Writes of this transaction seal what is stored already: the versions trigger records no
-- version for them and carries placeholder marks over (migration 0026).
SELECT set_config('strata.source', 'encrypt', true), set_config('strata.actor', $1, true)
FROM {{project}}.tf_project

-- name: EncryptPlainStates
-- A batch of plain states of a project, locked; $1 is the batch size.
SELECT id, name, data FROM {{project}}.states
WHERE name IS NOT NULL AND data IS NOT NULL AND data <> '' AND NOT starts_with(data, 'strata:sv1:')
ORDER BY id
LIMIT $1
FOR UPDATE

-- name: EncryptPlainVersions
-- A batch of plain versions of a project, locked.
SELECT workspace, n, data FROM {{project}}.tf_state_versions
WHERE NOT starts_with(data, 'strata:sv1:')
ORDER BY workspace, n
LIMIT $1
FOR UPDATE

-- name: EncryptStoreState
UPDATE {{project}}.states SET data = $2 WHERE id = $1

-- name: EncryptStoreVersion
-- A version's md5, size, serial and lineage stay those of the plaintext; stored_size is the
-- sealed text's.
UPDATE {{project}}.tf_state_versions SET data = $3, stored_size = octet_length($3)
WHERE workspace = $1 AND n = $2

-- name: EncryptRemaining
SELECT (SELECT count(*) FROM {{project}}.states
        WHERE name IS NOT NULL AND data IS NOT NULL AND data <> '' AND NOT starts_with(data, 'strata:sv1:'))
     + (SELECT count(*) FROM {{project}}.tf_state_versions
        WHERE NOT starts_with(data, 'strata:sv1:'))

-- name: EncryptedProjects
SELECT name FROM {{schema}}.tf_projects WHERE encrypted ORDER BY name

-- name: SealedStatesByKey
SELECT encode(substring(decode(substr(data, 12, 16), 'base64') FROM 4 FOR 8), 'hex'), count(*)
FROM {{project}}.states
WHERE starts_with(data, 'strata:sv1:')
GROUP BY 1

-- name: SealedVersionsByKey
SELECT encode(substring(decode(substr(data, 12, 16), 'base64') FROM 4 FOR 8), 'hex'), count(*)
FROM {{project}}.tf_state_versions
WHERE starts_with(data, 'strata:sv1:')
GROUP BY 1

-- name: RewrapStates
-- A batch of a project's sealed states whose key is not $1 (the primary), locked; states a
-- writer (or another rotation) holds are skipped and found by a later batch, so a rotation
-- never makes a Terraform run wait.
SELECT id, name, data FROM {{project}}.states
WHERE starts_with(data, 'strata:sv1:')
  AND encode(substring(decode(substr(data, 12, 16), 'base64') FROM 4 FOR 8), 'hex') <> $1
ORDER BY id
LIMIT $2
FOR UPDATE SKIP LOCKED

-- name: RewrapVersions
-- A batch of sealed versions whose key is not $1 (the primary), locked, skipping those
-- another rotation holds.
SELECT workspace, n, data FROM {{project}}.tf_state_versions
WHERE starts_with(data, 'strata:sv1:')
  AND encode(substring(decode(substr(data, 12, 16), 'base64') FROM 4 FOR 8), 'hex') <> $1
ORDER BY workspace, n
LIMIT $2
FOR UPDATE SKIP LOCKED

-- name: RewrapStatesWait
-- RewrapStates without SKIP LOCKED, for one state ($2 is 1): for a batch that found nothing
-- free, it waits for the states writers (or another rotation) hold. PostgreSQL checks a row
-- again once its holder ends: one the writer sealed with the primary drops out, one still
-- under another key (the writer committed without changing it, or rolled back) is locked and
-- returned, so a batch answers 0 only when no state is left under another key. One row, so
-- the batch holds no row while it waits and no writer ever waits for a waiting batch.
SELECT id, name, data FROM {{project}}.states
WHERE starts_with(data, 'strata:sv1:')
  AND encode(substring(decode(substr(data, 12, 16), 'base64') FROM 4 FOR 8), 'hex') <> $1
ORDER BY id
LIMIT $2
FOR UPDATE

-- name: RewrapVersionsWait
-- RewrapVersions without SKIP LOCKED, as RewrapStatesWait: it waits for the versions a
-- writer's retention is deleting (gone once it commits, still there if it rolls back) or
-- another rotation holds.
SELECT workspace, n, data FROM {{project}}.tf_state_versions
WHERE starts_with(data, 'strata:sv1:')
  AND encode(substring(decode(substr(data, 12, 16), 'base64') FROM 4 FOR 8), 'hex') <> $1
ORDER BY workspace, n
LIMIT $2
FOR UPDATE

-- name: RewrapStoreVersion
UPDATE {{project}}.tf_state_versions SET data = $3 WHERE workspace = $1 AND n = $2

-- name: OfflineState
SELECT data FROM {{project}}.states WHERE name = $1

-- name: OfflineVersion
SELECT data FROM {{project}}.tf_state_versions WHERE workspace = $1 AND n = $2

-- name: OfflineLatestVersion
SELECT data FROM {{project}}.tf_state_versions WHERE workspace = $1
ORDER BY n DESC LIMIT 1

-- name: EncryptRowKey
-- One workspace's advisory key, exclusively for this transaction, without waiting.
SELECT pg_try_advisory_xact_lock($1::bigint)

-- name: EncryptRowKeyWorker
-- EncryptRowKey on Citus, in addition, on the project's worker (see StateRowKeyWorker).
SELECT pg_try_advisory_xact_lock($1::bigint) FROM {{project}}.tf_project
