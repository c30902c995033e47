-- name: HistoryEpochRestore
-- Migration 0030: a restored database starts a history of its own.
SELECT {{schema}}.history_epoch_restore($1);

-- name: LoginRoleApply
-- Migration 0030: creates a login role, or gives it a new password.
SELECT {{schema}}.login_role_apply($1, $2);

-- name: LoginRoleDrop
-- Migration 0002: what deleting a project does to its role.
SELECT {{schema}}.tf_drop_project_role($1);
