-- name: VersionGaps
-- The versions in ($1, $2] that this snapshot does not see, lowest first, at most $3: each
-- is held by a writer still in flight, or by none (rolled back, or drawn and given up). The
-- floor is raised to what is known resolved (watch_resolved, advanced by the change pollers)
-- and to the compaction point, so the walk covers only the recent part of the primary key.
WITH f AS (
	SELECT greatest($1::bigint,
	                (SELECT coalesce(max(compacted_through), 0) FROM {{schema}}.watch_compaction),
	                (SELECT coalesce(max(resolved_through), 0) FROM {{schema}}.watch_resolved)) AS v
),
c AS (
	SELECT resource_version AS rv,
	       lag(resource_version, 1, (SELECT v FROM f)) OVER (ORDER BY resource_version) AS prev
	FROM {{schema}}.changes
	WHERE resource_version > (SELECT v FROM f) AND resource_version <= $2
)
SELECT g FROM c, generate_series(c.prev + 1, c.rv - 1) g
WHERE c.rv > c.prev + 1
ORDER BY g
LIMIT $3;

-- name: VersionFill
-- Settles version $1 for good. If its writer has inserted its change, this waits for the
-- writer to end (the primary key's uniqueness check) and then does nothing when it committed;
-- otherwise a GAP row takes the number, and a writer that drew it but has not inserted yet
-- finds it taken and draws again (ResourceStamp). One version per statement, in a statement
-- of its own: a fill never holds a GAP row while it waits for another writer.
INSERT INTO {{schema}}.changes (resource_version, kind, org, name, type, object)
VALUES ($1, '', '', '', 'GAP', '{}')
ON CONFLICT (resource_version) DO NOTHING;

-- name: VersionFillNoSync
SELECT set_config('synchronous_commit', 'off', true);

-- name: VersionChanges
-- The changes of the given versions (GAP rows included), in version order.
SELECT resource_version, type, kind, org, name, object, prev_labels, prev_org, render_scope
FROM {{schema}}.changes
WHERE resource_version = ANY($1::bigint[])
ORDER BY resource_version;

-- name: VersionResolvedAdvance
UPDATE {{schema}}.watch_resolved SET resolved_through = $1 WHERE resolved_through < $1;

-- name: VersionResolved
SELECT greatest((SELECT coalesce(max(compacted_through), 0) FROM {{schema}}.watch_compaction),
                (SELECT coalesce(max(resolved_through), 0) FROM {{schema}}.watch_resolved));
