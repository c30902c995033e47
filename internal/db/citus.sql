-- name: CitusVersion
-- The citus extension's version in this database and the build string, or no row without
-- it (plain PostgreSQL, or the library preloaded but the extension not created: Citus is
-- inert then). to_regproc guards the call, so the query parses without Citus.
SELECT e.extversion, coalesce((xpath('/row/v/text()', query_to_xml(
	'SELECT citus_version() AS v', false, true, '')))[1]::text, '')
FROM pg_extension e
WHERE e.extname = 'citus' AND to_regproc('citus_version') IS NOT NULL

-- name: CitusNodes
-- The nodes of the cluster's metadata (read only with the extension present): role is
-- 'primary' or 'secondary'; groupid 0 is the coordinator. query_to_xml keeps the statement
-- parseable on a server without the pg_dist_node table.
SELECT (xpath('/row/h/text()', x))[1]::text, (xpath('/row/p/text()', x))[1]::text::int,
	(xpath('/row/g/text()', x))[1]::text::int, (xpath('/row/a/text()', x))[1]::text::boolean,
	(xpath('/row/s/text()', x))[1]::text::boolean
FROM unnest(xpath('/table/row', query_to_xml(
	'SELECT nodename AS h, nodeport AS p, groupid AS g, isactive AS a, shouldhaveshards AS s FROM pg_dist_node ORDER BY groupid, nodeid',
	false, false, ''))) AS x
