-- strata:compatible-since 2
-- Terraform/OpenTofu state (package internal/tfstate).
--
-- A project's states live in its own schema, in the pg backend's `states` table, unchanged,
-- so that Terraform and OpenTofu with backend "pg" read and write the same rows as strata's
-- HTTP backend. Everything strata adds (projects, locks, versions) lives here, in strata's
-- schema, keyed by (project, workspace) = (schema name, states.name). The only object strata
-- puts on a project's table is an AFTER trigger, which records versions for writes made by
-- pg clients as well; it changes no column.

-- tf_projects lists the schemas strata manages. adopted marks schemas that existed before
-- (e.g. a pg backend's terraform_remote_state): their history starts at adoption, and
-- deleting the project never drops objects strata did not create. role_name is the login
-- role made by `strata project credentials`, dropped with the project.
CREATE TABLE {{schema}}.tf_projects (
	name text COLLATE "C" PRIMARY KEY,
	created_at timestamptz NOT NULL DEFAULT now(),
	created_by text NOT NULL,
	adopted boolean NOT NULL DEFAULT false,
	role_name text
);

-- tf_locks: one row per locked workspace, so a lock outlives the HTTP request and strata
-- restarts, and INSERT … ON CONFLICT DO NOTHING decides races between lockers in one
-- statement. state_id is the states row's id, the advisory key pg clients lock; owner is the
-- replica whose lock keeper holds that key in its session ('' when no keeper protects it);
-- unprotected_since is set while the keeper could not (re)take the key, so a pg client may
-- hold it.
CREATE TABLE {{schema}}.tf_locks (
	project text NOT NULL REFERENCES {{schema}}.tf_projects (name) ON DELETE CASCADE,
	workspace text COLLATE "C" NOT NULL,
	lock_id text NOT NULL,
	info text NOT NULL,
	state_id bigint NOT NULL,
	owner text NOT NULL DEFAULT '',
	created_by text NOT NULL,
	remote_addr text NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL DEFAULT now(),
	unprotected_since timestamptz,
	PRIMARY KEY (project, workspace)
);
CREATE INDEX tf_locks_owner ON {{schema}}.tf_locks (owner, state_id);

-- tf_placeholders marks states rows that strata's LOCK created for a workspace that had no
-- row yet (so pg clients cannot create it meanwhile). The row holds a valid empty state whose
-- MD5 is recorded here; while the data still has that MD5, GET answers 404. The trigger
-- writes the mark (for a write with strata.source = 'placeholder', which records no version)
-- and clears it at the first real write, by any client. A mark whose MD5 no longer matches
-- (the row was deleted and made anew) means nothing.
CREATE TABLE {{schema}}.tf_placeholders (
	project text NOT NULL REFERENCES {{schema}}.tf_projects (name) ON DELETE CASCADE,
	workspace text COLLATE "C" NOT NULL,
	md5 text NOT NULL,
	PRIMARY KEY (project, workspace)
);

-- tf_state_versions keeps every state written, by any client, verbatim (so MD5s match).
-- n is strata's own number per workspace, increasing; the primary key refuses a duplicate
-- number from two racing writers instead of losing one. serial and lineage are NULL for
-- payloads strata cannot read (OpenTofu's client-side encryption). Versions survive the
-- deletion of their workspace (a deleted workspace can be restored), not of the project.
CREATE TABLE {{schema}}.tf_state_versions (
	project text NOT NULL REFERENCES {{schema}}.tf_projects (name) ON DELETE CASCADE,
	workspace text COLLATE "C" NOT NULL,
	n bigint NOT NULL,
	serial bigint,
	lineage text,
	md5 text NOT NULL,
	size bigint NOT NULL,
	data text NOT NULL,
	source text NOT NULL,
	created_by text NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (project, workspace, n)
);

-- tf_keepers records each replica's lock-keeper session: backend pid and start (the pair
-- identifies a backend; pids are reused) and a heartbeat. Other replicas use it to tell a
-- live owner of a lock from a dead one, and to leave keepers out of "who holds this key".
CREATE TABLE {{schema}}.tf_keepers (
	replica text PRIMARY KEY,
	backend_pid integer NOT NULL,
	backend_start timestamptz NOT NULL,
	heartbeat_at timestamptz NOT NULL DEFAULT now(),
	started_at timestamptz NOT NULL DEFAULT now()
);

-- tf_state_meta reads serial and lineage from a state, or NULLs when the payload is not a
-- Terraform state (encrypted, or not JSON at all): strata never refuses what it cannot read.
CREATE FUNCTION {{schema}}.tf_state_meta(data text, OUT serial bigint, OUT lineage text)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
	j jsonb;
BEGIN
	BEGIN
		j := data::jsonb;
		IF jsonb_typeof(j) = 'object' THEN
			IF jsonb_typeof(j->'serial') = 'number' THEN
				serial := (j->>'serial')::bigint;
			END IF;
			IF jsonb_typeof(j->'lineage') = 'string' THEN
				lineage := j->>'lineage';
			END IF;
		END IF;
	EXCEPTION WHEN others THEN
		serial := NULL;
		lineage := NULL;
	END;
END;
$$;

-- tf_states_changed is the AFTER INSERT OR UPDATE trigger on every project's states table.
-- It makes history complete whichever client wrote: strata's HTTP backend, or Terraform and
-- OpenTofu writing the table directly. SECURITY DEFINER, because a pg client's role (see
-- `strata project credentials`) has no rights on strata's schema; search_path is pinned so
-- the definer's rights cannot be steered by the caller. Who wrote: strata passes the acting
-- user with set_config('strata.actor', …, true) in the writing transaction (believed only
-- from strata's own role); a pg client is named by its database role and address.
CREATE FUNCTION {{schema}}.tf_states_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	v_md5 text;
	v_actor text;
	v_source text;
	m record;
BEGIN
	IF NEW.name IS NULL OR NEW.data IS NULL THEN
		RETURN NULL;
	END IF;
	IF TG_OP = 'UPDATE' AND OLD.data IS NOT DISTINCT FROM NEW.data AND OLD.name IS NOT DISTINCT FROM NEW.name THEN
		RETURN NULL;
	END IF;
	v_md5 := md5(NEW.data);
	-- Any session can set strata.source and strata.actor, so they are believed only from
	-- strata's own role: the one that owns this function (current_user inside a SECURITY
	-- DEFINER function) logged in as itself. Anyone else is a pg client, named by its role.
	IF session_user = current_user THEN
		v_source := coalesce(nullif(current_setting('strata.source', true), ''), 'pg');
		v_actor := nullif(current_setting('strata.actor', true), '');
	ELSE
		v_source := 'pg';
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
	m := {{schema}}.tf_state_meta(NEW.data);
	INSERT INTO {{schema}}.tf_state_versions (project, workspace, n, serial, lineage, md5, size, data, source, created_by)
	SELECT TG_TABLE_SCHEMA, NEW.name, coalesce(max(v.n), 0) + 1, m.serial, m.lineage, v_md5,
		octet_length(NEW.data), NEW.data, v_source, v_actor
	FROM {{schema}}.tf_state_versions v
	WHERE v.project = TG_TABLE_SCHEMA AND v.workspace = NEW.name;
	RETURN NULL;
END;
$$;
REVOKE ALL ON FUNCTION {{schema}}.tf_states_changed() FROM PUBLIC;

-- tf_drop_schema_if_empty drops a project's schema only when nothing is left in it, so
-- deleting an adopted project never takes objects strata did not create.
CREATE FUNCTION {{schema}}.tf_drop_schema_if_empty(p_schema text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('DROP SCHEMA %I', p_schema);
	RETURN true;
EXCEPTION WHEN dependent_objects_still_exist THEN
	RETURN false;
END;
$$;

-- tf_project_role creates or updates the login role of `strata project credentials`: it may
-- use only its project's states table and the shared id sequence. p_verifier is a
-- SCRAM-SHA-256 verifier computed by strata, so no clear-text password ever reaches the
-- server or its logs. format() quotes the identifiers and the literal.
CREATE FUNCTION {{schema}}.tf_project_role(p_project text, p_role text, p_verifier text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	v_created boolean := false;
BEGIN
	IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = p_role) THEN
		EXECUTE format('ALTER ROLE %I WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD %L', p_role, p_verifier);
	ELSE
		EXECUTE format('CREATE ROLE %I WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD %L', p_role, p_verifier);
		v_created := true;
	END IF;
	EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), p_role);
	EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', p_project, p_role);
	EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I.states TO %I', p_project, p_role);
	EXECUTE format('GRANT USAGE, SELECT ON SEQUENCE public.global_states_id_seq TO %I', p_role);
	RETURN v_created;
END;
$$;

-- tf_drop_project_role removes a project's login role; when the role still has privileges in
-- another database it is kept (and its privileges here are gone), and false is returned.
CREATE FUNCTION {{schema}}.tf_drop_project_role(p_role text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = p_role) THEN
		RETURN true;
	END IF;
	-- DROP OWNED runs outside the block below, so its effect stays when DROP ROLE fails.
	EXECUTE format('DROP OWNED BY %I', p_role);
	BEGIN
		EXECUTE format('DROP ROLE %I', p_role);
	EXCEPTION WHEN dependent_objects_still_exist THEN
		RETURN false;
	END;
	RETURN true;
END;
$$;
