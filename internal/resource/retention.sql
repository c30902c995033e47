-- name: ChangesPrune
-- Deletes up to $2 of the changes that come, in resourceVersion order, before the first
-- change recorded at or after $1: only a leading run of old changes, never an old change
-- behind a newer one. changed_at is when the writing transaction began and the
-- resourceVersion is drawn as it commits, so a change can be older by time yet newer by
-- version than its neighbour; deleting it would leave a hole that a watcher resuming below
-- it would silently skip. Both scans walk the primary key from the oldest row and stop early.
DELETE FROM {{schema}}.changes
WHERE resource_version IN (
	SELECT resource_version FROM {{schema}}.changes
	WHERE resource_version < coalesce(
		(SELECT resource_version FROM {{schema}}.changes WHERE changed_at >= $1 ORDER BY resource_version LIMIT 1),
		9223372036854775807)
	ORDER BY resource_version
	LIMIT $2
);

-- name: ChangesFirstKept
-- The version of the first change recorded at or after $1 (every change below it goes), or
-- one past the newest when all are older.
SELECT coalesce(
	(SELECT resource_version FROM {{schema}}.changes WHERE changed_at >= $1 ORDER BY resource_version LIMIT 1),
	(SELECT coalesce(max(resource_version), 0) + 1 FROM {{schema}}.changes));
