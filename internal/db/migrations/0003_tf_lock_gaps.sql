-- strata:compatible-since 2
-- The last window in which an HTTP lock did not hold its workspace's advisory key (its
-- keeper's session was lost, frozen past its timeout, or its replica died), kept on the lock
-- so GET …/lock can show it; every window is also in the audit log (state.lock.unprotected,
-- state.lock.protected). Added columns only: the previous release reads tf_locks by name.
ALTER TABLE {{schema}}.tf_locks ADD COLUMN last_gap_start timestamptz;
ALTER TABLE {{schema}}.tf_locks ADD COLUMN last_gap_end timestamptz;
