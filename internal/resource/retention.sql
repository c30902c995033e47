-- name: ChangesPrune
-- Deletes, of the oldest $2 changes in resourceVersion order, those recorded before $1. The
-- primary key walks from the oldest row, so a sweep reads only what it may delete: it stops
-- at the first batch that holds a newer change instead of scanning the whole table.
DELETE FROM {{schema}}.changes
WHERE resource_version IN (
	SELECT resource_version FROM {{schema}}.changes ORDER BY resource_version LIMIT $2
) AND changed_at < $1;
