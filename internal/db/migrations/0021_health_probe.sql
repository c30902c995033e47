-- strata:compatible-since 15
-- health_probe: one row per replica that /readyz rewrites, only after a write failed for want
-- of disk, to learn when writes can succeed again (a read cannot tell a full disk). Additive.
CREATE TABLE {{schema}}.health_probe (
	replica text PRIMARY KEY,
	at timestamptz NOT NULL DEFAULT now()
);
