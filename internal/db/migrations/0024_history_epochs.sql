-- strata:compatible-since 15
-- A history that cannot silently fork (issue 21). After a failover to a standby that had not
-- received the old primary's last changes (asynchronous replication), or a point-in-time
-- recovery, or a restore of a backup, the changes log continues from an earlier point, and
-- resourceVersions the lost history had handed out would be drawn again for other changes: a
-- watch resumed from one of them would skip silently. So the database's history has epochs:
-- the cluster's system identifier and its WAL timeline, which every promotion and recovery
-- changes. Every connection of a strata pool to a primary calls history_epoch_check(schema)
-- (package internal/db, before the connection is used): on a new epoch, before any write of
-- it, the version sequence jumps a billion past every version this history or the lost one can
-- have drawn, and the changes log is marked compacted through the jump. Every watch from before
-- the epoch then gets 410 and lists again — the lost versions are never mistaken for new ones —
-- and render caches are told to empty. The first epoch a database records starts its history
-- without a jump. Additive: releases before this one do not call it.
CREATE TABLE {{schema}}.history_epochs (
	epoch text PRIMARY KEY,
	-- the newest change the new history kept from the one before, and the first version of
	-- this one (versions in between belong to no kept change)
	fork_version bigint NOT NULL,
	first_version bigint NOT NULL,
	at timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION {{schema}}.history_epoch_check(schema_name text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	ep text;
	last_drawn bigint;
	kept bigint;
	first bigint;
BEGIN
	IF pg_is_in_recovery() THEN
		RETURN NULL; -- a standby: strata's writes go to the primary, which checks there
	END IF;
	ep := (SELECT system_identifier::text FROM pg_control_system()) || '/' ||
	      (('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint)::text;
	IF EXISTS (SELECT 1 FROM {{schema}}.history_epochs WHERE epoch = ep) THEN
		RETURN ep;
	END IF;
	PERFORM pg_advisory_xact_lock(hashtextextended(schema_name || '/history-epoch', 0));
	IF EXISTS (SELECT 1 FROM {{schema}}.history_epochs WHERE epoch = ep) THEN
		RETURN ep;
	END IF;
	SELECT CASE WHEN is_called THEN last_value ELSE 0 END INTO last_drawn FROM {{schema}}.resource_version_seq;
	SELECT coalesce(max(resource_version), 0) INTO kept FROM {{schema}}.changes;
	IF NOT EXISTS (SELECT 1 FROM {{schema}}.history_epochs) THEN
		INSERT INTO {{schema}}.history_epochs (epoch, fork_version, first_version) VALUES (ep, kept, greatest(last_drawn, kept));
		RETURN ep;
	END IF;
	first := greatest(last_drawn, kept) + 1000000000;
	PERFORM setval('{{schema}}.resource_version_seq', first);
	UPDATE {{schema}}.watch_compaction SET compacted_through = greatest(compacted_through, first);
	UPDATE {{schema}}.watch_resolved SET resolved_through = greatest(resolved_through, first);
	INSERT INTO {{schema}}.history_epochs (epoch, fork_version, first_version) VALUES (ep, kept, first);
	PERFORM pg_notify(schema_name || '.pillars', '*');
	PERFORM pg_notify(schema_name || '.changes', '');
	RETURN ep;
END;
$$;
