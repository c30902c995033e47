-- name: ResourceInsert
-- The resource_version is set by ResourceStamp as the transaction's last statement.
INSERT INTO {{schema}}.resources (kind, org, name, spec, resource_version)
VALUES ($1, $2, $3, $4, 0)
RETURNING id;

-- name: ResourceGetForUpdate
SELECT id, resource_version FROM {{schema}}.resources
WHERE kind = $1 AND org = $2 AND name = $3
FOR UPDATE;

-- name: ResourceUpdateSpec
UPDATE {{schema}}.resources SET spec = $2 WHERE id = $1;

-- name: ResourceDelete
DELETE FROM {{schema}}.resources WHERE id = $1;

-- name: LabelsReplace
-- Deletes the keys that are not in the new set and upserts the others in one statement
-- pair; ON CONFLICT makes concurrent writers converge instead of duplicating a key.
WITH gone AS (
	DELETE FROM {{schema}}.labels l
	WHERE l.resource_id = $1
	  AND (l.key_prefix, l.key_name) NOT IN (SELECT * FROM unnest($2::text[], $3::text[]))
)
INSERT INTO {{schema}}.labels (resource_id, key_prefix, key_name, value)
SELECT $1, p, n, v FROM unnest($2::text[], $3::text[], $4::text[]) AS t(p, n, v)
ON CONFLICT (resource_id, key_prefix, key_name) DO UPDATE SET value = excluded.value
WHERE {{schema}}.labels.value IS DISTINCT FROM excluded.value;

-- name: AnnotationsReplace
WITH gone AS (
	DELETE FROM {{schema}}.annotations a
	WHERE a.resource_id = $1
	  AND (a.key_prefix, a.key_name) NOT IN (SELECT * FROM unnest($2::text[], $3::text[]))
)
INSERT INTO {{schema}}.annotations (resource_id, key_prefix, key_name, value)
SELECT $1, p, n, v FROM unnest($2::text[], $3::text[], $4::text[]) AS t(p, n, v)
ON CONFLICT (resource_id, key_prefix, key_name) DO UPDATE SET value = excluded.value
WHERE {{schema}}.annotations.value IS DISTINCT FROM excluded.value;

-- name: ResourceStamp
-- Draws the change's resourceVersion (next_resource_version serializes only from here to
-- commit, see migration 0001) and records the change, in one statement.
WITH v AS (SELECT {{schema}}.next_resource_version() AS rv),
u AS (
	UPDATE {{schema}}.resources r SET resource_version = v.rv, updated_at = now()
	FROM v WHERE r.id = $1
	RETURNING r.resource_version, r.kind, r.org, r.name, r.updated_at
)
INSERT INTO {{schema}}.changes (resource_version, kind, org, name, type, object)
SELECT u.resource_version, u.kind, u.org, u.name, $2,
       jsonb_set(jsonb_set($3::jsonb, '{metadata,resourceVersion}', to_jsonb(u.resource_version::text)),
                 '{metadata,updatedAt}', to_jsonb(u.updated_at))
FROM u
RETURNING resource_version;

-- name: ResourceStampDeleted
WITH v AS (SELECT {{schema}}.next_resource_version() AS rv)
INSERT INTO {{schema}}.changes (resource_version, kind, org, name, type, object)
SELECT v.rv, $1, $2, $3, 'DELETED', $4::jsonb FROM v
RETURNING resource_version;

-- name: ResourceGet
SELECT r.name, r.org, r.spec, r.resource_version, r.created_at, r.updated_at,
       coalesce((SELECT jsonb_object_agg(CASE WHEN l.key_prefix = '' THEN l.key_name ELSE l.key_prefix || '/' || l.key_name END, l.value)
                 FROM {{schema}}.labels l WHERE l.resource_id = r.id), '{}'),
       coalesce((SELECT jsonb_object_agg(CASE WHEN a.key_prefix = '' THEN a.key_name ELSE a.key_prefix || '/' || a.key_name END, a.value)
                 FROM {{schema}}.annotations a WHERE a.resource_id = r.id), '{}')
FROM {{schema}}.resources r
WHERE r.kind = $1 AND r.org = $2 AND r.name = $3;

-- name: ResourceList
SELECT r.name, r.org, r.spec, r.resource_version, r.created_at, r.updated_at,
       coalesce((SELECT jsonb_object_agg(CASE WHEN l.key_prefix = '' THEN l.key_name ELSE l.key_prefix || '/' || l.key_name END, l.value)
                 FROM {{schema}}.labels l WHERE l.resource_id = r.id), '{}'),
       coalesce((SELECT jsonb_object_agg(CASE WHEN a.key_prefix = '' THEN a.key_name ELSE a.key_prefix || '/' || a.key_name END, a.value)
                 FROM {{schema}}.annotations a WHERE a.resource_id = r.id), '{}')
FROM {{schema}}.resources r
WHERE r.kind = $1 AND r.org = $2 AND r.name > $3
  AND ($5::boolean OR r.name = ANY($6::text[])
       OR EXISTS (SELECT 1 FROM unnest($7::text[]) p WHERE starts_with(r.name, p)))
ORDER BY r.name
LIMIT $4;

-- name: ResourceVersionCurrent
SELECT coalesce(max(resource_version), 0) FROM {{schema}}.changes;
