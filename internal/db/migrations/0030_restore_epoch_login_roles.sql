-- strata:compatible-since 15
-- Two operator paths that broke on a real installation (issue 28, findings 4 and 5). Both are
-- function bodies and one new function: a release from 15 on calls the same functions with
-- the same arguments, so the bound stays where it was.
--
-- 1. Login roles on least privilege. `strata project credentials` and `strata salt
-- credentials` create a login role, and give it a new password when run again (a rotation,
-- or the restore runbook). The second run said ALTER ROLE … NOSUPERUSER NOCREATEDB
-- NOCREATEROLE, and PostgreSQL 15 lets only a superuser name SUPERUSER or NOSUPERUSER in
-- ALTER ROLE at all (even to keep it off), so on a CREATEROLE role — the privilege strata asks
-- for — every rotation failed. login_role_apply names in ALTER ROLE only what changes: the
-- password and LOGIN, and an attribute the role should not have only when it has it (then only
-- a superuser may take it away, and PostgreSQL's refusal says so). PostgreSQL 16 lets a
-- CREATEROLE role alter only roles it holds ADMIN OPTION on, which the creator of a role gets
-- by itself: the roles strata alters are the roles strata created (a project's role is
-- refused when strata did not create it), so the rule holds by construction; a role someone
-- else made is refused by PostgreSQL with its own message, which strata passes on.
-- login_role_apply also grants CONNECT on the database, which every such role needs, so
-- `strata doctor` tests that too with its throwaway role.
--
-- Deleting a project dropped its role with DROP OWNED BY, which needs the privileges of that
-- role — a superuser's, or a member's: a CREATEROLE role is neither (PostgreSQL 15; in 16 the
-- ADMIN OPTION it holds does not inherit either), so deleting a project with credentials failed
-- too. tf_drop_project_role now revokes what was granted to the role in this database (the
-- grants strata made; REVOKE needs no more than having granted them) and then drops it; DROP
-- OWNED BY remains for a role strata may act as, which could own objects.
CREATE FUNCTION {{schema}}.login_role_apply(p_role text, p_verifier text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	r record;
BEGIN
	SELECT rolsuper, rolreplication, rolbypassrls, rolcreatedb, rolcreaterole INTO r FROM pg_roles WHERE rolname = p_role;
	IF NOT FOUND THEN
		EXECUTE format('CREATE ROLE %I WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD %L', p_role, p_verifier);
		EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), p_role);
		RETURN true;
	END IF;
	IF r.rolsuper OR r.rolreplication OR r.rolbypassrls THEN
		EXECUTE format('ALTER ROLE %I WITH NOSUPERUSER NOREPLICATION NOBYPASSRLS', p_role);
	END IF;
	IF r.rolcreatedb OR r.rolcreaterole THEN
		EXECUTE format('ALTER ROLE %I WITH NOCREATEDB NOCREATEROLE', p_role);
	END IF;
	EXECUTE format('ALTER ROLE %I WITH LOGIN PASSWORD %L', p_role, p_verifier);
	EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), p_role);
	RETURN false;
END;
$$;

CREATE OR REPLACE FUNCTION {{schema}}.tf_drop_project_role(p_role text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	v_oid oid;
	r record;
BEGIN
	SELECT oid INTO v_oid FROM pg_roles WHERE rolname = p_role;
	IF NOT FOUND THEN
		RETURN true;
	END IF;
	IF pg_has_role(v_oid, 'USAGE') THEN
		-- DROP OWNED runs outside the block below, so its effect stays when DROP ROLE fails.
		EXECUTE format('DROP OWNED BY %I', p_role);
	ELSE
		FOR r IN SELECT DISTINCT n.nspname FROM pg_namespace n, LATERAL aclexplode(n.nspacl) a WHERE a.grantee = v_oid LOOP
			EXECUTE format('REVOKE ALL ON SCHEMA %I FROM %I', r.nspname, p_role);
		END LOOP;
		FOR r IN SELECT DISTINCT n.nspname, c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,
				LATERAL aclexplode(c.relacl) a WHERE a.grantee = v_oid LOOP
			IF r.relkind = 'S' THEN
				EXECUTE format('REVOKE ALL ON SEQUENCE %I.%I FROM %I', r.nspname, r.relname, p_role);
			ELSE
				EXECUTE format('REVOKE ALL ON TABLE %I.%I FROM %I', r.nspname, r.relname, p_role);
			END IF;
		END LOOP;
		FOR r IN SELECT DISTINCT p.oid::regprocedure::text AS fn FROM pg_proc p, LATERAL aclexplode(p.proacl) a WHERE a.grantee = v_oid LOOP
			EXECUTE format('REVOKE ALL ON FUNCTION %s FROM %I', r.fn, p_role);
		END LOOP;
		EXECUTE format('REVOKE ALL ON DATABASE %I FROM %I', current_database(), p_role);
	END IF;
	BEGIN
		EXECUTE format('DROP ROLE %I', p_role);
	EXCEPTION WHEN dependent_objects_still_exist THEN
		RETURN false;
	END;
	RETURN true;
END;
$$;

CREATE OR REPLACE FUNCTION {{schema}}.tf_project_role(p_project text, p_role text, p_verifier text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	v_created boolean;
BEGIN
	v_created := {{schema}}.login_role_apply(p_role, p_verifier);
	EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', p_project, p_role);
	EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I.states TO %I', p_project, p_role);
	EXECUTE format('GRANT USAGE, SELECT ON SEQUENCE public.global_states_id_seq TO %I', p_role);
	RETURN v_created;
END;
$$;

CREATE OR REPLACE FUNCTION {{schema}}.salt_pillar_role(p_role text, p_verifier text, p_schema text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	v_created boolean;
BEGIN
	v_created := {{schema}}.login_role_apply(p_role, p_verifier);
	EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', p_schema, p_role);
	EXECUTE format('GRANT EXECUTE ON FUNCTION %I.node_pillars(text) TO %I', p_schema, p_role);
	RETURN v_created;
END;
$$;

-- 2. Every restore is a new history. The epoch of 0024 is the cluster's system identifier
-- and timeline, which a logical restore into another database of the same cluster keeps: the
-- restored copy went on drawing versions the source had already handed out for other changes,
-- and a watch resumed from one of them skipped the fork silently. `strata backup restore`
-- calls history_epoch_restore once the restored schema is migrated: it records an epoch of its
-- own (a fresh random name, so restoring one backup twice is two histories), moves the version
-- sequence a billion past the restored maximum and the compaction point with it — every watch
-- from a source version gets 410 and lists again, and the first version written after the
-- restore exceeds every version the source issued (unless the source wrote a billion changes
-- after the backup) — and records the cluster's own epoch too, so history_epoch_check does
-- not jump once more on the next connection. It returns the first version of the new history.
CREATE FUNCTION {{schema}}.history_epoch_restore(schema_name text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	cluster_ep text;
	last_drawn bigint;
	kept bigint;
	first bigint;
BEGIN
	PERFORM pg_advisory_xact_lock(hashtextextended(schema_name || '/history-epoch', 0));
	cluster_ep := (SELECT system_identifier::text FROM pg_control_system()) || '/' ||
	              (('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint)::text;
	SELECT CASE WHEN is_called THEN last_value ELSE 0 END INTO last_drawn FROM {{schema}}.resource_version_seq;
	SELECT coalesce(max(resource_version), 0) INTO kept FROM {{schema}}.changes;
	first := greatest(last_drawn, kept) + 1000000000;
	PERFORM setval('{{schema}}.resource_version_seq', first);
	UPDATE {{schema}}.watch_compaction SET compacted_through = greatest(compacted_through, first);
	UPDATE {{schema}}.watch_resolved SET resolved_through = greatest(resolved_through, first);
	INSERT INTO {{schema}}.history_epochs (epoch, fork_version, first_version)
		VALUES ('restore/' || cluster_ep || '/' || gen_random_uuid()::text, kept, first);
	INSERT INTO {{schema}}.history_epochs (epoch, fork_version, first_version)
		VALUES (cluster_ep, kept, first) ON CONFLICT (epoch) DO NOTHING;
	RETURN first;
END;
$$;
