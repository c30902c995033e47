-- strata:compatible-since 2
-- Kinds (package internal/kind): a registry of JSON schemas describing objects' spec, which
-- evolve in place through immutable revisions instead of API versions (seed 004).
--
-- kinds holds one row per kind; current_revision is the revision writes validate against.
-- Writers of a kind's objects take pg_advisory_xact_lock_shared on the kind's key and then
-- read current_revision; a registration takes the same key exclusively, scans the stored
-- objects and inserts the next revision in one transaction, so no object is written under the
-- old revision while the scan runs (invariant I1 of research/schema-evolution.md §5.1). The
-- key is a bigint (hashtextextended of the schema and kind name), a space apart from strata's
-- two-integer keys.
CREATE TABLE {{schema}}.kinds (
	name text PRIMARY KEY COLLATE "C",
	scope text NOT NULL CHECK (scope IN ('org', 'global')),
	builtin boolean NOT NULL DEFAULT false,
	current_revision integer NOT NULL CHECK (current_revision > 0),
	created_at timestamptz NOT NULL DEFAULT now(),
	updated_at timestamptz NOT NULL DEFAULT now()
);

-- kind_revisions are immutable: a schema and the compatibility report it was registered with.
CREATE TABLE {{schema}}.kind_revisions (
	kind text NOT NULL REFERENCES {{schema}}.kinds (name),
	revision integer NOT NULL CHECK (revision > 0),
	schema jsonb NOT NULL,
	report jsonb NOT NULL DEFAULT '{}',
	created_by text NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (kind, revision)
);

-- Which revisions stored objects still reference (the compatibility check diffs against each).
CREATE INDEX resources_kind_schema_revision ON {{schema}}.resources (kind, schema_revision);

-- The built-in kinds' first revisions, the same documents as internal/kind/builtin/*.json
-- (TestBuiltinSchemasMatchMigration keeps them equal). Later releases register new revisions
-- at start through the same compatibility check as users' kinds.
INSERT INTO {{schema}}.kinds (name, scope, builtin, current_revision) VALUES
	('Group', 'org', true, 1), ('Node', 'global', true, 1), ('Org', 'global', true, 1);
INSERT INTO {{schema}}.kind_revisions (kind, revision, schema, report, created_by) VALUES
	('Org', 1, '{"type": "object", "x-preserve-unknown-fields": true, "description": "An organisation. Releases before kinds stored any JSON object as an org''s spec, so the spec stays free-form."}', '{"compatible": true, "changes": []}', 'strata'),
	('Node', 1, '{"type": "object", "x-preserve-unknown-fields": true, "required": ["org"], "properties": {"org": {"type": "string", "minLength": 1, "description": "The org the node belongs to (an existing org''s name)."}}, "description": "A Salt minion, named by its minion id."}', '{"compatible": true, "changes": []}', 'strata'),
	('Group', 1, '{"type": "object", "x-preserve-unknown-fields": true, "properties": {"priority": {"type": "integer", "minimum": -2147483648, "maximum": 2147483647, "default": 0, "description": "Merge order among the node''s groups (higher wins)."}, "selector": {"type": "string", "description": "A label selector; the org''s nodes it matches are members too."}}, "description": "A named set of an org''s nodes."}', '{"compatible": true, "changes": []}', 'strata');
