-- name: AuditPrune
-- Deletes up to $2 audit entries recorded before $1, oldest first, through the audit_log_at
-- index.
DELETE FROM {{schema}}.audit_log
WHERE id IN (
	SELECT id FROM {{schema}}.audit_log WHERE at < $1 ORDER BY at LIMIT $2
);
