-- name: TruthChanges
-- Every object change of kind $1 in the changes log (GAP rows have kind ''), oldest first,
-- with the marker annotation, the labels and spec.org (a node's org) after the change, for
-- replaying and resolving.
SELECT resource_version, kind, org, name, type,
	coalesce(object #>> '{metadata,annotations,robustness/op}', ''),
	coalesce(object #> '{metadata,labels}', '{}'::jsonb),
	coalesce(object #>> '{spec,org}', '')
FROM {{schema}}.changes
WHERE kind = $1
ORDER BY resource_version;

-- name: TruthPillarWrites
-- Every pillar write that stored a marker, with what its ETag was (row id and revision; the
-- harness never deletes pillar rows, so the row is still there).
SELECT h.new_data ->> 'robustness_op', p.id, h.revision
FROM {{schema}}.pillar_history h
JOIN {{schema}}.pillars p ON p.resource_id IS NOT DISTINCT FROM h.resource_id AND p.category = h.category
WHERE h.new_data ? 'robustness_op';

-- name: TruthAudited
-- The client request ids of every audited request.
SELECT DISTINCT client_request_id FROM {{schema}}.audit_log WHERE client_request_id <> '';

-- name: TruthCompaction
-- The compaction floor: the highest resourceVersion ever pruned from the changes log.
SELECT compacted_through FROM {{schema}}.watch_compaction;

-- name: TruthHead
-- The newest resourceVersion handed out so far.
SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {{schema}}.resource_version_seq;

-- name: Busy
-- How many backends of this database still run a transaction that began before $1: a
-- request the harness gave up on may still commit, so ground truth is read only once none is
-- left (the drain).
SELECT count(*)::int FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start < $1;

-- name: Now
-- The database's clock, the drain's reference.
SELECT now();

-- name: StateID
-- A workspace's row id in a project's states table: the advisory key a pg-backend client
-- takes to lock it.
SELECT id FROM {{project}}.states WHERE name = $1;
