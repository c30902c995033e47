-- strata:compatible-since 15
-- Typed pillar categories (issue 19, package internal/pillar): a category's properties apply
-- at every target. kind binds the category to a kind (package internal/kind): every write of
-- the category, at any target, is validated by the kind's current revision with ratcheting,
-- and a registration of a new revision checks the stored rows of its bound categories like
-- its own objects. Writers of a category take its key shared (pillar_category_lock below is
-- the key's name) and then read this table; binding takes it exclusively, so no row is
-- written under a binding that changed meanwhile.
--
-- Additive: release 15 neither reads nor writes it, so a replica of that release would write
-- a bound category unvalidated; docs/operations.md says to bind categories only once every
-- replica runs this release.
CREATE TABLE {{schema}}.pillar_categories (
	category text PRIMARY KEY COLLATE "C"
		CHECK (category ~ '^[a-z0-9][a-z0-9_.-]*$' AND length(category) <= 100),
	kind text REFERENCES {{schema}}.kinds (name),
	updated_at timestamptz NOT NULL DEFAULT now(),
	updated_by text NOT NULL DEFAULT ''
);
CREATE INDEX pillar_categories_kind ON {{schema}}.pillar_categories (kind) WHERE kind IS NOT NULL;

-- The revision of the bound kind a row was last admitted or presented under (NULL: the
-- category was not bound then). A registration diffs against every revision rows still hold,
-- as it does for objects (resources.schema_revision).
ALTER TABLE {{schema}}.pillars ADD COLUMN kind_revision integer;
CREATE INDEX pillars_category ON {{schema}}.pillars (category);
