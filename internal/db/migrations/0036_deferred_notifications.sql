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
-- db.Tx.DeferNotifications) now makes those triggers send nothing: each is created again with
-- a WHEN condition on the setting (their functions are unchanged, and are not even called for
-- such a transaction; PostgreSQL allows a WHEN on a statement trigger that refers to no
-- column). Its writer announces it
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

DROP TRIGGER changes_notify ON {{schema}}.changes;
CREATE TRIGGER changes_notify AFTER INSERT ON {{schema}}.changes
	FOR EACH STATEMENT WHEN (current_setting('strata.notify', true) IS DISTINCT FROM 'deferred')
	EXECUTE FUNCTION {{schema}}.notify_changes();

DROP TRIGGER resources_notify_ins ON {{schema}}.resources;
DROP TRIGGER resources_notify_upd ON {{schema}}.resources;
DROP TRIGGER resources_notify_del ON {{schema}}.resources;
CREATE TRIGGER resources_notify_ins AFTER INSERT ON {{schema}}.resources REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT WHEN (current_setting('strata.notify', true) IS DISTINCT FROM 'deferred')
	EXECUTE FUNCTION {{schema}}.notify_pillars_resources();
CREATE TRIGGER resources_notify_upd AFTER UPDATE ON {{schema}}.resources REFERENCING NEW TABLE AS new_rows OLD TABLE AS old_rows
	FOR EACH STATEMENT WHEN (current_setting('strata.notify', true) IS DISTINCT FROM 'deferred')
	EXECUTE FUNCTION {{schema}}.notify_pillars_resources();
CREATE TRIGGER resources_notify_del AFTER DELETE ON {{schema}}.resources REFERENCING OLD TABLE AS old_rows
	FOR EACH STATEMENT WHEN (current_setting('strata.notify', true) IS DISTINCT FROM 'deferred')
	EXECUTE FUNCTION {{schema}}.notify_pillars_resources();

DROP TRIGGER labels_notify_ins ON {{schema}}.labels;
DROP TRIGGER labels_notify_upd ON {{schema}}.labels;
DROP TRIGGER labels_notify_del ON {{schema}}.labels;
CREATE TRIGGER labels_notify_ins AFTER INSERT ON {{schema}}.labels REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT WHEN (current_setting('strata.notify', true) IS DISTINCT FROM 'deferred')
	EXECUTE FUNCTION {{schema}}.notify_pillars_labels();
CREATE TRIGGER labels_notify_upd AFTER UPDATE ON {{schema}}.labels REFERENCING NEW TABLE AS new_rows OLD TABLE AS old_rows
	FOR EACH STATEMENT WHEN (current_setting('strata.notify', true) IS DISTINCT FROM 'deferred')
	EXECUTE FUNCTION {{schema}}.notify_pillars_labels();
CREATE TRIGGER labels_notify_del AFTER DELETE ON {{schema}}.labels REFERENCING OLD TABLE AS old_rows
	FOR EACH STATEMENT WHEN (current_setting('strata.notify', true) IS DISTINCT FROM 'deferred')
	EXECUTE FUNCTION {{schema}}.notify_pillars_labels();
