-- name: VersionList
SELECT n, serial, coalesce(lineage, ''), md5, size, source, created_by, created_at
FROM {{schema}}.tf_state_versions
WHERE project = $1 AND workspace = $2
ORDER BY n DESC

-- name: VersionGet
SELECT n, serial, coalesce(lineage, ''), md5, size, source, created_by, created_at, data
FROM {{schema}}.tf_state_versions
WHERE project = $1 AND workspace = $2 AND n = $3

-- name: VersionLatest
SELECT coalesce(max(n), 0) FROM {{schema}}.tf_state_versions
WHERE project = $1 AND workspace = $2

-- name: VersionPrune
-- Retention: keep the newest $3 versions of one workspace.
DELETE FROM {{schema}}.tf_state_versions
WHERE project = $1 AND workspace = $2
  AND n <= (SELECT max(n) FROM {{schema}}.tf_state_versions WHERE project = $1 AND workspace = $2) - $3

-- name: VersionPruneAll
-- Retention for every workspace, for versions written by pg clients (which strata does
-- not see as they happen).
DELETE FROM {{schema}}.tf_state_versions v
USING (SELECT project, workspace, max(n) AS top FROM {{schema}}.tf_state_versions GROUP BY 1, 2) t
WHERE v.project = t.project AND v.workspace = t.workspace AND v.n <= t.top - $1
