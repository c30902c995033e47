-- strata:compatible-since 15
-- Terraform state encrypted at rest (issue 22, package internal/tfstate, "Encrypted
-- projects"). Additive: a release that does not know encryption creates no encrypted project,
-- and for every other project the versions trigger below behaves as before.
--
-- An encrypted project stores every state sealed (package secret: AES-256-GCM with a data key
-- per value, wrapped by a key-encryption key, bound to project and workspace) in the same
-- text column of its states table, as 'strata:sv1:' followed by the sealed bytes in base64,
-- so both the HTTP backend's rows and the versions the trigger copies from them hold only
-- ciphertext, and any tool (the offline `strata state decrypt`) can tell a sealed state from
-- a plain one.

-- encrypted marks a project whose states are sealed. It is set when the project is created
-- encrypted or when `strata project encrypt` starts converting it, and never cleared.
ALTER TABLE {{schema}}.tf_projects ADD COLUMN encrypted boolean NOT NULL DEFAULT false;

-- stored_size is the size of the text the states row held for a sealed version (size is the
-- plaintext's, as clients see it); NULL for a plain version, whose stored size is size.
-- Workspace listings compare it with the row's current size to know whether the latest
-- version describes the current state without decrypting it.
ALTER TABLE {{schema}}.tf_state_versions ADD COLUMN stored_size bigint;

-- tf_states_changed, as in 0002, plus sealed states. The trigger cannot read a sealed state,
-- so for one it takes serial, lineage, MD5 and size of the plaintext from settings strata
-- sets in the writing transaction (strata.plain_for names the workspace they describe, so
-- settings left from another row's write in the same transaction are never applied to this
-- one), believed only from strata's own role as strata.actor is. A write with
-- strata.source = 'encrypt' (the conversion of an existing project, which seals what is
-- already there) records no version and carries the placeholder mark over to the sealed
-- text. A plaintext write into an encrypted project is refused: it comes from a pg backend
-- client (or an old release) that does not know the project is encrypted, and storing it
-- would put plaintext in the database and a state the HTTP backend would have sealed beside
-- sealed ones; the client sees the error instead of a silent success.
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
