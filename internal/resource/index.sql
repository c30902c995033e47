-- name: IndexLoad
-- Every object of every kind, as ResourceList reads one, with its kind, in (kind, org, name)
-- order (the unique index, COLLATE "C": bytewise, Go's string order): what a replica's list
-- index loads in one REPEATABLE READ snapshot when it is built (index.go).
SELECT r.name, r.org, r.spec, r.resource_version, r.created_at, r.updated_at,
       coalesce((SELECT jsonb_object_agg(CASE WHEN l.key_prefix = '' THEN l.key_name ELSE l.key_prefix || '/' || l.key_name END, l.value)
                 FROM {{schema}}.labels l WHERE l.resource_id = r.id), '{}'),
       coalesce((SELECT jsonb_object_agg(CASE WHEN a.key_prefix = '' THEN a.key_name ELSE a.key_prefix || '/' || a.key_name END, a.value)
                 FROM {{schema}}.annotations a WHERE a.resource_id = r.id), '{}'),
       coalesce(r.schema_revision, 0), r.status, r.id,
       r.kind
FROM {{schema}}.resources r
ORDER BY r.kind, r.org, r.name;
