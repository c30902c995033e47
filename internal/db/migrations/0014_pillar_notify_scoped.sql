-- strata:compatible-since 13
-- Render-cache invalidation that says what changed (issue 17): the notifications on
-- "<schema>.pillars" carry the renders a statement can have changed, as space-separated
-- scopes — node:<name> (a node's rows, labels, memberships or the node itself), org:<name>
-- (an org's rows or a group of it: every node of the org), * (global rows, settings, a
-- TRUNCATE, or more than fits) — so replicas drop only those renders. Releases before this
-- one drop everything on any notification, which stays correct: the payload only narrows.
--
-- Statement triggers with transition tables (one per event: PostgreSQL allows transition
-- tables only on single-event triggers) see every row a statement changed, whoever runs it.
-- A row whose resource cannot be found any more (deleted in the same statement, e.g. by a
-- cascade) counts as *, except labels and memberships, whose resource's own deletion
-- notifies its scope through the resources triggers.
DROP TRIGGER pillars_notify ON {{schema}}.pillars;
DROP TRIGGER resources_notify ON {{schema}}.resources;
DROP TRIGGER labels_notify ON {{schema}}.labels;
DROP TRIGGER group_members_notify ON {{schema}}.group_members;
DROP TRIGGER settings_notify ON {{schema}}.settings;

-- notify_pillar_scopes sends the scopes (deduplicated; * when any is * or they would not fit
-- a notification's 8000 bytes).
CREATE FUNCTION {{schema}}.notify_pillar_scopes(channel text, scopes text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	payload text;
BEGIN
	IF scopes IS NULL OR cardinality(scopes) = 0 THEN
		RETURN;
	END IF;
	IF '*' = ANY (scopes) THEN
		payload := '*';
	ELSE
		SELECT string_agg(DISTINCT s, ' ' ORDER BY s) INTO payload FROM unnest(scopes) s WHERE s IS NOT NULL;
		IF payload IS NULL THEN
			RETURN;
		END IF;
		IF octet_length(payload) > 7000 THEN
			payload := '*';
		END IF;
	END IF;
	PERFORM pg_notify(channel, payload);
END;
$$;

-- The scope of a resource row: its node, its org, a group's org; nothing for other kinds.
CREATE FUNCTION {{schema}}.pillar_scope(kind text, org text, name text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
	SELECT CASE kind WHEN 'Node' THEN 'node:' || name WHEN 'Org' THEN 'org:' || name WHEN 'Group' THEN 'org:' || org END
$$;

CREATE FUNCTION {{schema}}.notify_pillars_all() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify(TG_TABLE_SCHEMA || '.pillars', '*');
	RETURN NULL;
END;
$$;

CREATE FUNCTION {{schema}}.notify_pillars_rows() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	scopes text[];
BEGIN
	IF TG_OP = 'DELETE' THEN
		SELECT array_agg(CASE WHEN c.resource_id IS NULL THEN '*'
			ELSE coalesce((SELECT {{schema}}.pillar_scope(r.kind, r.org, r.name) FROM {{schema}}.resources r WHERE r.id = c.resource_id), '*') END)
		INTO scopes FROM old_rows c;
	ELSE
		SELECT array_agg(CASE WHEN c.resource_id IS NULL THEN '*'
			ELSE coalesce((SELECT {{schema}}.pillar_scope(r.kind, r.org, r.name) FROM {{schema}}.resources r WHERE r.id = c.resource_id), '*') END)
		INTO scopes FROM new_rows c;
	END IF;
	PERFORM {{schema}}.notify_pillar_scopes(TG_TABLE_SCHEMA || '.pillars', scopes);
	RETURN NULL;
END;
$$;

CREATE FUNCTION {{schema}}.notify_pillars_resources() RETURNS trigger
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
			SELECT {{schema}}.pillar_scope(c.kind, c.org, c.name) FROM new_rows c
			UNION ALL
			SELECT {{schema}}.pillar_scope(c.kind, c.org, c.name) FROM old_rows c) AS t(s);
	END IF;
	PERFORM {{schema}}.notify_pillar_scopes(TG_TABLE_SCHEMA || '.pillars', scopes);
	RETURN NULL;
END;
$$;

-- Labels and memberships matter for nodes only (selectors select node labels).
CREATE FUNCTION {{schema}}.notify_pillars_labels() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	scopes text[];
BEGIN
	IF TG_OP = 'DELETE' THEN
		SELECT array_agg('node:' || r.name) INTO scopes FROM old_rows c JOIN {{schema}}.resources r ON r.id = c.resource_id AND r.kind = 'Node';
	ELSIF TG_OP = 'INSERT' THEN
		SELECT array_agg('node:' || r.name) INTO scopes FROM new_rows c JOIN {{schema}}.resources r ON r.id = c.resource_id AND r.kind = 'Node';
	ELSE
		SELECT array_agg('node:' || r.name) INTO scopes
		FROM (SELECT resource_id FROM new_rows UNION SELECT resource_id FROM old_rows) c
		JOIN {{schema}}.resources r ON r.id = c.resource_id AND r.kind = 'Node';
	END IF;
	PERFORM {{schema}}.notify_pillar_scopes(TG_TABLE_SCHEMA || '.pillars', scopes);
	RETURN NULL;
END;
$$;

CREATE FUNCTION {{schema}}.notify_pillars_members() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	scopes text[];
BEGIN
	IF TG_OP = 'DELETE' THEN
		SELECT array_agg('node:' || r.name) INTO scopes FROM old_rows c JOIN {{schema}}.resources r ON r.id = c.node_id AND r.kind = 'Node';
	ELSIF TG_OP = 'INSERT' THEN
		SELECT array_agg('node:' || r.name) INTO scopes FROM new_rows c JOIN {{schema}}.resources r ON r.id = c.node_id AND r.kind = 'Node';
	ELSE
		SELECT array_agg('node:' || r.name) INTO scopes
		FROM (SELECT node_id FROM new_rows UNION SELECT node_id FROM old_rows) c
		JOIN {{schema}}.resources r ON r.id = c.node_id AND r.kind = 'Node';
	END IF;
	PERFORM {{schema}}.notify_pillar_scopes(TG_TABLE_SCHEMA || '.pillars', scopes);
	RETURN NULL;
END;
$$;

CREATE TRIGGER pillars_notify_ins AFTER INSERT ON {{schema}}.pillars REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars_rows();
CREATE TRIGGER pillars_notify_upd AFTER UPDATE ON {{schema}}.pillars REFERENCING NEW TABLE AS new_rows OLD TABLE AS old_rows
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars_rows();
CREATE TRIGGER pillars_notify_del AFTER DELETE ON {{schema}}.pillars REFERENCING OLD TABLE AS old_rows
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars_rows();
CREATE TRIGGER pillars_notify_trunc AFTER TRUNCATE ON {{schema}}.pillars
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars_all();

CREATE TRIGGER resources_notify_ins AFTER INSERT ON {{schema}}.resources REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars_resources();
CREATE TRIGGER resources_notify_upd AFTER UPDATE ON {{schema}}.resources REFERENCING NEW TABLE AS new_rows OLD TABLE AS old_rows
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars_resources();
CREATE TRIGGER resources_notify_del AFTER DELETE ON {{schema}}.resources REFERENCING OLD TABLE AS old_rows
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars_resources();
CREATE TRIGGER resources_notify_trunc AFTER TRUNCATE ON {{schema}}.resources
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars_all();

CREATE TRIGGER labels_notify_ins AFTER INSERT ON {{schema}}.labels REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars_labels();
CREATE TRIGGER labels_notify_upd AFTER UPDATE ON {{schema}}.labels REFERENCING NEW TABLE AS new_rows OLD TABLE AS old_rows
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars_labels();
CREATE TRIGGER labels_notify_del AFTER DELETE ON {{schema}}.labels REFERENCING OLD TABLE AS old_rows
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars_labels();
CREATE TRIGGER labels_notify_trunc AFTER TRUNCATE ON {{schema}}.labels
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars_all();

CREATE TRIGGER group_members_notify_ins AFTER INSERT ON {{schema}}.group_members REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars_members();
CREATE TRIGGER group_members_notify_upd AFTER UPDATE ON {{schema}}.group_members REFERENCING NEW TABLE AS new_rows OLD TABLE AS old_rows
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars_members();
CREATE TRIGGER group_members_notify_del AFTER DELETE ON {{schema}}.group_members REFERENCING OLD TABLE AS old_rows
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars_members();
CREATE TRIGGER group_members_notify_trunc AFTER TRUNCATE ON {{schema}}.group_members
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars_all();

CREATE TRIGGER settings_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {{schema}}.settings
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars_all();
