-- strata:compatible-since 15
-- Following the audit log (GET /v1/audit?watch=true, `strata audit --follow`) without ever
-- skipping a record. Ids are drawn in insert order, not commit order, so "after the last id
-- read" would skip a record whose transaction commits after a later one's. Each record now
-- carries its transaction's id (xid8), and a follower reads in (xact, id) order only the
-- transactions older than every one still running (pg_snapshot_xmin): no record can appear
-- below that line afterwards (package internal/auth, FollowAudit). Records written before this
-- migration (or by release 15) have no xact and count as the oldest.
-- The column has no default in the ADD (a volatile default would rewrite the table); the
-- default applies to new rows only.
ALTER TABLE {{schema}}.audit_log ADD COLUMN xact xid8;
ALTER TABLE {{schema}}.audit_log ALTER COLUMN xact SET DEFAULT pg_current_xact_id();
CREATE INDEX audit_log_follow ON {{schema}}.audit_log ((coalesce(xact, '0'::xid8)), id);
