-- strata:compatible-since 2
-- Salt's postgres ext_pillar (issue 9): {{schema}}.node_pillars(minion_id) returns a node's
-- pillar rows in merge order, so that Salt's own fold of the rows (as_json: True) gives the
-- object GET /v1/nodes/{node}/pillar renders. Additive only: the previous release neither
-- reads nor writes group_selectors (the trigger below keeps it right for that release's
-- writes too).

-- Each group's spec.selector in parsed form, so SQL evaluates membership without parsing the
-- selector language: requirements is a JSON array of {"key", "prefix", "name", "op",
-- "values"} (op in, notin, exists or !; metadata.Requirement, written by GroupKind's
-- AfterWrite). A group without a selector has no row.
--
-- The row's existence and its selector text are kept by the trigger below, in the writing
-- transaction, whichever strata release writes the group; the parsed requirements only by Go.
-- When the text changes without Go parsing it (a write by the previous release during a
-- staged rollout, or the groups that existed before this migration), requirements is NULL:
-- "pending". node_pillars never guesses membership from a pending row: a node of that org
-- then gets one NULL row (Salt records _errors) until a replica of this release parses it
-- (resource.SyncGroupSelectors, at start and every minute).
CREATE TABLE {{schema}}.group_selectors (
	group_id bigint PRIMARY KEY REFERENCES {{schema}}.resources (id) ON DELETE CASCADE,
	org text NOT NULL COLLATE "C",
	selector text NOT NULL,
	requirements jsonb CHECK (jsonb_typeof(requirements) = 'array')
);
-- The selector groups of one org, with their requirements: node_pillars reads these, never
-- every group of the org.
CREATE INDEX group_selectors_org ON {{schema}}.group_selectors (org) INCLUDE (requirements);
-- Pending rows, for the sync (and node_pillars' check of an org).
CREATE INDEX group_selectors_pending ON {{schema}}.group_selectors (org) WHERE requirements IS NULL;

CREATE FUNCTION {{schema}}.group_selectors_track() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	sel text := coalesce(NEW.spec ->> 'selector', '');
BEGIN
	IF sel = '' THEN
		DELETE FROM {{schema}}.group_selectors WHERE group_id = NEW.id;
	ELSE
		INSERT INTO {{schema}}.group_selectors AS gs (group_id, org, selector, requirements)
		VALUES (NEW.id, NEW.org, sel, NULL)
		ON CONFLICT (group_id) DO UPDATE
			SET selector = excluded.selector, org = excluded.org,
			    requirements = CASE WHEN gs.selector = excluded.selector THEN gs.requirements END
			WHERE gs.selector IS DISTINCT FROM excluded.selector OR gs.org IS DISTINCT FROM excluded.org;
	END IF;
	RETURN NULL;
END;
$$;

CREATE TRIGGER group_selectors_track AFTER INSERT OR UPDATE OF spec ON {{schema}}.resources
	FOR EACH ROW WHEN (NEW.kind = 'Group')
	EXECUTE FUNCTION {{schema}}.group_selectors_track();

-- The groups that exist already: their selectors are pending until a replica parses them.
INSERT INTO {{schema}}.group_selectors (group_id, org, selector, requirements)
SELECT id, org, spec ->> 'selector', NULL FROM {{schema}}.resources
WHERE kind = 'Group' AND coalesce(spec ->> 'selector', '') <> '';

-- Raises; for use inside expressions (VOLATILE, so the planner never folds it).
CREATE FUNCTION {{schema}}.node_pillars_fail(msg text) RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	RAISE EXCEPTION 'node_pillars: %', msg;
END;
$$;

-- node_pillars(minion_id): the pillar rows of node minion_id in merge order (see
-- pillar.Service.Layers, the contract): global rows; its org's; the rows of its org's groups
-- it is a member of (static, or its selector matches the node's labels), lower spec.priority
-- first, ties by group name in byte order; its own. Inside one target, categories in byte
-- order. Every row is a JSON object.
--
-- An unknown minion gets no rows ({} in Salt), or one NULL row when the setting
-- salt_unknown_minion is "error". Any failure inside (a pending or corrupt selector, a
-- missing privilege, a bad setting) is one NULL row and never an SQL error: Salt turns SQL
-- errors into a silently empty pillar, but a NULL row into _errors, which stops highstates.
--
-- SECURITY DEFINER with a fixed search_path: Salt's role needs only USAGE on the schema and
-- EXECUTE on this function (PUBLIC has no EXECUTE), not SELECT on any table.
CREATE FUNCTION {{schema}}.node_pillars(minion_id text) RETURNS TABLE (pillar jsonb)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	nid bigint;
	norg text;
	mode jsonb;
	lbl jsonb;
	acc jsonb[];
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
		-- The node's labels, once, as the {key: value} object selectors are matched against.
		SELECT coalesce(jsonb_object_agg(CASE WHEN l.key_prefix = '' THEN l.key_name ELSE l.key_prefix || '/' || l.key_name END, l.value), '{}')
		INTO lbl FROM {{schema}}.labels l WHERE l.resource_id = nid;
		acc := ARRAY(
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
			), layers AS (
				SELECT 0 AS layer, 0 AS priority, ''::text COLLATE "C" AS target, p.category, p.data
				FROM {{schema}}.pillars p WHERE p.resource_id IS NULL
				UNION ALL
				SELECT 1, 0, o.name, p.category, p.data
				FROM {{schema}}.resources o JOIN {{schema}}.pillars p ON p.resource_id = o.id
				WHERE o.kind = 'Org' AND o.org = '' AND o.name = norg
				UNION ALL
				SELECT 2, CASE WHEN jsonb_typeof(g.spec -> 'priority') = 'number' THEN (g.spec ->> 'priority')::int ELSE 0 END,
				       g.name, p.category, p.data
				FROM grp JOIN {{schema}}.resources g ON g.id = grp.id
				JOIN {{schema}}.pillars p ON p.resource_id = g.id
				WHERE g.kind = 'Group' AND g.org = norg
				UNION ALL
				SELECT 3, 0, '', p.category, p.data
				FROM {{schema}}.pillars p WHERE p.resource_id = nid
			)
			SELECT data FROM layers
			ORDER BY layer, priority, target COLLATE "C", category COLLATE "C");
	EXCEPTION WHEN OTHERS THEN
		RAISE WARNING 'node_pillars(%): % (SQLSTATE %)', minion_id, SQLERRM, SQLSTATE;
		pillar := NULL;
		RETURN NEXT;
		RETURN;
	END;
	RETURN QUERY SELECT u.d FROM unnest(acc) WITH ORDINALITY AS u(d, i) ORDER BY u.i;
END;
$$;
REVOKE ALL ON FUNCTION {{schema}}.node_pillars(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{schema}}.node_pillars_fail(text) FROM PUBLIC;
