-- name: TokenInsert
INSERT INTO {{schema}}.tokens (id, name, secret_hash, scopes, created_by, expires_at)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING created_at;

-- name: TokenGetByHash
SELECT id, name, scopes, expires_at
FROM {{schema}}.tokens
WHERE secret_hash = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now());

-- name: TokenList
SELECT id, name, scopes, created_at, created_by, expires_at, revoked_at, last_used_at
FROM {{schema}}.tokens
ORDER BY created_at, id;

-- name: TokenRevoke
UPDATE {{schema}}.tokens SET revoked_at = now()
WHERE id = $1 AND revoked_at IS NULL;

-- name: TokenExists
SELECT revoked_at IS NOT NULL FROM {{schema}}.tokens WHERE id = $1;

-- name: TokenTouch
UPDATE {{schema}}.tokens SET last_used_at = now()
WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute');

-- name: BootstrapClaim
INSERT INTO {{schema}}.bootstrap (key, value) VALUES ($1, $2)
ON CONFLICT (key) DO NOTHING;

-- name: AuditInsert
INSERT INTO {{schema}}.audit_log (actor, action, target, remote_addr, detail)
VALUES ($1, $2, $3, $4, $5);

-- name: AuditList
SELECT id, at, actor, action, target, remote_addr, detail
FROM {{schema}}.audit_log
WHERE ($1::bigint = 0 OR id < $1)
  AND starts_with(action, $2)
ORDER BY id DESC
LIMIT $3;
