-- strata:compatible-since 2
-- Pillars (package internal/pillar): layered configuration for Salt. Additive only: the
-- previous release neither reads nor writes these tables.

-- One JSON object per (target, category). The target is global (no resource) or an org, a
-- group or a node (a resources row; deleting it deletes its pillars in the same transaction).
-- UNIQUE NULLS NOT DISTINCT makes (global, category) unique too: Uyuni's NULL-distinct unique
-- constraint let global rows repeat (seed 001).
CREATE TABLE {{schema}}.pillars (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	target_kind text NOT NULL CHECK (target_kind IN ('global', 'Org', 'Group', 'Node')),
	resource_id bigint REFERENCES {{schema}}.resources (id) ON DELETE CASCADE,
	category text NOT NULL COLLATE "C"
		CHECK (category ~ '^[a-z0-9][a-z0-9_.-]*$' AND length(category) <= 100),
	data jsonb NOT NULL CHECK (jsonb_typeof(data) = 'object'),
	revision bigint NOT NULL DEFAULT 1,
	updated_at timestamptz NOT NULL DEFAULT now(),
	updated_by text NOT NULL DEFAULT '',
	CONSTRAINT pillars_one_target CHECK ((target_kind = 'global') = (resource_id IS NULL)),
	CONSTRAINT pillars_target_category UNIQUE NULLS NOT DISTINCT (resource_id, category)
);

-- Every change of a pillar row: who, when, the value before and after (NULL: did not exist).
-- The target is recorded by name as well as by id, so the history of a deleted target can
-- still be read and restored from.
CREATE TABLE {{schema}}.pillar_history (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	target text NOT NULL COLLATE "C",
	resource_id bigint,
	category text NOT NULL COLLATE "C",
	revision bigint NOT NULL,
	old_data jsonb,
	new_data jsonb,
	actor text NOT NULL,
	at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pillar_history_target ON {{schema}}.pillar_history (target, category, id);

-- Settings every replica must share, so two replicas never render differently (for example
-- pillar_merge_lists).
CREATE TABLE {{schema}}.settings (
	key text PRIMARY KEY,
	value jsonb NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now(),
	updated_by text NOT NULL DEFAULT ''
);
