-- strata's side of the node_pillars benchmark: the shape of ../shared/bench/anchor-uyuni-pillars.sql
-- (load that first: its uyuni.blob makes the same ~1 KB pillars) written straight into strata's
-- tables: 10 orgs, 1,000 groups (group g in org 1 + g % 10), 10,000 nodes minion-1..minion-10000
-- (node s in org 1 + s % 10), each a static member of 3 groups of its org, one pillar per target
-- and category (3 global categories, then org, group and node rows). With -v selectors=1, 100
-- groups (10 per org) also select env=prod and half the nodes of every org carry env=prod
-- (10 more groups for them, by selector; every node's call evaluates 10 selectors).
-- No change log: this is a read benchmark.
INSERT INTO strata.resources (kind, org, name, spec, resource_version)
SELECT 'Org', '', 'org' || g, '{}', 0 FROM generate_series(1, 10) g;
INSERT INTO strata.resources (kind, org, name, spec, resource_version)
SELECT 'Group', 'org' || (1 + g % 10), 'group' || g, '{"priority": 0}', 0 FROM generate_series(1, 1000) g;
INSERT INTO strata.resources (kind, org, name, spec, resource_version)
SELECT 'Node', '', 'minion-' || s, jsonb_build_object('org', 'org' || (1 + s % 10)), 0 FROM generate_series(1, 10000) s;
-- Three distinct groups of the node's own org (strata ignores static members of other orgs).
INSERT INTO strata.group_members (group_id, node_id)
SELECT gr.id, n.id
FROM generate_series(1, 10000) s, generate_series(0, 2) k,
     LATERAL (SELECT CASE WHEN 10 * ((s * 7 + k * 331) % 100) + s % 10 = 0 THEN 1000
                          ELSE 10 * ((s * 7 + k * 331) % 100) + s % 10 END AS g) x,
     strata.resources gr, strata.resources n
WHERE gr.kind = 'Group' AND gr.org = 'org' || (1 + x.g % 10) AND gr.name = 'group' || x.g
  AND n.kind = 'Node' AND n.org = '' AND n.name = 'minion-' || s;
INSERT INTO strata.pillars (target_kind, resource_id, category, data)
SELECT 'global', NULL, 'global' || c, uyuni.blob('global') FROM generate_series(1, 3) c;
INSERT INTO strata.pillars (target_kind, resource_id, category, data)
SELECT 'Org', r.id, 'org', uyuni.blob(r.name) FROM strata.resources r WHERE r.kind = 'Org';
INSERT INTO strata.pillars (target_kind, resource_id, category, data)
SELECT 'Group', r.id, 'group', uyuni.blob(r.name) FROM strata.resources r WHERE r.kind = 'Group';
INSERT INTO strata.pillars (target_kind, resource_id, category, data)
SELECT 'Node', r.id, 'minion', uyuni.blob(r.name) FROM strata.resources r WHERE r.kind = 'Node';
\if :{?selectors}
\else
\set selectors 0
\endif
SELECT :selectors = 1 AS with_selectors \gset
\if :with_selectors
-- The trigger of migration 0009 records the selector as pending; the parsed form is what
-- GroupKind's AfterWrite (resource.SelectorRequirementsJSON) would store.
UPDATE strata.resources SET spec = spec || '{"selector": "env=prod"}'
WHERE kind = 'Group' AND substr(name, 6)::int / 10 % 10 = 3;
UPDATE strata.group_selectors
SET requirements = '[{"key": "env", "prefix": "", "name": "env", "op": "in", "values": ["prod"]}]'
WHERE selector = 'env=prod';
INSERT INTO strata.labels (resource_id, key_prefix, key_name, value)
SELECT r.id, '', 'env', CASE WHEN substr(r.name, 8)::int / 10 % 2 = 0 THEN 'prod' ELSE 'dev' END
FROM strata.resources r WHERE r.kind = 'Node';
\endif
VACUUM ANALYZE strata.resources;
VACUUM ANALYZE strata.group_members;
VACUUM ANALYZE strata.group_selectors;
VACUUM ANALYZE strata.labels;
VACUUM ANALYZE strata.pillars;
