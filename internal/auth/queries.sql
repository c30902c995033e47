-- name: TokenInsert
INSERT INTO {{schema}}.tokens (id, name, secret_hash, scopes, created_by, expires_at, scopes_legacy)
VALUES ($1, $2, $3, $4, $5, $6, false)
RETURNING created_at;

-- name: TokenGetByHash
SELECT id, name, scopes, expires_at
FROM {{schema}}.tokens
WHERE secret_hash = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now());

-- name: TokenList
-- $1-$3 are the caller's auth.Filter on token names, $4/$5 the last (created_at, id) of the
-- previous page.
SELECT id, name, scopes, created_at, created_by, expires_at, revoked_at, last_used_at
FROM {{schema}}.tokens
WHERE ($1::boolean OR name = ANY($2::text[])
       OR EXISTS (SELECT 1 FROM unnest($3::text[]) p WHERE starts_with(name, p)))
  AND ($4::timestamptz IS NULL OR (created_at, id) > ($4::timestamptz, $5::text))
ORDER BY created_at, id
LIMIT $6;

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
-- With $8 the record is written only when an earlier statement of the transaction set
-- strata.wrote to 'yes': the record of a write that may turn out to write nothing, sent behind
-- it in one pipeline (AuditEntry.OnlyIfWrote).
INSERT INTO {{schema}}.audit_log (actor, action, target, remote_addr, detail, request_id, client_request_id)
SELECT $1, $2, $3, $4, $5, $6, $7
WHERE NOT $8::boolean OR current_setting('strata.wrote', true) = 'yes';

-- name: AuditList
-- Every action: newest first along the primary key.
SELECT id, at, actor, action, target, remote_addr, detail, request_id, client_request_id
FROM {{schema}}.audit_log
WHERE ($1::bigint = 0 OR id < $1)
ORDER BY id DESC
LIMIT $2;

-- name: AuditListAction
-- Actions starting with $2: a range [$2, $3) in byte order, where $3 is $2 followed by the
-- highest code point, so the audit_log_action_id index (action COLLATE "C", id) serves it;
-- starts_with keeps the answer exact whatever the range admits. A starts_with(...) filter
-- alone cannot use any index: the log would be read backwards until a page is found.
SELECT id, at, actor, action, target, remote_addr, detail, request_id, client_request_id
FROM {{schema}}.audit_log
WHERE ($1::bigint = 0 OR id < $1)
  AND action COLLATE "C" >= $2 AND action COLLATE "C" < $3
  AND starts_with(action, $2)
ORDER BY id DESC
LIMIT $4;

-- name: ServerKeyGetOrCreate
-- One statement whatever other replicas do: the first caller's key is stored, every later
-- (or concurrent) caller gets the stored one back (the no-op update returns the row).
INSERT INTO {{schema}}.server_keys (name, key) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET key = {{schema}}.server_keys.key
RETURNING key;

-- name: TokenScopesAll
-- The tokens the scope migration looks at: every one not revoked that an older release stored
-- (scopes_legacy, migration 0028); a token this release created is never rewritten.
SELECT id, name, scopes FROM {{schema}}.tokens WHERE revoked_at IS NULL AND scopes_legacy ORDER BY created_at, id;

-- name: TokenScopesSwap
-- Compare-and-set: only the replica that sees the old scopes still stored rewrites them, so
-- replicas starting together migrate (and audit) each token once.
UPDATE {{schema}}.tokens SET scopes = $2, scopes_legacy = false WHERE id = $1 AND scopes = $3 AND scopes_legacy;

-- name: TokenScopesChecked
-- A legacy token the scope migration found nothing to rewrite in: it is not looked at again.
UPDATE {{schema}}.tokens SET scopes_legacy = false WHERE id = $1 AND scopes = $2;

-- name: TokenStillValid
-- Whether a token a long request verified is still in force: not revoked, not expired by the
-- database's clock.
SELECT EXISTS (SELECT 1 FROM {{schema}}.tokens
               WHERE id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()));

-- name: TokenNameLock
-- Serializes creations of one token name (transaction-scoped), so the check below and the
-- insert that follows it are one decision under any concurrency.
SELECT pg_advisory_xact_lock(hashtextextended('{{schema}}.tokens.name:' || $1, 0));

-- name: TokenLiveByName
SELECT id FROM {{schema}}.tokens
WHERE name = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
ORDER BY created_at
LIMIT 1;

-- name: AuditFollow
-- The records after the cursor ($1 xact, $2 id) in (xact, id) order, of transactions older
-- than every transaction still running: none can ever appear below that line, so a follower
-- that goes on from the last record it read misses nothing (migration 0020). $3 an action
-- prefix ('' for all), $4 the batch size.
SELECT id, at, actor, action, target, remote_addr, detail, request_id, client_request_id, coalesce(xact, '0'::xid8)::text
FROM {{schema}}.audit_log
WHERE (coalesce(xact, '0'::xid8), id) > ($1::xid8, $2::bigint)
  AND coalesce(xact, '0'::xid8) < pg_snapshot_xmin(pg_current_snapshot())
  AND starts_with(action, $3)
ORDER BY coalesce(xact, '0'::xid8), id
LIMIT $4;

-- name: AuditFollowStart
-- Where a follow "from now" starts: every transaction older than the oldest one running is
-- history (a few records committed just before may still follow).
SELECT pg_snapshot_xmin(pg_current_snapshot())::text;

-- name: SessionInsert
INSERT INTO {{schema}}.console_sessions (secret_hash, token_id, csrf, expires_at)
VALUES ($1, $2, $3, now() + make_interval(secs => $4))
RETURNING expires_at;

-- name: SessionGet
-- A live session of a live token: revoking or expiring the token ends its sessions.
SELECT t.id, t.name, t.scopes, t.expires_at, s.csrf, s.expires_at
FROM {{schema}}.console_sessions s JOIN {{schema}}.tokens t ON t.id = s.token_id
WHERE s.secret_hash = $1 AND s.expires_at > now()
  AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now());

-- name: SessionStillValid
-- Whether a session a long console request began with is still live (not signed out on any
-- replica, not expired by the database's clock); its token is checked by TokenStillValid.
SELECT EXISTS (SELECT 1 FROM {{schema}}.console_sessions WHERE secret_hash = $1 AND expires_at > now());

-- name: SessionDelete
DELETE FROM {{schema}}.console_sessions WHERE secret_hash = $1 RETURNING token_id;

-- name: SessionPrune
DELETE FROM {{schema}}.console_sessions WHERE expires_at < now();

-- name: SessionsEndAll
-- After a restore: sessions of the installation the backup was taken from end.
DELETE FROM {{schema}}.console_sessions;
