-- name: ResourceInsert
-- The spec and resource_version are set by ResourceStamp as the transaction's last statement.
INSERT INTO {{schema}}.resources (kind, org, name, resource_version)
VALUES ($1, $2, $3, 0)
RETURNING id;

-- name: OrgLockShare
SELECT id FROM {{schema}}.resources
WHERE kind = $1 AND org = '' AND name = $2
FOR SHARE;

-- name: ResourceLockAndGet
-- The row lock is the queue every writer of one resource waits in: spec, labels and
-- annotations of a resource change one transaction at a time, so per-resource caps checked
-- before the write still hold at commit and no two writers take key rows in different orders.
-- The last column is the resource_version this statement's snapshot saw: when the statement
-- waited for the lock and another writer committed meanwhile, the locked row (and its
-- resource_version column) is the new version but the subqueries read the old snapshot, and
-- lockForWrite reads the object again (ResourceGetByID) instead of trusting them.
SELECT r.name, r.org, r.spec, r.resource_version, r.created_at, r.updated_at,
       coalesce((SELECT jsonb_object_agg(CASE WHEN l.key_prefix = '' THEN l.key_name ELSE l.key_prefix || '/' || l.key_name END, l.value)
                 FROM {{schema}}.labels l WHERE l.resource_id = r.id), '{}'),
       coalesce((SELECT jsonb_object_agg(CASE WHEN a.key_prefix = '' THEN a.key_name ELSE a.key_prefix || '/' || a.key_name END, a.value)
                 FROM {{schema}}.annotations a WHERE a.resource_id = r.id), '{}'),
       coalesce(r.schema_revision, 0), r.status, r.id,
       r.id, r.kind,
       (SELECT s.resource_version FROM {{schema}}.resources s WHERE s.id = r.id)
FROM {{schema}}.resources r
WHERE r.kind = $1 AND r.org = $2 AND r.name = $3
FOR UPDATE OF r;

-- name: ResourceGetByID
-- Reads objects a transaction has locked, in a statement of its own and so with a snapshot
-- taken after the locks were granted; the last columns are the row id and kind.
SELECT r.name, r.org, r.spec, r.resource_version, r.created_at, r.updated_at,
       coalesce((SELECT jsonb_object_agg(CASE WHEN l.key_prefix = '' THEN l.key_name ELSE l.key_prefix || '/' || l.key_name END, l.value)
                 FROM {{schema}}.labels l WHERE l.resource_id = r.id), '{}'),
       coalesce((SELECT jsonb_object_agg(CASE WHEN a.key_prefix = '' THEN a.key_name ELSE a.key_prefix || '/' || a.key_name END, a.value)
                 FROM {{schema}}.annotations a WHERE a.resource_id = r.id), '{}'),
       coalesce(r.schema_revision, 0), r.status, r.id,
       r.id, r.kind
FROM {{schema}}.resources r
WHERE r.id = ANY($1::bigint[])
ORDER BY r.kind = 'Node', r.name;

-- name: ResourceDelete
DELETE FROM {{schema}}.resources WHERE id = $1;

-- name: LabelsUpsert
-- The keys arrive deduplicated and sorted by (prefix, name). ON CONFLICT makes concurrent
-- writers converge on the one row the unique constraint allows instead of duplicating a key.
-- With $5 it writes only behind a stamp that wrote (afterWrite, below).
INSERT INTO {{schema}}.labels (resource_id, key_prefix, key_name, value)
SELECT $1, p, n, v FROM unnest($2::text[], $3::text[], $4::text[]) AS t(p, n, v)
WHERE NOT $5::boolean OR current_setting('strata.wrote', true) = 'yes'
ON CONFLICT (resource_id, key_prefix, key_name) DO UPDATE SET value = excluded.value
WHERE {{schema}}.labels.value IS DISTINCT FROM excluded.value;

-- name: LabelsDelete
-- Idempotent: deleting a key that is already gone is not an error (CC #4944). With $4 it
-- deletes only behind a stamp that wrote (afterWrite, below).
DELETE FROM {{schema}}.labels l
USING unnest($2::text[], $3::text[]) AS t(p, n)
WHERE l.resource_id = $1 AND l.key_prefix = t.p AND l.key_name = t.n
  AND (NOT $4::boolean OR current_setting('strata.wrote', true) = 'yes');

-- name: AnnotationsUpsert
INSERT INTO {{schema}}.annotations (resource_id, key_prefix, key_name, value)
SELECT $1, p, n, v FROM unnest($2::text[], $3::text[], $4::text[]) AS t(p, n, v)
WHERE NOT $5::boolean OR current_setting('strata.wrote', true) = 'yes'
ON CONFLICT (resource_id, key_prefix, key_name) DO UPDATE SET value = excluded.value
WHERE {{schema}}.annotations.value IS DISTINCT FROM excluded.value;

-- name: AnnotationsDelete
DELETE FROM {{schema}}.annotations a
USING unnest($2::text[], $3::text[]) AS t(p, n)
WHERE a.resource_id = $1 AND a.key_prefix = t.p AND a.key_name = t.n
  AND (NOT $4::boolean OR current_setting('strata.wrote', true) = 'yes');

-- afterWrite: the label and annotation statements above, given true as their last
-- parameter, write only when the transaction's strata.wrote is 'yes', which a stamp that may
-- write nothing (ResourceStampIfUnchanged) sets when it wrote. They follow it in the COMMIT's
-- pipeline, so they write exactly when it did, and a stamp that found its row overtaken
-- leaves a transaction with nothing to commit — no error, which would make the driver
-- prepare every statement of the pipeline again (pgx drops them from its statement cache on
-- any error in a batch). Not "the transaction has an id": an UPDATE that waited for the row
-- lock and then found the row moved on has taken one (heap_update, nextval), so a stale
-- stamp's transaction can have an id.

-- name: ResourceStamp
-- Records the change under a version drawn from the plain sequence, then writes the spec and
-- the version into the row, in one statement. No lock orders commits: readers wait for
-- versions still in flight instead (versions.go). If a reader has already settled the drawn
-- number (a GAP row took it between nextval and the insert), nothing is written and no row
-- is returned; the caller draws again. $5 is the schema revision the spec conforms to (NULL
-- for kinds without a schema), $6 the object's labels before the change (NULL on create), for
-- selector watches, $7 the object's status (server-written; NULL for most kinds), $8-$10 who
-- wrote it, from where, in which request (auth.AuditActor), $11 the org the object's org
-- reference named before the change (NULL unless the kind has one and this is a
-- modification), for org watches, $12 the renders the change can alter (renderScope), which
-- every replica's change poller drops (migration 0036).
WITH v AS MATERIALIZED (SELECT nextval('{{schema}}.resource_version_seq') AS rv),
c AS (
	INSERT INTO {{schema}}.changes (resource_version, kind, org, name, type, object, prev_labels, actor, remote_addr, request_id, prev_org, render_scope)
	SELECT v.rv, r.kind, r.org, r.name, $2,
	       jsonb_set(jsonb_set(jsonb_set($3::jsonb, '{metadata,resourceVersion}', to_jsonb(v.rv::text)),
	                 '{metadata,createdAt}', to_jsonb(r.created_at)), '{metadata,updatedAt}', to_jsonb(now())),
	       $6::jsonb, $8, $9, $10, $11::text, $12::text
	FROM v, {{schema}}.resources r
	WHERE r.id = $1
	ON CONFLICT (resource_version) DO NOTHING
	RETURNING resource_version
),
u AS (
	UPDATE {{schema}}.resources r SET spec = $4, schema_revision = $5, status = $7::jsonb, resource_version = c.resource_version, updated_at = now()
	FROM c WHERE r.id = $1
	RETURNING r.resource_version, r.created_at, r.updated_at
)
SELECT resource_version, created_at, updated_at FROM u;

-- name: ResourceStampAtCommit
-- ResourceStamp for a write whose statements go out with its COMMIT (db.Tx.SendWithCommit):
-- the change row's insert has no ON CONFLICT, so a number a reader settled first fails the
-- statement (a unique violation on changes_pkey) and with it the transaction, which must not
-- commit its other writes without their change; the caller runs the write again
-- (resource.versionTaken). Same parameters and result as ResourceStamp.
WITH v AS MATERIALIZED (SELECT nextval('{{schema}}.resource_version_seq') AS rv),
c AS (
	INSERT INTO {{schema}}.changes (resource_version, kind, org, name, type, object, prev_labels, actor, remote_addr, request_id, prev_org, render_scope)
	SELECT v.rv, r.kind, r.org, r.name, $2,
	       jsonb_set(jsonb_set(jsonb_set($3::jsonb, '{metadata,resourceVersion}', to_jsonb(v.rv::text)),
	                 '{metadata,createdAt}', to_jsonb(r.created_at)), '{metadata,updatedAt}', to_jsonb(now())),
	       $6::jsonb, $8, $9, $10, $11::text, $12::text
	FROM v, {{schema}}.resources r
	WHERE r.id = $1
	RETURNING resource_version
),
u AS (
	UPDATE {{schema}}.resources r SET spec = $4, schema_revision = $5, status = $7::jsonb, resource_version = c.resource_version, updated_at = now()
	FROM c WHERE r.id = $1
	RETURNING r.resource_version, r.created_at, r.updated_at
)
SELECT resource_version, created_at, updated_at FROM u;

-- name: ResourceStampIfUnchanged
-- ResourceStamp for a write computed from an unlocked read (a copy of the object in the list
-- index, Service.updateFromIndex), sent first in its COMMIT's pipeline: the row is updated
-- only while it still carries $13, the version the writer read, and the UPDATE's row lock
-- then holds it to the end of the transaction, so the writes behind it apply to exactly the
-- object the writer read. An UPDATE that waited for the lock re-checks the newest row
-- version. When the row has moved on or is gone, nothing is written, no version is drawn and
-- no row is returned, and the label, annotation and audit statements behind it write nothing
-- either (afterWrite: strata.wrote stays unset): the caller writes under the row lock instead. The version is drawn
-- by the UPDATE, so the change row follows it; a number a reader settled first fails the
-- statement (changes_pkey, as ResourceStampAtCommit). Same parameters (and $13) and result
-- as ResourceStamp.
WITH u AS (
	UPDATE {{schema}}.resources r
	SET spec = $4, schema_revision = $5, status = $7::jsonb,
	    resource_version = nextval('{{schema}}.resource_version_seq'), updated_at = now()
	WHERE r.id = $1 AND r.resource_version = $13
	RETURNING r.kind, r.org, r.name, r.resource_version, r.created_at, r.updated_at
),
c AS (
	INSERT INTO {{schema}}.changes (resource_version, kind, org, name, type, object, prev_labels, actor, remote_addr, request_id, prev_org, render_scope)
	SELECT u.resource_version, u.kind, u.org, u.name, $2,
	       jsonb_set(jsonb_set(jsonb_set($3::jsonb, '{metadata,resourceVersion}', to_jsonb(u.resource_version::text)),
	                 '{metadata,createdAt}', to_jsonb(u.created_at)), '{metadata,updatedAt}', to_jsonb(u.updated_at)),
	       $6::jsonb, $8, $9, $10, $11::text, $12::text
	FROM u
)
SELECT resource_version, created_at, updated_at, set_config('strata.wrote', 'yes', true) FROM u;

-- name: ResourceStampDeleted
-- The deleted object carries the deletion's resourceVersion, as Kubernetes' DELETED events do,
-- so a watcher can resume from it. No row when a reader settled the drawn number first (see
-- ResourceStamp); the caller draws again. $9 is the render_scope (ResourceStamp).
WITH v AS MATERIALIZED (SELECT nextval('{{schema}}.resource_version_seq') AS rv)
INSERT INTO {{schema}}.changes (resource_version, kind, org, name, type, object, prev_labels, actor, remote_addr, request_id, render_scope)
SELECT v.rv, $1, $2, $3, 'DELETED', jsonb_set($4::jsonb, '{metadata,resourceVersion}', to_jsonb(v.rv::text)), $5::jsonb, $6, $7, $8, $9::text FROM v
ON CONFLICT (resource_version) DO NOTHING
RETURNING resource_version;

-- name: ResourceStampDeletedAtCommit
-- ResourceStampDeleted for a deletion that goes out with its COMMIT (see ResourceStampAtCommit):
-- a number a reader settled first fails the statement, and the transaction, instead of
-- inserting nothing.
WITH v AS MATERIALIZED (SELECT nextval('{{schema}}.resource_version_seq') AS rv)
INSERT INTO {{schema}}.changes (resource_version, kind, org, name, type, object, prev_labels, actor, remote_addr, request_id, render_scope)
SELECT v.rv, $1, $2, $3, 'DELETED', jsonb_set($4::jsonb, '{metadata,resourceVersion}', to_jsonb(v.rv::text)), $5::jsonb, $6, $7, $8, $9::text FROM v
RETURNING resource_version;

-- name: ResourceGet
SELECT r.name, r.org, r.spec, r.resource_version, r.created_at, r.updated_at,
       coalesce((SELECT jsonb_object_agg(CASE WHEN l.key_prefix = '' THEN l.key_name ELSE l.key_prefix || '/' || l.key_name END, l.value)
                 FROM {{schema}}.labels l WHERE l.resource_id = r.id), '{}'),
       coalesce((SELECT jsonb_object_agg(CASE WHEN a.key_prefix = '' THEN a.key_name ELSE a.key_prefix || '/' || a.key_name END, a.value)
                 FROM {{schema}}.annotations a WHERE a.resource_id = r.id), '{}'),
       coalesce(r.schema_revision, 0), r.status, r.id
FROM {{schema}}.resources r
WHERE r.kind = $1 AND r.org = $2 AND r.name = $3;

-- name: ResourceList
-- $8 keeps the objects of a global kind whose org reference, the spec member $9 (a node's
-- org, resource.Kind.OrgMember), names that org; '' keeps all (?org=, ListOptions.InOrg).
-- The selector marker (a TRUE followed by a comment) becomes the label selector compiled
-- from the Sel* fragments below (withSelector). Each row of the kind is tested in name order until the page is
-- full: right when many objects match (a page fills quickly). For a selective selector the
-- compiled condition starts with r.id = ANY(the few ids drive found), and PostgreSQL reads
-- those rows by primary key and sorts them instead.
SELECT r.name, r.org, r.spec, r.resource_version, r.created_at, r.updated_at,
       coalesce((SELECT jsonb_object_agg(CASE WHEN l.key_prefix = '' THEN l.key_name ELSE l.key_prefix || '/' || l.key_name END, l.value)
                 FROM {{schema}}.labels l WHERE l.resource_id = r.id), '{}'),
       coalesce((SELECT jsonb_object_agg(CASE WHEN a.key_prefix = '' THEN a.key_name ELSE a.key_prefix || '/' || a.key_name END, a.value)
                 FROM {{schema}}.annotations a WHERE a.resource_id = r.id), '{}'),
       coalesce(r.schema_revision, 0), r.status, r.id
FROM {{schema}}.resources r
WHERE r.kind = $1 AND r.org = $2 AND r.name > $3
  AND ($5::boolean OR r.name = ANY($6::text[])
       OR EXISTS (SELECT 1 FROM unnest($7::text[]) p WHERE starts_with(r.name, p)))
  AND ($8::text = '' OR r.spec ->> $9::text = $8)
  AND TRUE /*selector*/
ORDER BY r.name
LIMIT $4;

-- name: SelectorCounts
-- A list's resourceVersion and, in the second column, the count of objects meeting each
-- positive requirement of its selector, each capped at $1 (the counts marker becomes an array
-- of CountIn / CountExists fragments, see withCounts): one round trip that decides the plan.
-- The counts marker is a CASE: when some requirement has no object at all (one index probe
-- each, ExistsIn / ExistsExists), the answer is {0} without counting the others, so a
-- selector no object meets costs a few index probes and nothing else.
-- The resourceVersion is the newest change the list's snapshot sees (List runs in one
-- REPEATABLE READ snapshot), or the compaction point when the log is pruned to nothing.
-- Versions below it that the snapshot misses (writers in flight) are settled and applied to
-- the page afterwards (versions.go), so the version never covers a change the items lack.
SELECT greatest((SELECT coalesce(max(resource_version), 0) FROM {{schema}}.changes),
                (SELECT coalesce(max(compacted_through), 0) FROM {{schema}}.watch_compaction)),
       NULL::bigint[] /*counts*/
WHERE $1::int IS NOT NULL;

-- name: CountIn
(SELECT count(*) FROM (SELECT 1 FROM {{schema}}.labels l WHERE l.key_prefix = $P AND l.key_name = $N AND l.value = ANY ($V::text[]) LIMIT $1) c)

-- name: CountExists
(SELECT count(*) FROM (SELECT 1 FROM {{schema}}.labels l WHERE l.key_prefix = $P AND l.key_name = $N LIMIT $1) c)

-- name: ExistsIn
EXISTS (SELECT 1 FROM {{schema}}.labels l WHERE l.key_prefix = $P AND l.key_name = $N AND l.value = ANY ($V::text[]))

-- name: ExistsExists
EXISTS (SELECT 1 FROM {{schema}}.labels l WHERE l.key_prefix = $P AND l.key_name = $N)

-- name: LabelProbeIn
-- Up to $4 ids of objects whose label ($1, $2) has one of the values $3: an index-only
-- range of labels_selector.
SELECT l.resource_id FROM {{schema}}.labels l
WHERE l.key_prefix = $1 AND l.key_name = $2 AND l.value = ANY($3::text[])
LIMIT $4;

-- name: LabelProbeExists
SELECT l.resource_id FROM {{schema}}.labels l
WHERE l.key_prefix = $1 AND l.key_name = $2
LIMIT $3;

-- name: ResourceVersionCurrent
SELECT coalesce(max(resource_version), 0) FROM {{schema}}.changes;

-- name: NodeDropForeignMemberships
-- $1 node id, $2 its new org, $3 the Group kind; the groups it left.
DELETE FROM {{schema}}.group_members m
USING {{schema}}.resources g
WHERE m.node_id = $1 AND g.id = m.group_id AND g.kind = $3 AND g.org <> $2
RETURNING m.group_id;

-- name: OrgDependents
-- What lives in an org: its nodes (spec.org), its groups, and the objects of user kinds inside
-- orgs (every object whose org column names it that is not a group).
SELECT (SELECT count(*) FROM {{schema}}.resources WHERE kind = $2 AND spec ->> 'org' = $1),
       (SELECT count(*) FROM {{schema}}.resources WHERE kind = $3 AND org = $1),
       (SELECT count(*) FROM {{schema}}.resources WHERE kind <> $3 AND org = $1);

-- name: OrgDependentsLock
-- Locks everything in an org for a cascading delete (ResourceGetByID then reads them).
SELECT r.id FROM {{schema}}.resources r
WHERE (r.kind = $2 AND r.spec ->> 'org' = $1) OR r.org = $1
ORDER BY r.id
FOR UPDATE OF r;

-- name: GroupLockShare
-- FOR KEY SHARE: enough to keep the group from being deleted until commit, and it does not
-- conflict with GroupsLockForStatus, which other membership writers take at their end.
SELECT id FROM {{schema}}.resources
WHERE kind = $1 AND org = $2 AND name = $3
FOR KEY SHARE;

-- name: NodeLockShare
SELECT id, coalesce(spec ->> 'org', '') FROM {{schema}}.resources
WHERE kind = $1 AND org = '' AND name = $2
FOR SHARE;

-- name: MemberAdd
INSERT INTO {{schema}}.group_members (group_id, node_id) VALUES ($1, $2)
ON CONFLICT DO NOTHING;

-- name: MemberRemove
DELETE FROM {{schema}}.group_members m
USING {{schema}}.resources n
WHERE m.group_id = $1 AND m.node_id = n.id AND n.kind = $2 AND n.org = '' AND n.name = $3;


-- name: GroupMembers
-- $1 Group kind, $2 org, $3 group, $4 Node kind, $5 whether the group has a selector (the
-- selector marker becomes it, compiled as for lists), $6 the last node name of the previous
-- page, $7 the limit. Static members are always nodes of the group's org (AddMember checks it,
-- a move drops them), so both halves read the org's nodes.
WITH g AS (SELECT id FROM {{schema}}.resources WHERE kind = $1 AND org = $2 AND name = $3),
m AS (
	SELECT r.name,
	       EXISTS (SELECT 1 FROM {{schema}}.group_members gm, g WHERE gm.group_id = g.id AND gm.node_id = r.id) AS static,
	       ($5::boolean AND TRUE /*selector*/) AS selected
	FROM {{schema}}.resources r
	WHERE r.kind = $4 AND r.spec ->> 'org' = $2 AND r.name > $6
)
SELECT name, static, selected FROM m
WHERE static OR selected
ORDER BY name
LIMIT $7;

-- name: SelIn
-- The Sel* fragments are the label selector's requirements, one per requirement. Each is a
-- per-row probe of the labels' unique index (resource_id, key_prefix, key_name). OFFSET 0
-- keeps it one: without it PostgreSQL may pull the EXISTS up into a semi-join or turn it into
-- a hashed subplan, both of which read every label row carrying the key (20,000 of them for
-- k1=v4 at 100k objects) before the first row is returned, and then sort. List has already
-- chosen the plan (walk the names, or start from a few ids); the planner's own choice took
-- 35 ms where the walk takes under 2 ms (docs/benchmarks.md).
EXISTS (SELECT 1 FROM {{schema}}.labels l WHERE l.resource_id = r.id AND l.key_prefix = $P AND l.key_name = $N AND l.value = ANY ($V::text[]) OFFSET 0)

-- name: SelNotIn
NOT EXISTS (SELECT 1 FROM {{schema}}.labels l WHERE l.resource_id = r.id AND l.key_prefix = $P AND l.key_name = $N AND l.value = ANY ($V::text[]) OFFSET 0)

-- name: SelExists
EXISTS (SELECT 1 FROM {{schema}}.labels l WHERE l.resource_id = r.id AND l.key_prefix = $P AND l.key_name = $N OFFSET 0)

-- name: SelNotExists
NOT EXISTS (SELECT 1 FROM {{schema}}.labels l WHERE l.resource_id = r.id AND l.key_prefix = $P AND l.key_name = $N OFFSET 0)

-- name: GroupsLockShare
SELECT id, name FROM {{schema}}.resources
WHERE kind = $1 AND org = $2 AND name = ANY($3::text[])
ORDER BY name
FOR KEY SHARE;

-- name: MembershipsSync
-- Makes the group ids $2 the node $1's complete set of static memberships; returns the
-- groups whose memberships were added or removed.
WITH gone AS (
	DELETE FROM {{schema}}.group_members WHERE node_id = $1 AND NOT (group_id = ANY($2::bigint[]))
	RETURNING group_id
), added AS (
	INSERT INTO {{schema}}.group_members (group_id, node_id)
	SELECT g, $1 FROM unnest($2::bigint[]) AS g
	ON CONFLICT DO NOTHING
	RETURNING group_id
)
SELECT array(SELECT group_id FROM gone UNION ALL SELECT group_id FROM added)::bigint[];

-- name: AnalyzeResources
ANALYZE {{schema}}.resources, {{schema}}.labels, {{schema}}.annotations, {{schema}}.group_members;

-- name: GroupSelectorPut
-- $1 group id, $2 spec.selector, $3 its parsed requirements (migration 0009).
INSERT INTO {{schema}}.group_selectors (group_id, org, selector, requirements)
SELECT r.id, r.org, $2, $3 FROM {{schema}}.resources r WHERE r.id = $1
ON CONFLICT (group_id) DO UPDATE
SET org = excluded.org, selector = excluded.selector, requirements = excluded.requirements
WHERE {{schema}}.group_selectors.requirements IS DISTINCT FROM excluded.requirements
   OR {{schema}}.group_selectors.selector IS DISTINCT FROM excluded.selector
   OR {{schema}}.group_selectors.org IS DISTINCT FROM excluded.org;

-- name: GroupSelectorDelete
DELETE FROM {{schema}}.group_selectors WHERE group_id = $1;

-- name: GroupSelectorsPending
-- Selectors not parsed yet (partial index group_selectors_pending).
SELECT group_id, selector FROM {{schema}}.group_selectors WHERE requirements IS NULL ORDER BY group_id;

-- name: GroupSelectorFill
-- Only while the selector is still the text that was parsed.
UPDATE {{schema}}.group_selectors SET requirements = $3
WHERE group_id = $1 AND selector = $2 AND requirements IS NULL;

-- name: NamesMatch
-- Whether any resource of kind $1 ('' : any kind but $4 and $5) in no org has the name $2, or,
-- with $3, a name starting with $2: the scope migration's evidence of what a legacy scope
-- name was meant for.
SELECT EXISTS (
	SELECT 1 FROM {{schema}}.resources
	WHERE org = ''
	  AND (kind = $1 OR ($1 = '' AND kind <> $4 AND kind <> $5))
	  AND (name = $2 OR ($3 AND starts_with(name, $2))));

-- name: GroupsLockForStatus
-- Locks the groups whose static memberships a transaction changed, in id order (so two such
-- transactions never wait for each other in a cycle), FOR NO KEY UPDATE: it does not conflict
-- with the FOR KEY SHARE locks membership writes take on groups (GroupLockShare), so writers
-- of memberships only queue here, at the end of their transactions. Groups deleted meanwhile
-- are simply not returned.
SELECT id FROM {{schema}}.resources
WHERE id = ANY($1::bigint[])
ORDER BY id
FOR NO KEY UPDATE;

-- name: GroupStaticCounts
-- The number of static members of each group, read after GroupsLockForStatus (a statement of
-- its own, so its snapshot includes every membership committed before the locks were granted).
SELECT g.id, (SELECT count(*) FROM {{schema}}.group_members m WHERE m.group_id = g.id)
FROM unnest($1::bigint[]) AS g(id);

-- name: NodeMembershipsDrop
-- Drops a node's static memberships before the node is deleted, naming the groups, so each is
-- stamped with its new member count.
DELETE FROM {{schema}}.group_members WHERE node_id = $1 RETURNING group_id;

-- name: ResourceRename
-- The row keeps its id, so labels, annotations, memberships and pillars follow it; the
-- (kind, org, name) unique key refuses a name that is taken.
UPDATE {{schema}}.resources SET name = $2 WHERE id = $1;
