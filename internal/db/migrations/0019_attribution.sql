-- strata:compatible-since 15
-- Every write attributed (issue 18): the request id joins an audit record to the request's
-- log lines, and every change of the changes log names who made it, from where and in which
-- request (package internal/resource: the generic write path fills them from the request's
-- context). Additive: release 15 neither reads nor writes them; its writes leave them empty.
ALTER TABLE {{schema}}.audit_log ADD COLUMN request_id text NOT NULL DEFAULT '';
ALTER TABLE {{schema}}.changes ADD COLUMN actor text NOT NULL DEFAULT '';
ALTER TABLE {{schema}}.changes ADD COLUMN remote_addr text NOT NULL DEFAULT '';
ALTER TABLE {{schema}}.changes ADD COLUMN request_id text NOT NULL DEFAULT '';
