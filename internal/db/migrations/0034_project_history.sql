-- strata:compatible-since 34
-- Each project's history lives in the project's own schema (issue 32, docs/scale-out.md).
--
-- Until now the versions trigger on every project's states table wrote strata's central
-- tf_state_versions and tf_placeholders and read tf_projects. On Citus a project schema is a
-- distributed ("tenant") schema: its tables and their triggers live on one worker, where
-- strata's own schema has no tables, so that trigger could not run there at all. Now every
-- object the trigger touches is in the schema of the table it fires on:
--
--   <project>.tf_state_versions  every state written, by any client (was strata.tf_state_versions)
--   <project>.tf_placeholders    rows a LOCK created (was strata.tf_placeholders)
--   <project>.tf_project         one row: whether the project is encrypted (mirrors tf_projects)
--   <project>.states_id_seq      the states table's id sequence, one per project, each drawing
--                                from its own range (tf_project_ranges) so that ids, which are
--                                the pg backend's advisory lock keys, stay unique across
--                                projects on one PostgreSQL as the shared
--                                public.global_states_id_seq kept them
--
-- Co-located by construction, they move together when Citus moves the schema. The same
-- tables, trigger and queries serve one PostgreSQL, so there is one code path.
--
-- Not additive: a release before this one reads and writes the central tables, which are
-- gone, so it must not run beside this one (compatible-since 34).

-- tf_project_ranges numbers the projects' id ranges: project k's states_id_seq starts at
-- k << 40 (2^40 ids per project). Range 0 is the shared sequence's, which existing rows used.
CREATE SEQUENCE {{schema}}.tf_project_ranges AS bigint MINVALUE 1;

DO $$
DECLARE
	p record;
BEGIN
	FOR p IN SELECT name, encrypted FROM {{schema}}.tf_projects ORDER BY name LOOP
		EXECUTE format('CREATE SCHEMA IF NOT EXISTS %I', p.name);
		EXECUTE format('CREATE TABLE %I.tf_state_versions (
			workspace text COLLATE "C" NOT NULL,
			n bigint NOT NULL,
			serial bigint,
			lineage text,
			md5 text NOT NULL,
			size bigint NOT NULL,
			stored_size bigint,
			data text NOT NULL,
			source text NOT NULL,
			created_by text NOT NULL,
			created_at timestamptz NOT NULL DEFAULT now(),
			PRIMARY KEY (workspace, n))', p.name);
		EXECUTE format('INSERT INTO %I.tf_state_versions (workspace, n, serial, lineage, md5, size, stored_size, data, source, created_by, created_at)
			SELECT workspace, n, serial, lineage, md5, size, stored_size, data, source, created_by, created_at
			FROM {{schema}}.tf_state_versions WHERE project = $1', p.name) USING p.name;
		EXECUTE format('CREATE TABLE %I.tf_placeholders (workspace text COLLATE "C" PRIMARY KEY, md5 text NOT NULL)', p.name);
		EXECUTE format('INSERT INTO %I.tf_placeholders (workspace, md5)
			SELECT workspace, md5 FROM {{schema}}.tf_placeholders WHERE project = $1', p.name) USING p.name;
		EXECUTE format('CREATE TABLE %I.tf_project (one boolean PRIMARY KEY DEFAULT true CHECK (one), encrypted boolean NOT NULL DEFAULT false)', p.name);
		EXECUTE format('INSERT INTO %I.tf_project (encrypted) VALUES ($1)', p.name) USING p.encrypted;
		-- IF NOT EXISTS: a states table made with a serial id already has this sequence; it
		-- moves to the project's range like a new one (its ids only grow).
		EXECUTE format('CREATE SEQUENCE IF NOT EXISTS %I.states_id_seq AS bigint', p.name);
		PERFORM setval(format('%I.states_id_seq', p.name)::regclass, nextval('{{schema}}.tf_project_ranges') << 40, false);
		IF to_regclass(format('%I.states', p.name)) IS NOT NULL THEN
			EXECUTE format('ALTER TABLE %I.states ALTER COLUMN id SET DEFAULT nextval(%L::regclass)', p.name, format('%I.states_id_seq', p.name));
			-- A pg client role of `strata project credentials` draws ids from the new sequence.
			IF EXISTS (SELECT 1 FROM {{schema}}.tf_projects WHERE name = p.name AND role_name IS NOT NULL)
			   AND EXISTS (SELECT 1 FROM pg_roles r JOIN {{schema}}.tf_projects t ON r.rolname = t.role_name WHERE t.name = p.name) THEN
				EXECUTE format('GRANT USAGE, SELECT ON SEQUENCE %I.states_id_seq TO %I', p.name,
					(SELECT role_name FROM {{schema}}.tf_projects WHERE name = p.name));
			END IF;
		END IF;
	END LOOP;
END;
$$;

DROP TRIGGER tf_state_versions_key_refs ON {{schema}}.tf_state_versions;
DROP TABLE {{schema}}.tf_state_versions;
DROP TABLE {{schema}}.tf_placeholders;

-- tf_states_changed, as in 0031, touching only the schema of the table it fires on (and
-- strata's key_refs, where that table exists: see below). Identifiers are quoted by
-- format(%I) from TG_TABLE_SCHEMA, values bound with USING. The next version number is read
-- first and inserted with VALUES: Citus 13.2 deparses `INSERT … SELECT coalesce(max(n), 0) + 1
-- …` into a tenant table wrongly (docs/scale-out.md); the primary key still refuses a duplicate
-- number from two racing writers. Serial and lineage are parsed here rather than by
-- tf_state_meta, a function of strata's schema that a Citus worker does not have.
--
-- Who wrote: strata sets strata.actor and strata.source with set_config in the writing
-- transaction through a statement that reads <project>.tf_project (StateSetActor), so that on
-- Citus it runs on the worker that holds the project, in the same worker transaction as the
-- write, and the trigger sees it there; on one PostgreSQL it is the same statement. A pg
-- client is named by its database role and the address it connects from; on Citus the
-- trigger runs in Citus's worker session, whose client address is the coordinator's.
--
-- key_refs (0031) is recorded here when strata's schema holds it in this database, i.e. on
-- one PostgreSQL; on a Citus worker it does not, and strata records the key of every sealed
-- value it writes itself, in the same transaction (KeyRefRecord), on both.
CREATE OR REPLACE FUNCTION {{schema}}.tf_states_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	v_md5 text;
	v_actor text;
	v_source text;
	v_trusted boolean;
	v_sealed boolean;
	v_encrypted boolean;
	v_serial bigint;
	v_lineage text;
	v_vmd5 text;
	v_size bigint;
	v_stored bigint;
	v_key text;
	v_n bigint;
	j jsonb;
BEGIN
	IF NEW.name IS NULL OR NEW.data IS NULL THEN
		RETURN NULL;
	END IF;
	IF TG_OP = 'UPDATE' AND OLD.data IS NOT DISTINCT FROM NEW.data AND OLD.name IS NOT DISTINCT FROM NEW.name THEN
		RETURN NULL;
	END IF;
	v_md5 := md5(NEW.data);
	v_sealed := starts_with(NEW.data, 'strata:sv1:');
	IF NOT v_sealed THEN
		EXECUTE format('SELECT encrypted FROM %I.tf_project', TG_TABLE_SCHEMA) INTO v_encrypted;
		IF coalesce(v_encrypted, false) THEN
			RAISE EXCEPTION 'project % is encrypted: its states are written through strata''s HTTP backend only', TG_TABLE_SCHEMA
				USING ERRCODE = 'insufficient_privilege',
				      HINT = 'Use backend "http" (strata project backend-config); the pg backend cannot read or write an encrypted project.';
		END IF;
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
	IF v_sealed AND v_trusted AND to_regclass('{{schema}}.key_refs') IS NOT NULL THEN
		v_key := {{schema}}.sealed_state_key_id(NEW.data);
		IF v_key IS NOT NULL THEN
			INSERT INTO {{schema}}.key_refs (key_id) VALUES (v_key) ON CONFLICT DO NOTHING;
		END IF;
	END IF;
	IF v_source = 'encrypt' THEN
		IF TG_OP = 'UPDATE' THEN
			EXECUTE format('UPDATE %I.tf_placeholders SET md5 = $1 WHERE workspace = $2 AND md5 = $3', TG_TABLE_SCHEMA)
				USING v_md5, NEW.name, md5(OLD.data);
		END IF;
		RETURN NULL;
	END IF;
	IF v_source = 'placeholder' THEN
		-- Marked here rather than by the caller, so only the transaction whose row actually
		-- landed (INSERT … ON CONFLICT DO NOTHING) marks it.
		EXECUTE format('INSERT INTO %I.tf_placeholders (workspace, md5) VALUES ($1, $2)
			ON CONFLICT (workspace) DO UPDATE SET md5 = excluded.md5', TG_TABLE_SCHEMA)
			USING NEW.name, v_md5;
		RETURN NULL;
	END IF;
	EXECUTE format('DELETE FROM %I.tf_placeholders WHERE workspace = $1', TG_TABLE_SCHEMA) USING NEW.name;
	IF v_actor IS NULL THEN
		v_actor := 'pg:' || session_user || coalesce('@' || host(inet_client_addr()), '');
	END IF;
	v_vmd5 := v_md5;
	v_size := octet_length(NEW.data);
	IF v_sealed THEN
		v_stored := octet_length(NEW.data);
		IF v_trusted AND current_setting('strata.plain_for', true) = NEW.name THEN
			v_serial := nullif(current_setting('strata.plain_serial', true), '')::bigint;
			v_lineage := nullif(current_setting('strata.plain_lineage', true), '');
			v_vmd5 := coalesce(nullif(current_setting('strata.plain_md5', true), ''), v_md5);
			v_size := coalesce(nullif(current_setting('strata.plain_size', true), '')::bigint, v_size);
		END IF;
	ELSE
		BEGIN
			j := NEW.data::jsonb;
			IF jsonb_typeof(j) = 'object' THEN
				IF jsonb_typeof(j->'serial') = 'number' THEN
					v_serial := (j->>'serial')::bigint;
				END IF;
				IF jsonb_typeof(j->'lineage') = 'string' THEN
					v_lineage := j->>'lineage';
				END IF;
			END IF;
		EXCEPTION WHEN others THEN
			v_serial := NULL;
			v_lineage := NULL;
		END;
	END IF;
	EXECUTE format('SELECT coalesce(max(n), 0) + 1 FROM %I.tf_state_versions WHERE workspace = $1', TG_TABLE_SCHEMA)
		INTO v_n USING NEW.name;
	EXECUTE format('INSERT INTO %I.tf_state_versions (workspace, n, serial, lineage, md5, size, stored_size, data, source, created_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)', TG_TABLE_SCHEMA)
		USING NEW.name, v_n, v_serial, v_lineage, v_vmd5, v_size, v_stored, NEW.data, v_source, v_actor;
	RETURN NULL;
END;
$$;
REVOKE ALL ON FUNCTION {{schema}}.tf_states_changed() FROM PUBLIC;

-- sealed_key_ids, as in 0031, with the versions of each project read from its schema.
CREATE OR REPLACE FUNCTION {{schema}}.sealed_key_ids() RETURNS SETOF text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	p text;
	enc boolean;
BEGIN
	RETURN QUERY
	SELECT DISTINCT k FROM (
		SELECT {{schema}}.sealed_key_id(sealed) AS k FROM {{schema}}.pillars WHERE sealed IS NOT NULL
		UNION ALL SELECT {{schema}}.sealed_key_id(old_sealed) FROM {{schema}}.pillar_history WHERE old_sealed IS NOT NULL
		UNION ALL SELECT {{schema}}.sealed_key_id(new_sealed) FROM {{schema}}.pillar_history WHERE new_sealed IS NOT NULL
	) s WHERE k IS NOT NULL;
	FOR p, enc IN SELECT name, encrypted FROM {{schema}}.tf_projects LOOP
		IF to_regclass(format('%I.tf_state_versions', p)) IS NOT NULL THEN
			RETURN QUERY EXECUTE format(
				'SELECT DISTINCT {{schema}}.sealed_state_key_id(data) FROM %I.tf_state_versions WHERE substr(data, 1, 11) = ''strata:sv1:'' AND {{schema}}.sealed_state_key_id(data) IS NOT NULL', p);
		END IF;
		IF enc AND to_regclass(format('%I.states', p)) IS NOT NULL THEN
			RETURN QUERY EXECUTE format(
				'SELECT DISTINCT {{schema}}.sealed_state_key_id(data) FROM %I.states WHERE substr(data, 1, 11) = ''strata:sv1:'' AND {{schema}}.sealed_state_key_id(data) IS NOT NULL', p);
		END IF;
	END LOOP;
END;
$$;

-- tf_project_role, as in 0030, granting the project's own id sequence.
CREATE OR REPLACE FUNCTION {{schema}}.tf_project_role(p_project text, p_role text, p_verifier text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	v_created boolean;
BEGIN
	v_created := {{schema}}.login_role_apply(p_role, p_verifier);
	EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', p_project, p_role);
	EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I.states TO %I', p_project, p_role);
	IF to_regclass(format('%I.states_id_seq', p_project)) IS NOT NULL THEN
		EXECUTE format('GRANT USAGE, SELECT ON SEQUENCE %I.states_id_seq TO %I', p_project, p_role);
	END IF;
	IF to_regclass('public.global_states_id_seq') IS NOT NULL THEN
		EXECUTE format('GRANT USAGE, SELECT ON SEQUENCE public.global_states_id_seq TO %I', p_role);
	END IF;
	RETURN v_created;
END;
$$;
