-- strata:compatible-since 15
-- Secret pillar categories (issue 22, package internal/pillar). A secret category's rows are
-- stored sealed (package secret: AES-256-GCM with a data key per value, wrapped by a
-- key-encryption key from the operator's key files, bound to the row's target and category):
-- sealed holds the ciphertext of the row's JSON, and data holds only its shape — every leaf
-- replaced by the string "(secret)" — so everything that reads data (an older replica, the
-- exports, SQL) sees where values are set and never what they are. The history keeps the
-- sealed value beside the masked one, so a restore still has the plaintext to restore.
--
-- Additive: release 15 neither reads nor writes these columns. A replica of that release
-- would write a secret category in plaintext (and leave the stale sealed value): make
-- categories secret only once every replica runs this release (docs/security.md).
ALTER TABLE {{schema}}.pillar_categories ADD COLUMN secret boolean NOT NULL DEFAULT false;
ALTER TABLE {{schema}}.pillars ADD COLUMN sealed bytea;
ALTER TABLE {{schema}}.pillar_history ADD COLUMN old_sealed bytea, ADD COLUMN new_sealed bytea;

-- pillar_render_sealed(node): pillar_render (migration 0018) with each row's sealed value.
-- A new function beside the old one, whose callers (release 15) keep working on masked data.
CREATE FUNCTION {{schema}}.pillar_render_sealed(p_node text)
RETURNS TABLE (layer int, target text, priority int, selector text, static boolean, category text, data jsonb, sealed bytea)
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

-- node_pillars (migration 0009) never returns plaintext of a secret, and never a masked
-- pillar either: states rendered with "(secret)" in them would be applied. A node whose
-- pillar holds a secret row gets one row {"_errors": [...]} instead, which Salt shows and
-- refuses to run states over (research salt-client-behaviour.md §3a) — a deliberate
-- departure from the NULL row of other failures, because this one has a remedy to name.
CREATE OR REPLACE FUNCTION {{schema}}.node_pillars(minion_id text) RETURNS TABLE (pillar jsonb)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	nid bigint;
	norg text;
	mode jsonb;
	lbl jsonb;
	acc jsonb[];
	secrets text[];
BEGIN
	BEGIN
		SELECT r.id, r.spec ->> 'org' INTO nid, norg
		FROM {{schema}}.resources r
		WHERE r.kind = 'Node' AND r.org = '' AND r.name = minion_id;
		IF nid IS NULL THEN
			SELECT s.value INTO mode FROM {{schema}}.settings s WHERE s.key = 'salt_unknown_minion';
			IF mode IS NULL OR mode = '"empty"' THEN
				RETURN;
			END IF;
			IF mode <> '"error"' THEN
				RAISE EXCEPTION 'setting salt_unknown_minion is %, want "empty" or "error"', mode;
			END IF;
			RAISE EXCEPTION 'unknown minion %', minion_id;
		END IF;
		IF EXISTS (SELECT 1 FROM {{schema}}.group_selectors s WHERE s.org = norg AND s.requirements IS NULL) THEN
			RAISE EXCEPTION 'a group selector of org % is not parsed yet', norg;
		END IF;
		SELECT coalesce(jsonb_object_agg(CASE WHEN l.key_prefix = '' THEN l.key_name ELSE l.key_prefix || '/' || l.key_name END, l.value), '{}')
		INTO lbl FROM {{schema}}.labels l WHERE l.resource_id = nid;
		SELECT array_agg(l.data ORDER BY l.layer, l.priority, l.target COLLATE "C", l.category COLLATE "C"),
		       array_agg(DISTINCT l.category) FILTER (WHERE l.secret)
		INTO acc, secrets
		FROM (
			WITH grp AS (
				SELECT m.group_id AS id
				FROM {{schema}}.group_members m WHERE m.node_id = nid
				UNION
				SELECT s.group_id
				FROM {{schema}}.group_selectors s
				WHERE s.org = norg AND NOT EXISTS (
					SELECT 1 FROM jsonb_array_elements(s.requirements) q(r)
					WHERE NOT CASE r ->> 'op'
						WHEN 'in' THEN lbl ? (r ->> 'key') AND (r -> 'values') ? (lbl ->> (r ->> 'key'))
						WHEN 'notin' THEN NOT (lbl ? (r ->> 'key') AND (r -> 'values') ? (lbl ->> (r ->> 'key')))
						WHEN 'exists' THEN lbl ? (r ->> 'key')
						WHEN '!' THEN NOT lbl ? (r ->> 'key')
						ELSE {{schema}}.node_pillars_fail('unknown selector operator ' || coalesce(r ->> 'op', 'null'))
					END)
			)
			SELECT 0 AS layer, 0 AS priority, ''::text COLLATE "C" AS target, p.category, p.data, p.sealed IS NOT NULL AS secret
			FROM {{schema}}.pillars p WHERE p.resource_id IS NULL
			UNION ALL
			SELECT 1, 0, o.name, p.category, p.data, p.sealed IS NOT NULL
			FROM {{schema}}.resources o JOIN {{schema}}.pillars p ON p.resource_id = o.id
			WHERE o.kind = 'Org' AND o.org = '' AND o.name = norg
			UNION ALL
			SELECT 2, CASE WHEN jsonb_typeof(g.spec -> 'priority') = 'number' THEN (g.spec ->> 'priority')::int ELSE 0 END,
			       g.name, p.category, p.data, p.sealed IS NOT NULL
			FROM grp JOIN {{schema}}.resources g ON g.id = grp.id
			JOIN {{schema}}.pillars p ON p.resource_id = g.id
			WHERE g.kind = 'Group' AND g.org = norg
			UNION ALL
			SELECT 3, 0, '', p.category, p.data, p.sealed IS NOT NULL
			FROM {{schema}}.pillars p WHERE p.resource_id = nid
		) l;
	EXCEPTION WHEN OTHERS THEN
		RAISE WARNING 'node_pillars(%): % (SQLSTATE %)', minion_id, SQLERRM, SQLSTATE;
		pillar := NULL;
		RETURN NEXT;
		RETURN;
	END;
	IF secrets IS NOT NULL THEN
		pillar := jsonb_build_object('_errors', jsonb_build_array(format(
			'strata: the pillar of minion %s holds secret categories (%s), which strata never serves through SQL — use the http_json ext_pillar with a token holding pillars:render and pillars:read-secrets on nodes (docs/salt.md)',
			minion_id, array_to_string(secrets, ', '))));
		RETURN NEXT;
		RETURN;
	END IF;
	RETURN QUERY SELECT u.d FROM unnest(acc) WITH ORDINALITY AS u(d, i) ORDER BY u.i;
END;
$$;
REVOKE ALL ON FUNCTION {{schema}}.node_pillars(text) FROM PUBLIC;
