-- strata:compatible-since 15
-- Web console sessions (issue 20, package internal/auth): a signed-in browser holds a random
-- session secret in an HttpOnly cookie; the database keeps only its SHA-256, the token it acts
-- as and its CSRF token, so any replica behind a balancer serves any session. A session ends
-- when it expires, when it signs out, and with its token: the lookup joins the token and
-- requires it live (ON DELETE CASCADE covers tokens deleted outright). Additive.
CREATE TABLE {{schema}}.console_sessions (
	secret_hash bytea PRIMARY KEY,
	token_id text NOT NULL REFERENCES {{schema}}.tokens (id) ON DELETE CASCADE,
	csrf text NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	expires_at timestamptz NOT NULL
);
CREATE INDEX console_sessions_expires ON {{schema}}.console_sessions (expires_at);
