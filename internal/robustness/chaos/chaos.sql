-- name: TerminateProxiedBackends
-- Ends every client backend connected from one of the loopback ports $1 (the replicas'
-- proxies' ends of their connections), never this one, and counts those it ended. The ports
-- pick strata's replicas out exactly: a harness's own pools say "strata" too.
SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int
FROM pg_stat_activity
WHERE client_addr = '127.0.0.1' AND client_port = ANY($1::int[]) AND backend_type = 'client backend'
  AND pid <> pg_backend_pid();

-- name: StrataBackends
-- The pids of the client backends whose application_name matches $1, for tests that show a
-- fault replaced them.
SELECT coalesce(array_agg(pid ORDER BY pid), '{}')::int[]
FROM pg_stat_activity
WHERE application_name LIKE $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid();

-- name: SyncStandbys
-- How many synchronous standbys stream from this primary.
SELECT count(*)::int FROM pg_stat_replication WHERE sync_state = 'sync' AND state = 'streaming';

-- name: InRecovery
-- Whether this server is a standby.
SELECT pg_is_in_recovery();

-- name: PostmasterStart
-- When this server started, to tell a restarted server from the one before.
SELECT pg_postmaster_start_time()::text;

-- name: Sleep
-- A statement that runs for $1 seconds, for tests that need one in flight.
SELECT pg_sleep($1)::text;

-- name: StrataTransactions
-- How many of strata's backends (application_name LIKE $1) hold a transaction that wrote or
-- sits idle in a transaction: what a drain waits to reach zero. Read-only statements of the
-- watch pollers, outside a transaction block, do not count.
SELECT count(*)::int
FROM pg_stat_activity
WHERE application_name LIKE $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid()
  AND (backend_xid IS NOT NULL OR state LIKE 'idle in transaction%');

-- name: BackendPid
-- This session's backend, to tell whether a connection survived.
SELECT pg_backend_pid();
