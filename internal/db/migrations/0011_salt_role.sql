-- strata:compatible-since 2
-- salt_pillar_role creates or updates the login role of `strata salt credentials`: it may
-- connect, see strata's schema and execute node_pillars (migration 0009), which runs as its
-- owner (SECURITY DEFINER) — and nothing else: no table of strata's is readable by it.
-- p_verifier is a SCRAM-SHA-256 verifier computed by strata, so no clear-text password ever
-- reaches the server or its logs. p_schema is strata's schema (the caller's). format() quotes
-- identifiers and literals.
CREATE FUNCTION {{schema}}.salt_pillar_role(p_role text, p_verifier text, p_schema text) RETURNS boolean
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
	EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', p_schema, p_role);
	EXECUTE format('GRANT EXECUTE ON FUNCTION %I.node_pillars(text) TO %I', p_schema, p_role);
	RETURN v_created;
END;
$$;
