-- strata:compatible-since 1
-- Foundation: resourceVersion scheme, change log, resources with labels and annotations,
-- API tokens and the audit log.
--
-- Rule for every migration after this one: the previous strata release must keep working on
-- the new schema (staged rollouts run both at once). Add columns with defaults, add tables,
-- add constraints only after the previous release already writes data that satisfies them;
-- never rename or drop what the previous release reads.

-- resourceVersion: one database-wide, increasing number per committed change. A plain
-- sequence is not enough, because sequence values are handed out in call order, not commit
-- order: a transaction holding 7 may commit before one holding 6, and a watcher that has read
-- up to 7 would then miss 6 forever. next_resource_version() first takes a
-- transaction-scoped advisory lock (the schema's key, purpose 2), so between drawing a number
-- and committing no other writer can draw the next one: numbers become visible in order.
-- Only the tail of writing transactions serializes (callers draw the number as their last
-- statement); readers never wait.
CREATE SEQUENCE {{schema}}.resource_version_seq AS bigint;

CREATE FUNCTION {{schema}}.next_resource_version() RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	PERFORM pg_advisory_xact_lock({{schema_key}}, {{rv_lock}});
	RETURN nextval('{{schema}}.resource_version_seq');
END;
$$;

-- changes records each committed change, for watch (resume from a resourceVersion) and for
-- the audit of what changed. object is the object as it was after the change (before it,
-- for deletions).
CREATE TABLE {{schema}}.changes (
	resource_version bigint PRIMARY KEY,
	kind text NOT NULL,
	org text NOT NULL DEFAULT '',
	name text NOT NULL,
	type text NOT NULL CHECK (type IN ('ADDED', 'MODIFIED', 'DELETED')),
	object jsonb NOT NULL,
	changed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX changes_kind_rv ON {{schema}}.changes (kind, resource_version);

-- resources holds every kind: orgs, groups, nodes and user kinds. org is '' for global
-- kinds (orgs themselves, nodes), never NULL, so the unique key cannot be dodged by NULLs.
CREATE TABLE {{schema}}.resources (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	kind text NOT NULL,
	org text NOT NULL DEFAULT '' COLLATE "C",
	name text NOT NULL COLLATE "C",
	spec jsonb NOT NULL DEFAULT '{}',
	schema_revision bigint,
	resource_version bigint NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	updated_at timestamptz NOT NULL DEFAULT now(),
	CONSTRAINT resources_kind_org_name UNIQUE (kind, org, name)
);

-- Labels and annotations: one row per key, prefix '' rather than NULL (seed 000: a NULL
-- prefix defeats the unique constraint), so concurrent writers can never duplicate a key.
CREATE TABLE {{schema}}.labels (
	resource_id bigint NOT NULL REFERENCES {{schema}}.resources (id) ON DELETE CASCADE,
	key_prefix text NOT NULL DEFAULT '' COLLATE "C",
	key_name text NOT NULL COLLATE "C",
	value text NOT NULL,
	CONSTRAINT labels_resource_key UNIQUE (resource_id, key_prefix, key_name)
);
CREATE INDEX labels_key_value ON {{schema}}.labels (key_prefix, key_name, value);

CREATE TABLE {{schema}}.annotations (
	resource_id bigint NOT NULL REFERENCES {{schema}}.resources (id) ON DELETE CASCADE,
	key_prefix text NOT NULL DEFAULT '' COLLATE "C",
	key_name text NOT NULL COLLATE "C",
	value text NOT NULL,
	CONSTRAINT annotations_resource_key UNIQUE (resource_id, key_prefix, key_name)
);

-- tokens: only the SHA-256 of a token is stored. A 256-bit random secret needs no slow
-- password hash: it cannot be guessed, and Terraform and Salt authenticate on every request.
CREATE TABLE {{schema}}.tokens (
	id text PRIMARY KEY,
	name text NOT NULL,
	secret_hash bytea NOT NULL,
	scopes text[] NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	created_by text NOT NULL,
	expires_at timestamptz,
	revoked_at timestamptz,
	last_used_at timestamptz,
	CONSTRAINT tokens_secret_hash UNIQUE (secret_hash)
);

-- audit_log: who did what, when, from where.
CREATE TABLE {{schema}}.audit_log (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	at timestamptz NOT NULL DEFAULT now(),
	actor text NOT NULL,
	action text NOT NULL,
	target text NOT NULL,
	remote_addr text NOT NULL DEFAULT '',
	detail jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_at ON {{schema}}.audit_log (at);

-- bootstrap records one-time facts about the installation (e.g. that the first admin token
-- was created), so several replicas starting together create it exactly once.
CREATE TABLE {{schema}}.bootstrap (
	key text PRIMARY KEY,
	value text NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);
