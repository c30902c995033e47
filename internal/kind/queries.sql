-- name: KindLockShared
-- Taken by every write of an object of the kind before it reads the current revision, in its
-- own statement: a statement's snapshot is taken before it waits for a lock, so reading the
-- revision in the same statement could read the revision a registration is replacing.
SELECT pg_advisory_xact_lock_shared(hashtextextended($1 || '/kind/' || $2, 0));

-- name: KindStillCurrent
-- For a write that admitted its object under the revision this replica remembers (HoldCached)
-- and sends this after KindLockShared, in its COMMIT's round trip: fails the transaction
-- (unchanged_since_read, db.ErrStale) unless that revision is still the kind's current one.
-- The function runs only to fail: CASE evaluates it only when the revision moved on.
SELECT CASE WHEN EXISTS (SELECT 1 FROM {{schema}}.kinds k WHERE k.name = $1 AND k.current_revision = $2) THEN true
            ELSE {{schema}}.unchanged_since_read(false) END;

-- name: KindLockExclusive
-- Taken by a registration: writers of the kind wait until it commits, and it waits for the
-- writers already past their shared lock.
SELECT pg_advisory_xact_lock(hashtextextended($1 || '/kind/' || $2, 0));

-- name: KindCurrent
SELECT k.scope, k.builtin, k.current_revision
FROM {{schema}}.kinds k
WHERE k.name = $1;

-- name: KindGet
SELECT scope, builtin, current_revision, created_at, updated_at
FROM {{schema}}.kinds
WHERE name = $1;

-- name: KindRevisionGet
SELECT schema, report, created_by, created_at
FROM {{schema}}.kind_revisions
WHERE kind = $1 AND revision = $2;

-- name: KindList
SELECT k.name, k.scope, k.builtin, k.current_revision, k.created_at, k.updated_at
FROM {{schema}}.kinds k
ORDER BY k.name;

-- name: KindRevisions
SELECT revision, schema, report, created_by, created_at
FROM {{schema}}.kind_revisions
WHERE kind = $1
ORDER BY revision;

-- name: KindLiveRevisions
-- The revisions that stored objects still reference (NULL: written before kinds existed).
SELECT DISTINCT schema_revision
FROM {{schema}}.resources
WHERE kind = $1 AND schema_revision IS NOT NULL;

-- name: KindInsert
INSERT INTO {{schema}}.kinds (name, scope, builtin, current_revision)
VALUES ($1, $2, $3, 1);

-- name: KindAdvance
UPDATE {{schema}}.kinds SET current_revision = $2, updated_at = now()
WHERE name = $1;

-- name: KindRevisionInsert
INSERT INTO {{schema}}.kind_revisions (kind, revision, schema, report, created_by)
VALUES ($1, $2, $3, $4, $5);

-- name: KindScan
-- Every stored object of the kind, for the data-aware checks of a registration: in a
-- read-only snapshot without the kind's key (then the objects written since are re-checked
-- under it: KindChangedNames, KindScanNamed), or under the key when that cannot be used.
SELECT org, name, spec
FROM {{schema}}.resources
WHERE kind = $1;

-- name: KindRevisionExists
-- jsonb equality ignores key order and formatting, so a schema equal to any revision is
-- found whatever its spelling.
SELECT EXISTS (SELECT 1 FROM {{schema}}.kind_revisions WHERE kind = $1 AND schema = $2::jsonb);

-- name: KindLockFolded
-- Taken by a kind's first registration after its own key: first registrations of names that
-- differ only in case (Database, DATABASE) meet here, so the check below holds under any
-- concurrency.
SELECT pg_advisory_xact_lock(hashtextextended($1 || '/kind-folded/' || lower($2), 0));

-- name: KindFoldedName
SELECT name FROM {{schema}}.kinds WHERE lower(name) = lower($1) AND name <> $1 LIMIT 1;

-- name: KindScanNamed
-- The stored objects of the kind among the given (org, name) pairs, by the unique key.
SELECT r.org, r.name, r.spec
FROM unnest($2::text[], $3::text[]) AS t(org, name)
JOIN {{schema}}.resources r ON r.kind = $1 AND r.org = t.org AND r.name = t.name;

-- name: KindChangedNames
-- The objects of the kind written since an unlocked scan's snapshot — versions above what it
-- saw ($2), or among those it missed ($3, writers in flight then) — deletions included, from
-- the changes log (changes_kind_rv): a short index range however many objects the kind has.
SELECT DISTINCT org, name
FROM {{schema}}.changes
WHERE kind = $1 AND (resource_version > $2 OR resource_version = ANY($3::bigint[]));

-- name: KindCompacted
-- The changes log's compaction point (migration 0012): a re-check needs the log to reach
-- back to its scan's snapshot.
SELECT coalesce(max(compacted_through), 0) FROM {{schema}}.watch_compaction;
