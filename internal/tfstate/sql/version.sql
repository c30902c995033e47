-- Versions live in each project's schema (migration 0034): every statement here names one
-- project, so on Citus it runs on the worker holding that project.

-- name: VersionList
SELECT n, serial, coalesce(lineage, ''), md5, size, source, created_by, created_at
FROM {{project}}.tf_state_versions
WHERE workspace = $1
ORDER BY n DESC

-- name: VersionGet
SELECT n, serial, coalesce(lineage, ''), md5, size, source, created_by, created_at, data
FROM {{project}}.tf_state_versions
WHERE workspace = $1 AND n = $2

-- name: VersionLatest
SELECT coalesce(max(n), 0) FROM {{project}}.tf_state_versions
WHERE workspace = $1

-- name: VersionPrune
-- Retention: keep the newest $2 versions of one workspace.
DELETE FROM {{project}}.tf_state_versions
WHERE workspace = $1
  AND n <= (SELECT max(n) FROM {{project}}.tf_state_versions WHERE workspace = $1) - $2

-- name: VersionPruneAll
-- Retention for every workspace of one project, for versions written by pg clients (which
-- strata does not see as they happen). PruneVersions runs it per project.
DELETE FROM {{project}}.tf_state_versions v
USING (SELECT workspace, max(n) AS top FROM {{project}}.tf_state_versions GROUP BY 1) t
WHERE v.workspace = t.workspace AND v.n <= t.top - $1
