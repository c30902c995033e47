-- name: TargetLock
-- Locks the org, group or node a pillar belongs to FOR SHARE until the transaction ends: a
-- deletion of the target (which cascades to its pillars) waits for the write or has happened.
SELECT id FROM {{schema}}.resources
WHERE kind = $1 AND org = $2 AND name = $3
FOR SHARE;

-- name: PillarGet
-- $1 the target's resource id (NULL: global). The OR keeps both forms on the unique index.
SELECT id, data, revision, updated_at, updated_by FROM {{schema}}.pillars
WHERE (resource_id = $1 OR ($1::bigint IS NULL AND resource_id IS NULL)) AND category = $2;

-- name: PillarGetForUpdate
SELECT id, data, revision FROM {{schema}}.pillars
WHERE (resource_id = $1 OR ($1::bigint IS NULL AND resource_id IS NULL)) AND category = $2
FOR UPDATE;

-- name: PillarInsert
-- ON CONFLICT DO NOTHING: a concurrent creator won; the caller locks its row and updates it.
INSERT INTO {{schema}}.pillars (target_kind, resource_id, category, data, updated_by)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (resource_id, category) DO NOTHING
RETURNING id, revision, updated_at;

-- name: PillarUpdate
UPDATE {{schema}}.pillars SET data = $2, revision = revision + 1, updated_at = now(), updated_by = $3
WHERE id = $1
RETURNING revision, updated_at;

-- name: PillarDelete
DELETE FROM {{schema}}.pillars WHERE id = $1;

-- name: PillarHistoryAdd
INSERT INTO {{schema}}.pillar_history (target, resource_id, category, revision, old_data, new_data, actor)
VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: PillarHistory
-- Newest first; $3 is the id below which to continue (0: from the newest).
SELECT id, revision, old_data, new_data, actor, at FROM {{schema}}.pillar_history
WHERE target = $1 AND category = $2 AND ($3::bigint = 0 OR id < $3)
ORDER BY id DESC
LIMIT $4;

-- name: PillarHistoryEntry
SELECT id, revision, old_data, new_data, actor, at FROM {{schema}}.pillar_history
WHERE target = $1 AND category = $2 AND id = $3;

-- name: PillarCategories
SELECT category, revision, updated_at, updated_by FROM {{schema}}.pillars
WHERE (resource_id = $1 OR ($1::bigint IS NULL AND resource_id IS NULL))
ORDER BY category;

-- name: PillarLayers
-- Every pillar row that may apply to node $1: global rows, its org's, the rows of its org's
-- groups it may be a member of (static members, and the groups with a selector, which the
-- caller evaluates against the node's labels) with their priority, and its own. Byte order of names and categories
-- (COLLATE "C") is part of the merge contract. $2..$4 are the Node, Org and Group kinds.
WITH n AS (
	SELECT id, spec ->> 'org' AS org FROM {{schema}}.resources WHERE kind = $2 AND org = '' AND name = $1
), o AS (
	SELECT r.id, r.name FROM {{schema}}.resources r JOIN n ON r.kind = $3 AND r.org = '' AND r.name = n.org
), g AS (
	SELECT r.id, r.name,
	       CASE WHEN jsonb_typeof(r.spec -> 'priority') = 'number' THEN (r.spec ->> 'priority')::int ELSE 0 END AS priority,
	       coalesce(r.spec ->> 'selector', '') AS selector,
	       -- OFFSET 0 keeps this a probe of the membership key per group of the org; without it
	       -- PostgreSQL hashed every membership of every node (30,000 rows at 10k nodes, 8 ms).
	       EXISTS (SELECT 1 FROM {{schema}}.group_members m WHERE m.group_id = r.id AND m.node_id = n.id OFFSET 0) AS static
	FROM {{schema}}.resources r JOIN n ON r.kind = $4 AND r.org = n.org
)
SELECT 0 AS layer, ''::text AS target, 0 AS priority, ''::text AS selector, false AS static, p.category, p.data
FROM {{schema}}.pillars p WHERE p.resource_id IS NULL
UNION ALL
SELECT 1, o.name, 0, '', false, p.category, p.data FROM {{schema}}.pillars p JOIN o ON p.resource_id = o.id
UNION ALL
SELECT 2, g.name, g.priority, g.selector, g.static, p.category, p.data FROM {{schema}}.pillars p JOIN g ON p.resource_id = g.id
WHERE g.static OR g.selector <> ''
UNION ALL
SELECT 3, $1, 0, '', false, p.category, p.data FROM {{schema}}.pillars p JOIN n ON p.resource_id = n.id;

-- name: PillarRender
-- PillarLayers and what else a render needs, in one statement (one round trip, one
-- snapshot): first a row of layer -1 carrying the node's org (target) and, as data, its
-- labels and the mergeLists setting — absent when the node does not exist — then the rows of
-- PillarLayers. The query is the function pillar_render (migration 0018), so its plan is
-- cached in the session in every query mode.
SELECT layer, target, priority, selector, static, category, data FROM {{schema}}.pillar_render($1);

-- name: SettingGet
SELECT value FROM {{schema}}.settings WHERE key = $1;

-- name: SettingPut
INSERT INTO {{schema}}.settings (key, value, updated_by) VALUES ($1, $2, $3)
ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = now(), updated_by = excluded.updated_by;

-- name: SaltRoleApply
SELECT {{schema}}.salt_pillar_role($1, $2, $3);

-- name: PillarHistoryRekey
-- A renamed node's pillar history follows it: its rows (by the node's row id, not another
-- node that had the old name before) take the new target name.
UPDATE {{schema}}.pillar_history SET target = $3 WHERE resource_id = $1 AND target = $2;
