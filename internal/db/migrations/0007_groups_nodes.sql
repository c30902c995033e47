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

-- labels_match reports whether the labels of resource rid satisfy a label selector given as a
-- JSON array of requirements {op: in|notin|exists|!, p: key prefix, n: key name, v: values}
-- (package internal/resource builds it from a parsed selector; values are bound, never
-- spliced into SQL). A resource matches when no requirement fails; each requirement is one
-- probe of the labels' unique index (resource_id, key_prefix, key_name). NOT EXISTS, never
-- NOT IN, so notin and !key match resources without the key (the NULL trap of NOT IN).
CREATE FUNCTION {{schema}}.labels_match(rid bigint, sel jsonb) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT NOT EXISTS (
		SELECT 1 FROM jsonb_to_recordset(sel) AS q(op text, p text, n text, v text[])
		WHERE CASE q.op
			WHEN 'in' THEN NOT EXISTS (SELECT 1 FROM {{schema}}.labels l
				WHERE l.resource_id = rid AND l.key_prefix = q.p AND l.key_name = q.n AND l.value = ANY (q.v))
			WHEN 'notin' THEN EXISTS (SELECT 1 FROM {{schema}}.labels l
				WHERE l.resource_id = rid AND l.key_prefix = q.p AND l.key_name = q.n AND l.value = ANY (q.v))
			WHEN 'exists' THEN NOT EXISTS (SELECT 1 FROM {{schema}}.labels l
				WHERE l.resource_id = rid AND l.key_prefix = q.p AND l.key_name = q.n)
			ELSE EXISTS (SELECT 1 FROM {{schema}}.labels l
				WHERE l.resource_id = rid AND l.key_prefix = q.p AND l.key_name = q.n)
		END)
$$;

-- Label selectors start from the rows of one requirement (package internal/resource, List):
-- the key and value lead, and the resource id is included so the probe is an index-only scan.
-- It replaces labels_key_value, whose columns it starts with.
CREATE INDEX labels_selector ON {{schema}}.labels (key_prefix, key_name, value) INCLUDE (resource_id);
DROP INDEX {{schema}}.labels_key_value;
