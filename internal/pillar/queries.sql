-- name: TargetLock
-- Locks the org, group or node a pillar belongs to FOR SHARE until the transaction ends: a
-- deletion of the target (which cascades to its pillars) waits for the write or has happened.
SELECT id FROM {{schema}}.resources
WHERE kind = $1 AND org = $2 AND name = $3
FOR SHARE;

-- name: PillarGet
-- $1 the target's resource id (NULL: global). The OR keeps both forms on the unique index.
SELECT id, data, sealed, revision, updated_at, updated_by FROM {{schema}}.pillars
WHERE (resource_id = $1 OR ($1::bigint IS NULL AND resource_id IS NULL)) AND category = $2;

-- name: PillarGetForUpdate
SELECT id, data, sealed, revision FROM {{schema}}.pillars
WHERE (resource_id = $1 OR ($1::bigint IS NULL AND resource_id IS NULL)) AND category = $2
FOR UPDATE;

-- name: PillarInsert
-- ON CONFLICT DO NOTHING: a concurrent creator won; the caller locks its row and updates it.
-- $6 is the bound kind's revision the row was admitted under (NULL: an untyped category);
-- $7 the sealed value of a secret category's row (NULL: plaintext, in data).
INSERT INTO {{schema}}.pillars (target_kind, resource_id, category, data, updated_by, kind_revision, sealed)
VALUES ($1, $2, $3, $4, $5, $6, $7::bytea)
ON CONFLICT (resource_id, category) DO NOTHING
RETURNING id, revision, updated_at;

-- name: PillarUpdate
UPDATE {{schema}}.pillars SET data = $2, revision = revision + 1, updated_at = now(), updated_by = $3, kind_revision = $4, sealed = $5::bytea
WHERE id = $1
RETURNING revision, updated_at;

-- name: PillarDelete
DELETE FROM {{schema}}.pillars WHERE id = $1;

-- name: PillarHistoryAdd
-- $8 and $9: the sealed old and new values of a secret category's row (old_data and
-- new_data then hold their masked shapes).
INSERT INTO {{schema}}.pillar_history (target, resource_id, category, revision, old_data, new_data, actor, old_sealed, new_sealed)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8::bytea, $9::bytea);

-- name: PillarHistory
-- Newest first; $3 is the id below which to continue (0: from the newest).
SELECT id, revision, old_data, new_data, actor, at, old_sealed, new_sealed, imported_by, imported_at FROM {{schema}}.pillar_history
WHERE target = $1 AND category = $2 AND ($3::bigint = 0 OR id < $3)
ORDER BY id DESC
LIMIT $4;

-- name: PillarHistoryEntry
SELECT id, revision, old_data, new_data, actor, at, old_sealed, new_sealed, imported_by, imported_at FROM {{schema}}.pillar_history
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
), c AS (
	-- The candidate groups only (migration 0035): the node's static memberships and its org's
	-- groups with a selector, not every group of the org with a membership probe each.
	SELECT m.group_id AS id, true AS static FROM {{schema}}.group_members m JOIN n ON m.node_id = n.id
	UNION ALL
	SELECT s.group_id, false FROM {{schema}}.group_selectors s JOIN n ON s.org = n.org
	WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.group_members m WHERE m.group_id = s.group_id AND m.node_id = n.id)
), g AS (
	SELECT r.id, r.name,
	       CASE WHEN jsonb_typeof(r.spec -> 'priority') = 'number' THEN (r.spec ->> 'priority')::int ELSE 0 END AS priority,
	       coalesce(r.spec ->> 'selector', '') AS selector,
	       c.static
	FROM c JOIN {{schema}}.resources r ON r.id = c.id JOIN n ON r.kind = $4 AND r.org = n.org
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
-- cached in the session in every query mode. pillar_render_sealed (migration 0025) adds
-- each row's sealed value.
SELECT layer, target, priority, selector, static, category, data, sealed FROM {{schema}}.pillar_render_sealed($1);

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

-- name: CategoryLockShared
-- Taken by every write of a pillar row before it reads the category's binding, in its own
-- statement (a statement's snapshot predates its wait for a lock): a binding in progress
-- is waited for, and a binding waits for the writes already past this key.
SELECT pg_advisory_xact_lock_shared(hashtextextended($1 || '/pillar-category/' || $2, 0));

-- name: CategoryLockExclusive
SELECT pg_advisory_xact_lock(hashtextextended($1 || '/pillar-category/' || $2, 0));

-- name: CategoryKind
-- The kind the category is bound to (NULL: untyped) and whether it is secret. Always one
-- row, so a pipeline's missing row can only be its target's.
SELECT (SELECT kind FROM {{schema}}.pillar_categories WHERE category = $1),
       coalesce((SELECT secret FROM {{schema}}.pillar_categories WHERE category = $1), false);

-- name: CategoryUpsert
INSERT INTO {{schema}}.pillar_categories (category, kind, updated_by, secret) VALUES ($1, $2, $3, $4)
ON CONFLICT (category) DO UPDATE SET kind = excluded.kind, secret = excluded.secret, updated_at = now(), updated_by = excluded.updated_by
RETURNING updated_at, (xmax = 0) AS created;

-- name: CategoryDelete
DELETE FROM {{schema}}.pillar_categories WHERE category = $1 RETURNING kind;

-- name: CategoryList
-- Every category that has properties or rows ($1 NULL), or one category: its properties and
-- how many rows it has at all targets.
SELECT coalesce(c.category, p.category), c.kind, c.updated_at, coalesce(c.updated_by, ''), coalesce(p.n, 0), coalesce(c.secret, false)
FROM {{schema}}.pillar_categories c
FULL JOIN (SELECT category, count(*) AS n FROM {{schema}}.pillars
           WHERE $1::text IS NULL OR category = $1 GROUP BY category) p ON p.category = c.category
WHERE $1::text IS NULL OR coalesce(c.category, p.category) = $1
ORDER BY 1;

-- name: CategoryRows
-- Every row of a category, with its target by name, locked: a binding validates and
-- presents them all. Targets: kind (global, Org, Group, Node), org, name.
SELECT p.id, p.target_kind, coalesce(r.org, ''), coalesce(r.name, ''), p.resource_id, p.category, p.data, p.sealed
FROM {{schema}}.pillars p LEFT JOIN {{schema}}.resources r ON r.id = p.resource_id
WHERE p.category = $1
ORDER BY p.id
FOR UPDATE OF p;

-- name: CategoryUntype
UPDATE {{schema}}.pillars SET kind_revision = NULL WHERE category = $1 AND kind_revision IS NOT NULL;

-- name: HeldRows
-- The rows of every category bound to kind $1, as CategoryRows (locked: a registration
-- presents them under its new revision; under the kind's key no writer is waiting for them).
SELECT p.id, p.target_kind, coalesce(r.org, ''), coalesce(r.name, ''), p.resource_id, p.category, p.data, p.sealed
FROM {{schema}}.pillar_categories c
JOIN {{schema}}.pillars p ON p.category = c.category
LEFT JOIN {{schema}}.resources r ON r.id = p.resource_id
WHERE c.kind = $1
ORDER BY p.category, p.id
FOR UPDATE OF p;

-- name: HeldRowsUnlocked
-- HeldRows for a registration's scan, which may run in a read-only snapshot.
SELECT p.id, p.target_kind, coalesce(r.org, ''), coalesce(r.name, ''), p.resource_id, p.category, p.data, p.sealed
FROM {{schema}}.pillar_categories c
JOIN {{schema}}.pillars p ON p.category = c.category
LEFT JOIN {{schema}}.resources r ON r.id = p.resource_id
WHERE c.kind = $1
ORDER BY p.category, p.id;

-- name: HeldRevisions
SELECT DISTINCT p.kind_revision
FROM {{schema}}.pillar_categories c JOIN {{schema}}.pillars p ON p.category = c.category
WHERE c.kind = $1 AND p.kind_revision IS NOT NULL;

-- name: PillarRepresent
-- A row rewritten by a binding or a kind's new revision (defaults filled, aliases mapped):
-- a change like any other, with a new revision and a history entry.
UPDATE {{schema}}.pillars SET data = $2, kind_revision = $3, revision = revision + 1, updated_at = now(), updated_by = $4, sealed = $5::bytea
WHERE id = $1
RETURNING revision;

-- name: PillarSetKindRevision
UPDATE {{schema}}.pillars SET kind_revision = $2 WHERE id = $1;

-- name: ExportOrgs
-- The orgs an export covers ($1: one org, '' for all).
SELECT name FROM {{schema}}.resources WHERE kind = 'Org' AND org = '' AND ($1 = '' OR name = $1) ORDER BY name;

-- name: ExportNodes
-- The nodes of the orgs an export covers, with their org and labels (key prefix/name).
SELECT r.name, coalesce(r.spec ->> 'org', ''),
       coalesce((SELECT jsonb_object_agg(CASE WHEN l.key_prefix = '' THEN l.key_name ELSE l.key_prefix || '/' || l.key_name END, l.value)
                 FROM {{schema}}.labels l WHERE l.resource_id = r.id), '{}')
FROM {{schema}}.resources r
WHERE r.kind = 'Node' AND r.org = '' AND ($1 = '' OR r.spec ->> 'org' = $1)
ORDER BY r.name;

-- name: ExportGroups
-- The groups of the orgs an export covers in strata's merge order inside an org (priority,
-- then name), with their selector and static members.
SELECT r.org, r.name,
       CASE WHEN jsonb_typeof(r.spec -> 'priority') = 'number' THEN (r.spec ->> 'priority')::int ELSE 0 END AS priority,
       coalesce(r.spec ->> 'selector', ''),
       coalesce(ARRAY(SELECT n.name FROM {{schema}}.group_members m JOIN {{schema}}.resources n ON n.id = m.node_id
                      WHERE m.group_id = r.id ORDER BY n.name COLLATE "C"), '{}')
FROM {{schema}}.resources r
WHERE r.kind = 'Group' AND ($1 = '' OR r.org = $1)
ORDER BY r.org, priority, r.name;

-- name: ExportRows
-- The pillar rows an export covers: global rows, and the rows of its orgs, their groups and
-- their nodes; target kind, the target's org (a node's from its spec) and name.
SELECT p.target_kind,
       CASE WHEN r.kind = 'Node' THEN coalesce(r.spec ->> 'org', '') ELSE coalesce(r.org, '') END,
       coalesce(r.name, ''), p.category, p.data, p.sealed
FROM {{schema}}.pillars p LEFT JOIN {{schema}}.resources r ON r.id = p.resource_id
WHERE $1 = '' OR p.resource_id IS NULL
   OR (r.kind = 'Org' AND r.name = $1) OR (r.kind = 'Group' AND r.org = $1)
   OR (r.kind = 'Node' AND r.spec ->> 'org' = $1)
ORDER BY p.category;

-- name: SyncHistory
-- The history of the rows an ndjson export carries, by (target, category) pairs ($1, $2),
-- oldest first per row (the history index serves each pair).
SELECT h.target, h.category, h.revision, h.old_data, h.new_data, h.actor, h.at, h.old_sealed, h.new_sealed
FROM unnest($1::text[], $2::text[]) AS w(target, category)
JOIN {{schema}}.pillar_history h ON h.target = w.target AND h.category = w.category
ORDER BY h.target, h.category, h.id;

-- name: SyncHistoryAdd
-- A history entry carried from another installation, unless it is there already (same row,
-- revision, time, actor and value): a sync run twice adds nothing the second time. $11 is
-- who imports it; imported_at is the importing transaction's time (migration 0027).
INSERT INTO {{schema}}.pillar_history (target, resource_id, category, revision, old_data, new_data, actor, at, old_sealed, new_sealed, imported_by, imported_at)
SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9::bytea, $10::bytea, $11, now()
WHERE NOT EXISTS (
	SELECT 1 FROM {{schema}}.pillar_history
	WHERE target = $1 AND category = $3 AND revision = $4 AND at = $8 AND actor = $7
	  AND new_data IS NOT DISTINCT FROM $6::jsonb);

-- name: SyncBoundKinds
-- The kinds of the categories bound among the exported rows' categories, with the binding.
-- And the secret categories: a receiving installation makes them secret before their rows
-- arrive.
SELECT c.category, coalesce(c.kind, ''), c.secret FROM {{schema}}.pillar_categories c WHERE c.kind IS NOT NULL OR c.secret ORDER BY c.category;

-- name: PillarSeal
-- A row converted to or from its sealed form (a category made secret or plain again): the
-- value is the same, so neither its revision nor its history changes.
UPDATE {{schema}}.pillars SET data = $2, sealed = $3::bytea WHERE id = $1;

-- name: HistoryOfCategory
-- Every history entry of a category, locked, for a conversion to or from sealed values.
SELECT id, target, old_data, new_data, old_sealed, new_sealed FROM {{schema}}.pillar_history
WHERE category = $1
ORDER BY id
FOR UPDATE;

-- name: HistorySeal
UPDATE {{schema}}.pillar_history SET old_data = $2, new_data = $3, old_sealed = $4::bytea, new_sealed = $5::bytea WHERE id = $1;

-- name: HistoryOfNode
-- A renamed node's history entries holding sealed values, to be sealed again under its new
-- name (the target is part of what a sealed value is bound to).
SELECT id, target, category, old_sealed, new_sealed FROM {{schema}}.pillar_history
WHERE resource_id = $1 AND target = $2 AND (old_sealed IS NOT NULL OR new_sealed IS NOT NULL)
FOR UPDATE;

-- name: SealedRowsOfNode
SELECT id, category, sealed FROM {{schema}}.pillars WHERE resource_id = $1 AND sealed IS NOT NULL FOR UPDATE;

-- name: PillarSealedOnly
UPDATE {{schema}}.pillars SET sealed = $2::bytea WHERE id = $1;

-- name: HistorySealedOnly
UPDATE {{schema}}.pillar_history SET old_sealed = $2::bytea, new_sealed = $3::bytea WHERE id = $1;

-- name: RewrapRows
-- Sealed rows whose data key is wrapped by a key other than $1 (the primary), a batch of
-- them, locked; rows another rotation holds are skipped (SKIP LOCKED), so two rotations on two
-- replicas share the work. The key id is bytes 4..11 of the sealed format.
SELECT p.id, p.target_kind, coalesce(r.org, ''), coalesce(r.name, ''), p.category, p.sealed
FROM {{schema}}.pillars p LEFT JOIN {{schema}}.resources r ON r.id = p.resource_id
WHERE p.sealed IS NOT NULL AND substring(p.sealed FROM 4 FOR 8) <> $1::bytea
LIMIT $2
FOR UPDATE OF p SKIP LOCKED;

-- name: RewrapRowsWait
-- RewrapRows without SKIP LOCKED: when a batch found nothing free, it waits for the rows a
-- writer holds (the row is checked again once the writer commits: a value the writer sealed
-- with the primary drops out), so a batch answers 0 only when no value is left under another key.
SELECT p.id, p.target_kind, coalesce(r.org, ''), coalesce(r.name, ''), p.category, p.sealed
FROM {{schema}}.pillars p LEFT JOIN {{schema}}.resources r ON r.id = p.resource_id
WHERE p.sealed IS NOT NULL AND substring(p.sealed FROM 4 FOR 8) <> $1::bytea
LIMIT $2
FOR UPDATE OF p;

-- name: RewrapHistory
SELECT id, target, category, old_sealed, new_sealed FROM {{schema}}.pillar_history
WHERE (old_sealed IS NOT NULL AND substring(old_sealed FROM 4 FOR 8) <> $1::bytea)
   OR (new_sealed IS NOT NULL AND substring(new_sealed FROM 4 FOR 8) <> $1::bytea)
LIMIT $2
FOR UPDATE SKIP LOCKED;

-- name: SealedByKey
-- How many sealed values each key wraps, rows and history entries alike.
SELECT encode(substring(v FROM 4 FOR 8), 'hex'), count(*) FROM (
	SELECT sealed AS v FROM {{schema}}.pillars WHERE sealed IS NOT NULL
	UNION ALL SELECT old_sealed FROM {{schema}}.pillar_history WHERE old_sealed IS NOT NULL
	UNION ALL SELECT new_sealed FROM {{schema}}.pillar_history WHERE new_sealed IS NOT NULL
) s GROUP BY 1 ORDER BY 1;

-- name: SealedKeyUsed
-- Whether any sealed pillar value, row or history entry, was wrapped with key id $1 (bytes
-- 4 to 11 of a sealed value, as SealedByKey reads them).
SELECT EXISTS (SELECT 1 FROM {{schema}}.pillars WHERE substring(sealed FROM 4 FOR 8) = $1)
    OR EXISTS (SELECT 1 FROM {{schema}}.pillar_history WHERE substring(old_sealed FROM 4 FOR 8) = $1)
    OR EXISTS (SELECT 1 FROM {{schema}}.pillar_history WHERE substring(new_sealed FROM 4 FOR 8) = $1);

-- name: BoundSecretExists
-- Whether any category bound to a kind is secret (a registration reading bound rows then needs
-- pillars:read-secrets:*).
SELECT EXISTS (SELECT 1 FROM {{schema}}.pillar_categories WHERE secret AND kind IS NOT NULL);

-- name: CategoriesOfTarget
-- The categories a target (by resource id) has rows in, in byte order: a rename takes their
-- keys in that order.
SELECT DISTINCT category FROM {{schema}}.pillars WHERE resource_id = $1 ORDER BY 1;
