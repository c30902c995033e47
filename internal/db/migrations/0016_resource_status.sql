-- strata:compatible-since 15
-- status: what the server reports about an object, beside the spec its clients write
-- (Kubernetes' split). Only the server writes it; writes carry it over unchanged. Groups
-- report {"staticMembers": N} and are stamped MODIFIED whenever a static membership is
-- added or removed (package internal/resource, groups.go), so a group watch sees membership
-- changes. NULL for every other kind, and for groups until their first membership change
-- under this release. Additive: release 15 neither reads nor writes it.
ALTER TABLE {{schema}}.resources ADD COLUMN status jsonb;

-- Render invalidation (migration 0014) ignores updates that change no render: a row whose
-- kind, org, name and spec are as they were (a group stamped with its member count, an
-- object whose annotations or labels alone changed; labels have their own trigger). Without
-- this, every membership change would drop every render of the group's org, where the
-- membership trigger drops the one node's.
CREATE OR REPLACE FUNCTION {{schema}}.notify_pillars_resources() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	scopes text[];
BEGIN
	IF TG_OP = 'INSERT' THEN
		SELECT array_agg({{schema}}.pillar_scope(c.kind, c.org, c.name)) INTO scopes FROM new_rows c;
	ELSIF TG_OP = 'DELETE' THEN
		SELECT array_agg({{schema}}.pillar_scope(c.kind, c.org, c.name)) INTO scopes FROM old_rows c;
	ELSE
		SELECT array_agg(s) INTO scopes FROM (
			SELECT {{schema}}.pillar_scope(n.kind, n.org, n.name)
			FROM new_rows n LEFT JOIN old_rows o ON o.id = n.id
			WHERE o.id IS NULL OR (n.kind, n.org, n.name) IS DISTINCT FROM (o.kind, o.org, o.name)
			   OR n.spec IS DISTINCT FROM o.spec
			UNION ALL
			SELECT {{schema}}.pillar_scope(o.kind, o.org, o.name)
			FROM old_rows o LEFT JOIN new_rows n ON n.id = o.id
			WHERE n.id IS NULL OR (n.kind, n.org, n.name) IS DISTINCT FROM (o.kind, o.org, o.name)
			   OR n.spec IS DISTINCT FROM o.spec) AS t(s);
	END IF;
	PERFORM {{schema}}.notify_pillar_scopes(TG_TABLE_SCHEMA || '.pillars', scopes);
	RETURN NULL;
END;
$$;
