-- strata:compatible-since 15
-- resourceVersions without the commit-order lock (package internal/resource, versions.go).
--
-- Writers now draw versions from the plain sequence, with no lock held to commit, so
-- versions become visible out of order: a transaction holding 6 can commit after one holding
-- 7. Readers expose a version only once every version below it is resolved: committed, or
-- known never to commit. A version that is missing below a visible one is resolved by
-- inserting a GAP row under its number (INSERT ... ON CONFLICT DO NOTHING): if its writer has
-- already inserted the change, the insert waits for that writer to end and then does nothing
-- (committed) or goes in (rolled back); if the writer drew the number but has not inserted yet,
-- the GAP row takes the number and the writer's own insert finds it taken and draws again.
-- Either way the number is settled for good, by the primary key of changes, not by timing.
--
-- Not compatible with earlier releases: their change pollers and lists assume that visible
-- versions are a gap-free prefix (the lock of migration 0001), which writers of this release
-- no longer guarantee. Replace every replica of the previous release when this one migrates
-- (docs/operations.md).

-- A GAP row holds a version no change will ever have (its writer rolled back, or drew it and
-- found it taken). Its kind is '', which no kind is named, so no watch ever matches it.
ALTER TABLE {{schema}}.changes DROP CONSTRAINT changes_type_check;
ALTER TABLE {{schema}}.changes ADD CONSTRAINT changes_type_check
	CHECK (type IN ('ADDED', 'MODIFIED', 'DELETED', 'GAP')) NOT VALID;

-- watch_resolved records a version through which every version is resolved, so a replica
-- that starts, or a list, looks for unresolved versions only above it instead of in the
-- whole log. Change pollers advance it (at most once a second each); it may lag, never lead.
CREATE TABLE {{schema}}.watch_resolved (
	singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
	resolved_through bigint NOT NULL
);

-- With the commit-order lock held, no writer of the previous release holds a drawn but
-- uncommitted version: every version drawn so far is resolved.
SELECT pg_advisory_xact_lock({{schema_key}}, {{rv_lock}});
INSERT INTO {{schema}}.watch_resolved (resolved_through)
SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {{schema}}.resource_version_seq;
