-- strata:compatible-since 15
-- A cheaper proof that an HTTP lock is protected (package internal/tfstate, keeper.go).
--
-- "Protected" means: a strata lock keeper holds the workspace's advisory key, so no pg client
-- can take it. Migration 0004 read that from pg_locks, which PostgreSQL builds from the whole
-- lock table (every partition, every backend's fast-path slots) on each read: ≈ 0.2 ms per
-- state write, lock read and unlock. Now a keeper holds, beside the key K, a witness: a
-- two-int4 advisory key W(K) that only keepers take, always after K and always let go before
-- K (tf_keeper_take, tf_keeper_release). So "W(K) is held" implies "a keeper holds K", and a
-- reader tests W(K) with one lock-table probe: pg_try_advisory_xact_lock_shared fails exactly
-- while someone holds it exclusively. A dead or terminated keeper backend loses both at once,
-- so the lock reads unprotected at once, as before.
--
-- The probe's side effect: when W(K) is free, the reader holds it shared until its
-- transaction ends. Only keepers take W, and only when taking K: a keeper that fails to get
-- W lets K go again and tries later (LOCK retries; the reconcile comes back). pg clients
-- never see W (they use single-bigint keys, objsubid 1; W is a two-int4 key, objsubid 2).
--
-- Compatible since 15: a keeper of release 15 holds K without W; its locks fail the probe
-- and fall back to the pg_locks test of migration 0004, so they still read as protected.

-- tf_lock_witness is W(K): the high word of K mixed into a per-schema class, the low word as
-- the object, so distinct keys have distinct witnesses within a schema.
CREATE FUNCTION {{schema}}.tf_lock_witness_class(k bigint) RETURNS int4
LANGUAGE sql IMMUTABLE AS $$ SELECT ({{schema_key}} # 1431655765 # (k >> 32)::int4) $$;

CREATE FUNCTION {{schema}}.tf_lock_witness_object(k bigint) RETURNS int4
LANGUAGE sql IMMUTABLE AS $$ SELECT ((k << 32) >> 32)::int4 $$;

-- A keeper's take: K, then W(K); when W(K) cannot be had (a reader probing it this instant),
-- K is let go again and the take reports false.
CREATE FUNCTION {{schema}}.tf_keeper_take(k bigint) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	IF NOT pg_try_advisory_lock(k) THEN
		RETURN false;
	END IF;
	IF pg_try_advisory_lock({{schema}}.tf_lock_witness_class(k), {{schema}}.tf_lock_witness_object(k)) THEN
		RETURN true;
	END IF;
	PERFORM pg_advisory_unlock(k);
	RETURN false;
END;
$$;

-- A keeper's release: W(K) first, then K. (Unlocking a W(K) the session does not hold only
-- warns; a key taken before this migration has none.)
CREATE FUNCTION {{schema}}.tf_keeper_release(k bigint) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	PERFORM pg_advisory_unlock({{schema}}.tf_lock_witness_class(k), {{schema}}.tf_lock_witness_object(k));
	RETURN pg_advisory_unlock(k);
END;
$$;

-- The fact behind "protected": W(K) held (one probe), or, for a keeper of release 15 that
-- holds K without W, the pg_locks test of migration 0004.
CREATE OR REPLACE FUNCTION {{schema}}.tf_lock_key_held(p_owner text, p_state_id bigint)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	IF p_owner = '' THEN
		RETURN false;
	END IF;
	IF NOT pg_try_advisory_xact_lock_shared({{schema}}.tf_lock_witness_class(p_state_id), {{schema}}.tf_lock_witness_object(p_state_id)) THEN
		RETURN true;
	END IF;
	RETURN EXISTS (
		SELECT 1 FROM {{schema}}.tf_keepers k
		JOIN pg_stat_activity a ON a.pid = k.backend_pid AND a.backend_start = k.backend_start
		JOIN pg_locks pl ON pl.pid = k.backend_pid
		WHERE k.replica = p_owner
		  AND pl.locktype = 'advisory' AND pl.objsubid = 1 AND pl.granted AND pl.mode = 'ExclusiveLock'
		  AND pl.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND ((pl.classid::bigint << 32) | pl.objid::bigint) = p_state_id);
END;
$$;
