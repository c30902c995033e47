-- strata:compatible-since 36
-- Writes of objects announce themselves after they commit (issue 31, item 4).
--
-- Every write of an object notified inside its transaction: "<schema>.changes" from the
-- changes log's trigger (migration 0012) and "<schema>.pillars" from the resources and labels
-- triggers (0014, 0016). PostgreSQL 15 takes one database-wide lock in PreCommit_Notify for a
-- transaction that notified and holds it until the commit record is flushed, so such writes
-- commit one at a time, each across its own WAL flush (docs/benchmarks.md measured 71-91 % of
-- strata's active backends waiting on it at 16 clients).
--
-- A transaction that sets strata.notify to 'deferred' (strata's own writes of objects,
-- db.Tx.DeferNotifications) now makes those triggers send nothing. Its writer announces it
-- after COMMIT instead (one coalesced NOTIFY "<schema>.changes" per replica, sent with
-- synchronous_commit off), and the change rows it stamps carry what renders each change can
-- alter (render_scope: node:<name>, org:<name>, or NULL for none): every replica's change
-- poller reads them in version order and drops those renders. The change log, written in the
-- same transaction, is the safety net: a writer that dies between its COMMIT and its
-- announcement delays the other replicas' invalidation to their next poll (a second), it
-- never loses it.
--
-- Writers that do not set it (SQL sessions, the pillar, membership and settings paths, older
-- releases) notify inside their transactions as before. Releases before this one drop renders
-- only on "<schema>.pillars" notifications, which deferred writes no longer send, so a
-- release-35 replica's render cache would keep renders a newer replica's write changed: this
-- migration is compatible since 36 only.
ALTER TABLE {{schema}}.changes ADD COLUMN render_scope text;

CREATE OR REPLACE FUNCTION {{schema}}.notify_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF current_setting('strata.notify', true) = 'deferred' THEN
		RETURN NULL;
	END IF;
	PERFORM pg_notify(TG_TABLE_SCHEMA || '.changes', '');
	RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION {{schema}}.notify_pillars_resources() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	scopes text[];
BEGIN
	IF current_setting('strata.notify', true) = 'deferred' THEN
		RETURN NULL;
	END IF;
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

CREATE OR REPLACE FUNCTION {{schema}}.notify_pillars_labels() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	scopes text[];
BEGIN
	IF current_setting('strata.notify', true) = 'deferred' THEN
		RETURN NULL;
	END IF;
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
