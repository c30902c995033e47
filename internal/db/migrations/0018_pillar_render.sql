-- strata:compatible-since 15
-- pillar_render(node): every row a merged render of the node needs, in merge-layer order
-- (package internal/pillar, PillarRender), as a function so that its plan is cached in the
-- session whatever the client's query mode. Behind a transaction-mode pooler strata sends
-- statements unprepared (default_query_exec_mode=exec or simple_protocol), and PostgreSQL
-- planned this statement on every render — four times the cost of running it
-- (docs/benchmarks.md); a PL/pgSQL function keeps its plan for the server connection's life.
-- The kinds and the mergeLists setting's key are written out, so the cached (generic) plan
-- knows their selectivity. Additive: release 15 does not call it.
CREATE FUNCTION {{schema}}.pillar_render(p_node text)
RETURNS TABLE (layer int, target text, priority int, selector text, static boolean, category text, data jsonb)
LANGUAGE plpgsql STABLE AS $$
BEGIN
	RETURN QUERY
	WITH n AS (
		SELECT id, spec ->> 'org' AS org FROM {{schema}}.resources WHERE kind = 'Node' AND org = '' AND name = p_node
	), o AS (
		SELECT r.id, r.name FROM {{schema}}.resources r JOIN n ON r.kind = 'Org' AND r.org = '' AND r.name = n.org
	), g AS (
		SELECT r.id, r.name,
		       CASE WHEN jsonb_typeof(r.spec -> 'priority') = 'number' THEN (r.spec ->> 'priority')::int ELSE 0 END AS priority,
		       coalesce(r.spec ->> 'selector', '') AS selector,
		       EXISTS (SELECT 1 FROM {{schema}}.group_members m WHERE m.group_id = r.id AND m.node_id = n.id OFFSET 0) AS static
		FROM {{schema}}.resources r JOIN n ON r.kind = 'Group' AND r.org = n.org
	)
	SELECT -1 AS layer, coalesce(n.org, '') AS target, 0 AS priority, ''::text AS selector, false AS static, ''::text AS category,
	       jsonb_build_object(
	         'labels', coalesce((SELECT jsonb_object_agg(CASE WHEN l.key_prefix = '' THEN l.key_name ELSE l.key_prefix || '/' || l.key_name END, l.value)
	                             FROM {{schema}}.labels l WHERE l.resource_id = n.id), '{}'),
	         'mergeLists', (SELECT value FROM {{schema}}.settings WHERE key = 'pillar_merge_lists')) AS data
	FROM n
	UNION ALL
	SELECT 0, '', 0, '', false, p.category, p.data FROM {{schema}}.pillars p WHERE p.resource_id IS NULL AND EXISTS (SELECT 1 FROM n)
	UNION ALL
	SELECT 1, o.name, 0, '', false, p.category, p.data FROM {{schema}}.pillars p JOIN o ON p.resource_id = o.id
	UNION ALL
	SELECT 2, g.name, g.priority, g.selector, g.static, p.category, p.data FROM {{schema}}.pillars p JOIN g ON p.resource_id = g.id
	WHERE g.static OR g.selector <> ''
	UNION ALL
	SELECT 3, p_node, 0, '', false, p.category, p.data FROM {{schema}}.pillars p JOIN n ON p.resource_id = n.id;
END;
$$;
