-- strata:compatible-since 2
-- Watch (package internal/resource, watch.go). Additive only: the previous release neither
-- reads nor writes what this adds, and what it does keep doing (pruning the changes log,
-- writing changes without prev_labels) is handled here, whoever does it.

-- prev_labels are the object's labels before the change: NULL for ADDED (and for changes an
-- older release wrote), the last labels for MODIFIED and DELETED. A selector watch needs them
-- to tell "stopped matching" (sent as DELETED) from "changed and still matching".
ALTER TABLE {{schema}}.changes ADD COLUMN prev_labels jsonb;

-- watch_compaction records the compaction point: the highest resourceVersion ever deleted
-- from the changes log. A watch resuming from a version below it would silently miss the
-- deleted changes, so it is refused with 410 Gone instead. The trigger below advances it in
-- the transaction of every deletion, whoever deletes (a replica's retention sweep, an older
-- release during a rollout, an operator), so it can never lag behind what is gone.
CREATE TABLE {{schema}}.watch_compaction (
	singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
	compacted_through bigint NOT NULL
);

-- The starting point covers what earlier releases pruned without recording it: everything
-- below the oldest change still kept, or, with an empty log, every version issued so far.
-- The commit-order lock (migration 0001) is taken first, so no writer holds a drawn but
-- uncommitted version while the point is computed.
SELECT pg_advisory_xact_lock({{schema_key}}, {{rv_lock}});
INSERT INTO {{schema}}.watch_compaction (compacted_through)
SELECT coalesce(
	(SELECT min(resource_version) - 1 FROM {{schema}}.changes),
	(SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {{schema}}.resource_version_seq));

CREATE FUNCTION {{schema}}.changes_compacted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	UPDATE {{schema}}.watch_compaction
	SET compacted_through = greatest(compacted_through, (SELECT max(resource_version) FROM gone))
	WHERE EXISTS (SELECT 1 FROM gone);
	RETURN NULL;
END;
$$;

CREATE TRIGGER changes_compacted AFTER DELETE ON {{schema}}.changes
	REFERENCING OLD TABLE AS gone
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.changes_compacted();

-- Every insert into the changes log notifies "<schema>.changes" on commit, to wake the change
-- poller of every replica (watch.go); the poller also polls once a second, so a lost
-- notification delays events, never loses them. One notification per statement, and
-- PostgreSQL folds identical notifications of one transaction into one.
CREATE FUNCTION {{schema}}.notify_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify(TG_TABLE_SCHEMA || '.changes', '');
	RETURN NULL;
END;
$$;

CREATE TRIGGER changes_notify AFTER INSERT ON {{schema}}.changes
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_changes();
