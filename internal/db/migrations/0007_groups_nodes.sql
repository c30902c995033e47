-- strata:compatible-since 2
-- Nodes and groups (package internal/resource). Both are rows of resources: a node is a global
-- kind (its name is the Salt minion id) whose spec.org names its org; a group lives in an org.
-- Additive only: the previous release neither reads nor writes these.

-- Static group membership. Both ends cascade, so deleting a node or a group can never leave a
-- membership pointing at nothing; the primary key makes a membership impossible to duplicate
-- whatever the concurrency (PUT is INSERT … ON CONFLICT DO NOTHING).
CREATE TABLE {{schema}}.group_members (
	group_id bigint NOT NULL REFERENCES {{schema}}.resources (id) ON DELETE CASCADE,
	node_id bigint NOT NULL REFERENCES {{schema}}.resources (id) ON DELETE CASCADE,
	added_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (group_id, node_id)
);
CREATE INDEX group_members_node ON {{schema}}.group_members (node_id);

-- The nodes of one org, in name order: org deletion checks, group members by selector and
-- (later) pillar targeting all ask for them.
CREATE INDEX resources_node_org ON {{schema}}.resources ((spec ->> 'org'), name COLLATE "C")
	WHERE kind = 'Node';

-- Label selectors start from the rows of one requirement (package internal/resource, List):
-- the key and value lead, and the resource id is included so the probe is an index-only scan.
-- It replaces labels_key_value, whose columns it starts with.
CREATE INDEX labels_selector ON {{schema}}.labels (key_prefix, key_name, value) INCLUDE (resource_id);
DROP INDEX {{schema}}.labels_key_value;

-- The per-object checks of a selector list (one probe per requirement and object, on the
-- unique key) read the label's value too: carrying it in the unique index makes each probe an
-- index-only scan instead of an index scan plus a heap fetch. Same key columns, so the
-- uniqueness and ON CONFLICT (resource_id, key_prefix, key_name) are unchanged; the swap runs
-- in this migration's transaction, so no writer ever sees the table without the constraint.
ALTER TABLE {{schema}}.labels DROP CONSTRAINT labels_resource_key,
	ADD CONSTRAINT labels_resource_key UNIQUE (resource_id, key_prefix, key_name) INCLUDE (value);
