-- strata:compatible-since 2
-- tf_lock_key_held is the fact behind "protected": the lock's owner has a registered keeper
-- whose backend still exists (pid and start, since pids are reused) and holds the lock's key
-- exclusively, as pg_locks tells right now (a bigint key shows as classid = high 32 bits,
-- objid = low 32 bits, objsubid = 1). One definition for every query that reports or trusts
-- protection (GET …/lock, the write path, the workspace list). Additive: the previous
-- release does not call it.
CREATE FUNCTION {{schema}}.tf_lock_key_held(p_owner text, p_state_id bigint)
RETURNS boolean LANGUAGE sql STABLE AS $$
	SELECT p_owner <> '' AND EXISTS (
		SELECT 1 FROM {{schema}}.tf_keepers k
		JOIN pg_stat_activity a ON a.pid = k.backend_pid AND a.backend_start = k.backend_start
		JOIN pg_locks pl ON pl.pid = k.backend_pid
		WHERE k.replica = p_owner
		  AND pl.locktype = 'advisory' AND pl.objsubid = 1 AND pl.granted AND pl.mode = 'ExclusiveLock'
		  AND pl.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND ((pl.classid::bigint << 32) | pl.objid::bigint) = p_state_id)
$$;
