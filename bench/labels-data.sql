-- strata's side of the selector benchmark: :size nodes in org "bench", five labels each with
-- the values ../shared/bench/anchor-labels.sql gives its resources (k0 prefixed example.com,
-- value 'v' || ((r * (k + 3)) % 20)), written straight into strata's tables (no change log:
-- this is a read benchmark), then analyzed. Run with psql -v size=100000.
INSERT INTO strata.resources (kind, org, name, spec, resource_version)
VALUES ('Org', '', 'bench', '{}', 0) ON CONFLICT DO NOTHING;
INSERT INTO strata.resources (kind, org, name, spec, resource_version)
SELECT 'Node', '', 'n' || lpad(g::text, 7, '0'), '{"org":"bench"}', 0 FROM generate_series(1, :size) g;
INSERT INTO strata.labels (resource_id, key_prefix, key_name, value)
SELECT r.id, CASE WHEN k = 0 THEN 'example.com' ELSE '' END, 'k' || k, 'v' || ((substr(r.name, 2)::int * (k + 3)) % 20)
FROM strata.resources r, generate_series(0, 4) k
WHERE r.kind = 'Node';
VACUUM ANALYZE strata.resources;
VACUUM ANALYZE strata.labels;
