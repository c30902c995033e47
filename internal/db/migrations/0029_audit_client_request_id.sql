-- strata:compatible-since 15
-- Request ids are the server's (issue 27, finding 8l): a client's X-Request-Id was stored as
-- the audit record's request_id verbatim, so one request's records could carry another's id.
-- The server now always chooses request_id itself and keeps what the client sent apart, in
-- client_request_id (package internal/auth, RecordAudit). Additive: older releases neither read
-- nor write it; their records leave it empty.
ALTER TABLE {{schema}}.audit_log ADD COLUMN client_request_id text NOT NULL DEFAULT '';
