-- name: WatchHead
-- Where a replica's change poller starts: the newest change visible now, or the compaction
-- point when the log is pruned to nothing (the same version a list reports).
SELECT greatest((SELECT coalesce(max(resource_version), 0) FROM {{schema}}.changes),
                (SELECT coalesce(max(compacted_through), 0) FROM {{schema}}.watch_compaction));

-- name: WatchCompacted
-- The compaction point: every change at or below it may be gone from the log.
SELECT coalesce(max(compacted_through), 0) FROM {{schema}}.watch_compaction;

-- name: WatchPoll
-- The next changes after $1, in resourceVersion order, GAP rows included (they settle
-- versions no change holds). The poller checks that they follow $1 without a hole before it
-- fans them out (versions.go). A primary-key range scan.
SELECT resource_version, type, kind, org, name, object, prev_labels, prev_org, render_scope
FROM {{schema}}.changes
WHERE resource_version > $1
ORDER BY resource_version
LIMIT $2;

-- name: WatchCatchUp
-- A new watcher's backlog: the changes of one kind (and org) in ($1, $2], $2 being what the
-- replica's poller had processed when the watcher started, up to $5 rows (changes_kind_rv).
SELECT resource_version, type, kind, org, name, object, prev_labels, prev_org, render_scope
FROM {{schema}}.changes
WHERE kind = $3 AND org = $4 AND resource_version > $1 AND resource_version <= $2
ORDER BY resource_version
LIMIT $5;
