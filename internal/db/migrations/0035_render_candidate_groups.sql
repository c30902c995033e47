-- strata:compatible-since 15
-- Cold renders (issue 31, item 3): pillar_render_sealed (migration 0025) found the groups
-- whose rows apply to a node by walking every group of its org and probing the node's
-- membership in each (100 groups, 100 probes per render in bench/node-pillars.sh); PostgreSQL
-- spent most of a cold render there. It now starts from the candidates only: the node's
-- static memberships (group_members_node) and its org's groups with a selector
-- (group_selectors_org, which the trigger of migration 0009 keeps equal to spec.selector),
-- then reads those groups as before (their org must be the node's: a static membership of a
-- group of another org still counts for nothing). Same rows, same columns: in pgbench the
-- function answers 1.5-2.5x as many calls (docs/benchmarks.md, "Cold renders").
-- Only the function's body changes, so every release that calls it (25 on) or does not (15
-- to 24, which call pillar_render) stays correct beside it.
CREATE OR REPLACE FUNCTION {{schema}}.pillar_render_sealed(p_node text)
RETURNS TABLE (layer int, target text, priority int, selector text, static boolean, category text, data jsonb, sealed bytea)
LANGUAGE plpgsql STABLE AS $$
BEGIN
	RETURN QUERY
	WITH n AS (
		SELECT id, spec ->> 'org' AS org FROM {{schema}}.resources WHERE kind = 'Node' AND org = '' AND name = p_node
	), o AS (
		SELECT r.id, r.name FROM {{schema}}.resources r JOIN n ON r.kind = 'Org' AND r.org = '' AND r.name = n.org
	), c AS (
		SELECT m.group_id AS id, true AS static FROM {{schema}}.group_members m JOIN n ON m.node_id = n.id
		UNION ALL
		SELECT s.group_id, false FROM {{schema}}.group_selectors s JOIN n ON s.org = n.org
		WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.group_members m WHERE m.group_id = s.group_id AND m.node_id = n.id)
	), g AS (
		SELECT r.id, r.name,
		       CASE WHEN jsonb_typeof(r.spec -> 'priority') = 'number' THEN (r.spec ->> 'priority')::int ELSE 0 END AS priority,
		       coalesce(r.spec ->> 'selector', '') AS selector,
		       c.static
		FROM c JOIN {{schema}}.resources r ON r.id = c.id JOIN n ON r.kind = 'Group' AND r.org = n.org
	)
	SELECT -1 AS layer, coalesce(n.org, '') AS target, 0 AS priority, ''::text AS selector, false AS static, ''::text AS category,
	       jsonb_build_object(
	         'labels', coalesce((SELECT jsonb_object_agg(CASE WHEN l.key_prefix = '' THEN l.key_name ELSE l.key_prefix || '/' || l.key_name END, l.value)
	                             FROM {{schema}}.labels l WHERE l.resource_id = n.id), '{}'),
	         'mergeLists', (SELECT value FROM {{schema}}.settings WHERE key = 'pillar_merge_lists')) AS data,
	       NULL::bytea AS sealed
	FROM n
	UNION ALL
	SELECT 0, '', 0, '', false, p.category, p.data, p.sealed FROM {{schema}}.pillars p WHERE p.resource_id IS NULL AND EXISTS (SELECT 1 FROM n)
	UNION ALL
	SELECT 1, o.name, 0, '', false, p.category, p.data, p.sealed FROM {{schema}}.pillars p JOIN o ON p.resource_id = o.id
	UNION ALL
	SELECT 2, g.name, g.priority, g.selector, g.static, p.category, p.data, p.sealed FROM {{schema}}.pillars p JOIN g ON p.resource_id = g.id
	WHERE g.static OR g.selector <> ''
	UNION ALL
	SELECT 3, p_node, 0, '', false, p.category, p.data, p.sealed FROM {{schema}}.pillars p JOIN n ON p.resource_id = n.id;
END;
$$;
