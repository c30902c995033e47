-- strata:compatible-since 2
-- Render-cache invalidation (package internal/pillar): every statement that changes what a
-- node's merged pillar is made of notifies the channel "<schema>.pillars" on commit, whoever
-- runs it (this release, an older one during a rollout, an operator's SQL). Replicas LISTEN on
-- it and drop their cached renders. Statement-level triggers fire once per statement, and
-- PostgreSQL delivers one notification per transaction for identical ones, so a bulk write
-- costs one notification, not one per row.
CREATE FUNCTION {{schema}}.notify_pillars() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify(TG_TABLE_SCHEMA || '.pillars', '');
	RETURN NULL;
END;
$$;

CREATE TRIGGER pillars_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {{schema}}.pillars
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars();
CREATE TRIGGER resources_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {{schema}}.resources
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars();
CREATE TRIGGER labels_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {{schema}}.labels
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars();
CREATE TRIGGER group_members_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {{schema}}.group_members
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars();
CREATE TRIGGER settings_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {{schema}}.settings
	FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.notify_pillars();
