-- strata:compatible-since 15
-- Keys as facts (issue 28). The database records the ids of the key-encryption keys its
-- sealed values are wrapped with, so a replica can tell, with one read of a small table, whether
-- it holds every key the data needs: one that lacks any is not ready and refuses secret reads
-- and writes (503 naming the ids) instead of serving values it cannot open or sealing new ones
-- under a key the other replicas lack; and an embedded data dir restored from a backup never
-- mints a fresh key while the data needs another (package internal/keyref, server/keys.go).
--
-- key_refs is recorded, not derived: triggers on every place a sealed value lives add its key
-- id in the writing transaction (INSERT … ON CONFLICT DO NOTHING: an index probe, no row lock
-- once the id is recorded), so every writer — this release, an older one beside it, a
-- conversion, a rotation, a rename's re-seal — records what it sealed under, and the check
-- never scans the values. Deriving the ids from the sealed values' headers instead would scan
-- every secret row, history entry and state version at each readiness probe.
--
-- The table may hold an id no value references any more (after a rotation re-wrapped them
-- all, or the values were deleted); keyref.Prune removes such ids, recounting under a lock
-- that writers of sealed values take too (see sealed_key_ids), as `strata keys status` and
-- `strata keys rotate` do, so an old key is retirable exactly when the table no longer
-- names it. It never misses an id a committed value references.
--
-- Additive: releases before this one neither read the table nor need to know it; their
-- sealed writes are recorded by the triggers all the same.
CREATE TABLE {{schema}}.key_refs (
	key_id text PRIMARY KEY CHECK (key_id ~ '^[0-9a-f]{16}$'),
	recorded_at timestamptz NOT NULL DEFAULT now()
);

-- sealed_key_id is the key id in a sealed value's header (package secret: "sv1", then the
-- key id's 8 bytes), NULL for anything else.
CREATE FUNCTION {{schema}}.sealed_key_id(v bytea) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT CASE WHEN octet_length(v) >= 11 AND substring(v FROM 1 FOR 3) = 'sv1'::bytea
	            THEN encode(substring(v FROM 4 FOR 8), 'hex') END
$$;

-- sealed_state_key_id is the key id of a sealed state ('strata:sv1:' and the sealed bytes in
-- standard base64; 16 characters cover the header's first 12 bytes), NULL for anything else.
-- substr reads only the value's first bytes, not a whole large state.
CREATE FUNCTION {{schema}}.sealed_state_key_id(v text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT CASE WHEN substr(v, 1, 11) = 'strata:sv1:' AND substr(v, 12, 16) ~ '^[A-Za-z0-9+/]{16}$'
	            THEN {{schema}}.sealed_key_id(decode(substr(v, 12, 16), 'base64')) END
$$;

-- sealed_key_ids derives the ids from the values themselves: every place a sealed value lives
-- (secret pillar rows, their history's old and new values, state versions, and the states
-- of every encrypted project). A migration that adds another place must extend it and add a
-- trigger recording into key_refs. It scans everything: keyref.Prune and the backfill below
-- use it, readiness never does.
CREATE FUNCTION {{schema}}.sealed_key_ids() RETURNS SETOF text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	p text;
BEGIN
	RETURN QUERY
	SELECT DISTINCT k FROM (
		SELECT {{schema}}.sealed_key_id(sealed) AS k FROM {{schema}}.pillars WHERE sealed IS NOT NULL
		UNION ALL SELECT {{schema}}.sealed_key_id(old_sealed) FROM {{schema}}.pillar_history WHERE old_sealed IS NOT NULL
		UNION ALL SELECT {{schema}}.sealed_key_id(new_sealed) FROM {{schema}}.pillar_history WHERE new_sealed IS NOT NULL
		UNION ALL SELECT {{schema}}.sealed_state_key_id(data) FROM {{schema}}.tf_state_versions WHERE substr(data, 1, 11) = 'strata:sv1:'
	) s WHERE k IS NOT NULL;
	FOR p IN SELECT name FROM {{schema}}.tf_projects WHERE encrypted LOOP
		IF to_regclass(format('%I.states', p)) IS NOT NULL THEN
			RETURN QUERY EXECUTE format(
				'SELECT DISTINCT {{schema}}.sealed_state_key_id(data) FROM %I.states WHERE substr(data, 1, 11) = ''strata:sv1:'' AND {{schema}}.sealed_state_key_id(data) IS NOT NULL', p);
		END IF;
	END LOOP;
END;
$$;

-- The recording triggers. Each fires only for a row holding a sealed value (WHEN), so plain
-- writes pay nothing.
CREATE FUNCTION {{schema}}.key_refs_record() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	ids text[];
BEGIN
	IF TG_TABLE_NAME = 'pillars' THEN
		ids := ARRAY[{{schema}}.sealed_key_id(NEW.sealed)];
	ELSIF TG_TABLE_NAME = 'pillar_history' THEN
		ids := ARRAY[{{schema}}.sealed_key_id(NEW.old_sealed), {{schema}}.sealed_key_id(NEW.new_sealed)];
	ELSIF session_user = current_user THEN
		-- A version is written by tf_states_changed (SECURITY DEFINER) for a pg client too;
		-- as there, only strata's own role is believed.
		ids := ARRAY[{{schema}}.sealed_state_key_id(NEW.data)];
	ELSE
		RETURN NULL;
	END IF;
	INSERT INTO {{schema}}.key_refs (key_id)
	SELECT DISTINCT u FROM unnest(ids) u WHERE u IS NOT NULL
	ON CONFLICT DO NOTHING;
	RETURN NULL;
END;
$$;
REVOKE ALL ON FUNCTION {{schema}}.key_refs_record() FROM PUBLIC;

CREATE TRIGGER pillars_key_refs AFTER INSERT OR UPDATE OF sealed ON {{schema}}.pillars
	FOR EACH ROW WHEN (NEW.sealed IS NOT NULL) EXECUTE FUNCTION {{schema}}.key_refs_record();
CREATE TRIGGER pillar_history_key_refs AFTER INSERT OR UPDATE OF old_sealed, new_sealed ON {{schema}}.pillar_history
	FOR EACH ROW WHEN (NEW.old_sealed IS NOT NULL OR NEW.new_sealed IS NOT NULL) EXECUTE FUNCTION {{schema}}.key_refs_record();
CREATE TRIGGER tf_state_versions_key_refs AFTER INSERT OR UPDATE OF data ON {{schema}}.tf_state_versions
	FOR EACH ROW WHEN (substr(NEW.data, 1, 11) = 'strata:sv1:') EXECUTE FUNCTION {{schema}}.key_refs_record();

-- tf_states_changed, as in 0026, plus the record of a sealed state's key: every project's
-- states table already runs it, including projects created later.
CREATE OR REPLACE FUNCTION {{schema}}.tf_states_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	v_md5 text;
	v_actor text;
	v_source text;
	v_trusted boolean;
	v_sealed boolean;
	v_serial bigint;
	v_lineage text;
	v_vmd5 text;
	v_size bigint;
	v_stored bigint;
	m record;
	v_key text;
BEGIN
	IF NEW.name IS NULL OR NEW.data IS NULL THEN
		RETURN NULL;
	END IF;
	IF TG_OP = 'UPDATE' AND OLD.data IS NOT DISTINCT FROM NEW.data AND OLD.name IS NOT DISTINCT FROM NEW.name THEN
		RETURN NULL;
	END IF;
	v_md5 := md5(NEW.data);
	v_sealed := starts_with(NEW.data, 'strata:sv1:');
	IF NOT v_sealed AND EXISTS (SELECT 1 FROM {{schema}}.tf_projects
	                            WHERE name = TG_TABLE_SCHEMA AND encrypted) THEN
		RAISE EXCEPTION 'project % is encrypted: its states are written through strata''s HTTP backend only', TG_TABLE_SCHEMA
			USING ERRCODE = 'insufficient_privilege',
			      HINT = 'Use backend "http" (strata project backend-config); the pg backend cannot read or write an encrypted project.';
	END IF;
	-- Any session can set strata.source and strata.actor, so they are believed only from
	-- strata's own role: the one that owns this function (current_user inside a SECURITY
	-- DEFINER function) logged in as itself. Anyone else is a pg client, named by its role.
	v_trusted := session_user = current_user;
	IF v_trusted THEN
		v_source := coalesce(nullif(current_setting('strata.source', true), ''), 'pg');
		v_actor := nullif(current_setting('strata.actor', true), '');
	ELSE
		v_source := 'pg';
	END IF;
	-- Record the key a sealed state is wrapped with (key_refs above) before any early return:
	-- a conversion or a rotation ('encrypt') writes sealed states and no version. Only strata's
	-- own writes are believed, as for strata.source: a pg client cannot make every replica
	-- unready by writing a made-up key id.
	IF v_sealed AND v_trusted THEN
		v_key := {{schema}}.sealed_state_key_id(NEW.data);
		IF v_key IS NOT NULL THEN
			INSERT INTO {{schema}}.key_refs (key_id) VALUES (v_key) ON CONFLICT DO NOTHING;
		END IF;
	END IF;
	IF v_source = 'encrypt' THEN
		IF TG_OP = 'UPDATE' THEN
			UPDATE {{schema}}.tf_placeholders SET md5 = v_md5
			WHERE project = TG_TABLE_SCHEMA AND workspace = NEW.name AND md5 = md5(OLD.data);
		END IF;
		RETURN NULL;
	END IF;
	IF v_source = 'placeholder' THEN
		-- Marked here rather than by the caller, so only the transaction whose row actually
		-- landed (INSERT … ON CONFLICT DO NOTHING) marks it.
		INSERT INTO {{schema}}.tf_placeholders (project, workspace, md5)
		VALUES (TG_TABLE_SCHEMA, NEW.name, v_md5)
		ON CONFLICT (project, workspace) DO UPDATE SET md5 = excluded.md5;
		RETURN NULL;
	END IF;
	DELETE FROM {{schema}}.tf_placeholders WHERE project = TG_TABLE_SCHEMA AND workspace = NEW.name;
	IF v_actor IS NULL THEN
		v_actor := 'pg:' || session_user || coalesce('@' || host(inet_client_addr()), '');
	END IF;
	IF v_sealed THEN
		v_vmd5 := v_md5;
		v_size := octet_length(NEW.data);
		v_stored := octet_length(NEW.data);
		IF v_trusted AND current_setting('strata.plain_for', true) = NEW.name THEN
			v_serial := nullif(current_setting('strata.plain_serial', true), '')::bigint;
			v_lineage := nullif(current_setting('strata.plain_lineage', true), '');
			v_vmd5 := coalesce(nullif(current_setting('strata.plain_md5', true), ''), v_md5);
			v_size := coalesce(nullif(current_setting('strata.plain_size', true), '')::bigint, v_size);
		END IF;
	ELSE
		m := {{schema}}.tf_state_meta(NEW.data);
		v_serial := m.serial;
		v_lineage := m.lineage;
		v_vmd5 := v_md5;
		v_size := octet_length(NEW.data);
	END IF;
	INSERT INTO {{schema}}.tf_state_versions (project, workspace, n, serial, lineage, md5, size, stored_size, data, source, created_by)
	SELECT TG_TABLE_SCHEMA, NEW.name, coalesce(max(v.n), 0) + 1, v_serial, v_lineage, v_vmd5,
		v_size, v_stored, NEW.data, v_source, v_actor
	FROM {{schema}}.tf_state_versions v
	WHERE v.project = TG_TABLE_SCHEMA AND v.workspace = NEW.name;
	RETURN NULL;
END;
$$;
REVOKE ALL ON FUNCTION {{schema}}.tf_states_changed() FROM PUBLIC;

-- What the database holds already.
INSERT INTO {{schema}}.key_refs (key_id) SELECT k FROM {{schema}}.sealed_key_ids() k ON CONFLICT DO NOTHING;
