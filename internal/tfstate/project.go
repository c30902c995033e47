package tfstate

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/secret"
)

func scanProject(row interface{ Scan(...any) error }) (api.Project, error) {
	var p api.Project
	err := row.Scan(&p.Name, &p.CreatedAt, &p.CreatedBy, &p.Adopted, &p.CredentialsRole, &p.Encryption)
	p.CreatedAt = p.CreatedAt.UTC()
	return p, err
}

// ProjectOptions are the properties a project is created with.
type ProjectOptions struct {
	// Encryption stores the project's states encrypted (see "Encrypted projects" in
	// encrypt.go); it needs the service's keys. An adopted schema's rows are sealed as it is
	// adopted.
	Encryption bool
}

// ProjectPut is ProjectCreate without options: an unencrypted project.
func (s *Service) ProjectPut(ctx context.Context, actor Actor, name string) (api.Project, bool, error) {
	return s.ProjectCreate(ctx, actor, name, ProjectOptions{})
}

// ProjectCreate creates a project, or adopts an existing schema as one, and reports whether it
// did (false: the project existed; PUT is idempotent; asking for encryption of an existing
// unencrypted project is a conflict, since converting is `project encrypt`'s work). A new
// project gets the pg backend's states table and unique index states_by_name, so Terraform and
// OpenTofu can use it with every skip_* flag set, with its id drawn from the project's own
// sequence; beside it strata's history tables and its versions trigger (migration 0034). An
// existing schema is adopted without touching its rows: its states table must have the pg
// backend's layout; its current rows become the first versions (history starts now). On
// Citus the schema is distributed before the trigger is made (distribute).
func (s *Service) ProjectCreate(ctx context.Context, actor Actor, name string, opts ProjectOptions) (api.Project, bool, error) {
	if err := ValidateProject(name, s.db.Schema()); err != nil {
		return api.Project{}, false, err
	}
	if opts.Encryption {
		if err := s.keys.Require(); err != nil {
			return api.Project{}, false, secret.Fault(err)
		}
	}
	var p api.Project
	created := false
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		var ignored string
		if err := tx.QueryRow(ctx, q.Get("ProjectDDLLock"), db.SchemaKey(s.db.Schema()), lockProjectDDL).Scan(&ignored); err != nil {
			return err
		}
		var err error
		p, err = scanProject(tx.QueryRow(ctx, q.Get("ProjectGet"), name))
		if err == nil {
			if opts.Encryption && !p.Encryption {
				return fault.Conflict("project %q exists and is not encrypted; convert it with `strata project encrypt %s` (POST /v1/projects/%s/encrypt)", name, name, name)
			}
			return nil
		}
		if !errors.Is(err, db.ErrNotFound) {
			return err
		}
		var schemaExists bool
		if err := tx.QueryRow(ctx, q.Get("ProjectSchemaExists"), name).Scan(&schemaExists); err != nil {
			return err
		}
		hasTable := false
		if schemaExists {
			var foreign string
			if err := tx.QueryRow(ctx, q.Get("ProjectForeignRelations"), name).Scan(&foreign); err != nil {
				return err
			}
			if foreign != "" {
				return fault.Conflict("schema %q exists and holds more than a pg backend states table (%s); strata adopts only schemas that hold the states table or nothing", name, truncateList(foreign))
			}
			if hasTable, err = checkStatesLayout(ctx, tx, name); err != nil {
				return err
			}
		}
		ddl := func(names ...string) error {
			for _, n := range names {
				if _, err := tx.Exec(ctx, pq(n, name)); err != nil {
					if errors.Is(err, db.ErrPermission) {
						return fault.Wrap(fault.KindForbidden, err, "strata's database role cannot set up schema %q (it needs to own its states table, and CREATE on the database for a new project)", name)
					}
					return fmt.Errorf("project %s: %s: %w", name, n, err)
				}
			}
			return nil
		}
		if err := ddl("ProjectCreateSchema", "ProjectCreateSequence"); err != nil {
			return err
		}
		var ignoredSeq int64
		if err := tx.QueryRow(ctx, q.Get("ProjectSequenceRange"), name).Scan(&ignoredSeq); err != nil {
			return err
		}
		if err := ddl("ProjectCreateTable", "ProjectSetIDDefault", "ProjectCreateIndex", "ProjectCreateVersions", "ProjectCreatePlaceholders", "ProjectCreateMeta", "ProjectInsertMeta"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, q.Get("ProjectInsert"), name, actor.Name, schemaExists); err != nil {
			return err
		}
		action := "project.create"
		if schemaExists {
			action = "project.adopt"
			if hasTable {
				if _, err := tx.Exec(ctx, pq("ProjectAdoptVersions", name), actor.Name); err != nil {
					return err
				}
			}
		}
		if err := s.distribute(ctx, tx, name); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, q.Get("ProjectUnsafeTriggers")).Scan(&ignored); err != nil {
			return err
		}
		if err := ddl("ProjectCreateTrigger"); err != nil {
			return err
		}
		created = true
		var detail map[string]any
		if opts.Encryption {
			detail = map[string]any{"encryption": true, "key": s.keys.Primary()}
			if err := markEncrypted(ctx, tx, name); err != nil {
				return err
			}
			// An adopted schema's rows (and the versions just made of them) are sealed now.
			for {
				n, remaining, err := s.encryptBatch(ctx, tx, actor, name, false, DefaultEncryptBatch)
				if err != nil {
					return err
				}
				if remaining == 0 || n == 0 {
					break
				}
			}
		}
		if err := audit(ctx, tx, actor, action, name, detail); err != nil {
			return err
		}
		p, err = scanProject(tx.QueryRow(ctx, q.Get("ProjectGet"), name))
		return err
	})
	if err != nil {
		return api.Project{}, false, categorize(secret.Fault(err))
	}
	if created {
		s.balance(ctx, name)
	}
	if err := s.countWorkspaces(ctx, &p); err != nil {
		return api.Project{}, false, err
	}
	return p, created, nil
}

// balance, on Citus, moves a project just created to the worker holding the fewest projects
// when its own holds at least two more (Citus places new schemas round-robin, which deletions
// and adoptions can leave uneven). It runs after the creating transaction has committed
// (Citus moves a schema outside a transaction block), and a failure only logs: the project
// works wherever it is.
func (s *Service) balance(ctx context.Context, name string) {
	if !s.opts.DistributeProjects {
		return
	}
	var (
		host, toHost string
		port, toPort int32
		have, least  int64
	)
	err := s.db.QueryRow(ctx, q.Get("ProjectPlacement"), name).Scan(&host, &port, &have, &toHost, &toPort, &least)
	if err != nil {
		s.log.Warn("project placement on Citus: cannot read it", "project", name, "err", err)
		return
	}
	if have < least+2 {
		return
	}
	if _, err := s.db.Exec(ctx, q.Get("ProjectMove"), name, toHost, toPort); err != nil {
		s.log.Warn("project placement on Citus: cannot move the project's schema", "project", name, "from", fmt.Sprintf("%s:%d", host, port), "to", fmt.Sprintf("%s:%d", toHost, toPort), "err", err)
		return
	}
	s.log.Info("project moved to the Citus worker holding the fewest projects", "project", name, "from", fmt.Sprintf("%s:%d", host, port), "to", fmt.Sprintf("%s:%d", toHost, toPort))
}

// distribute makes a project's schema a distributed schema when strata runs on Citus
// (Options.DistributeProjects), in the creating transaction, after its rows are in place and
// before its trigger exists; Citus places it on a worker. Without Citus it does nothing.
func (s *Service) distribute(ctx context.Context, tx *db.Tx, name string) error {
	if !s.opts.DistributeProjects {
		return nil
	}
	if _, err := tx.Exec(ctx, q.Get("ProjectDistribute"), name); err != nil {
		return fmt.Errorf("project %s: distributing its schema on Citus: %w", name, err)
	}
	return nil
}

// checkStatesLayout reports whether schema has a states table, and refuses one that the pg
// backend could not use: id bigint, name text with a unique index, data text.
func checkStatesLayout(ctx context.Context, tx *db.Tx, schema string) (bool, error) {
	rows, err := tx.Query(ctx, q.Get("ProjectStatesColumns"), schema)
	if err != nil {
		return false, err
	}
	cols := map[string]string{}
	for rows.Next() {
		var n, t string
		if err := rows.Scan(&n, &t); err != nil {
			rows.Close()
			return false, err
		}
		cols[n] = t
	}
	if err := rows.Err(); err != nil {
		return false, err
	}
	if len(cols) == 0 {
		return false, nil
	}
	for col, typ := range map[string]string{"id": "bigint", "name": "text", "data": "text"} {
		if cols[col] != typ {
			return true, fault.Conflict("schema %q has a states table that is not the pg backend's: column %s is %q, want %s", schema, col, cols[col], typ)
		}
	}
	var unique bool
	if err := tx.QueryRow(ctx, q.Get("ProjectStatesNameUnique"), schema).Scan(&unique); err != nil {
		return true, err
	}
	if !unique {
		return true, fault.Conflict("schema %q has a states table without a unique index on name, which the pg backend's upsert needs", schema)
	}
	return true, nil
}

// ProjectGet returns a project with its number of workspaces that hold a state.
func (s *Service) ProjectGet(ctx context.Context, name string) (api.Project, error) {
	if err := ValidateProject(name, s.db.Schema()); err != nil {
		return api.Project{}, err
	}
	p, err := scanProject(s.db.QueryRow(ctx, q.Get("ProjectGet"), name))
	if errors.Is(err, db.ErrNotFound) {
		return api.Project{}, fault.NotFound("project %q not found", name)
	}
	if err != nil {
		return api.Project{}, categorizeIn(name, err)
	}
	if err := s.countWorkspaces(ctx, &p); err != nil {
		return api.Project{}, err
	}
	return p, nil
}

func (s *Service) countWorkspaces(ctx context.Context, p *api.Project) error {
	var n int64
	if err := s.db.QueryRow(ctx, pq("ProjectStateCount", p.Name)).Scan(&n); err != nil {
		return categorizeIn(p.Name, err)
	}
	p.Workspaces = int(n)
	return nil
}

// ProjectListOptions page through the projects a caller may see.
type ProjectListOptions struct {
	// Filter restricts the list to the project names the caller may read; it is part of
	// the query, so pages hold visible projects only.
	Filter auth.Filter
	// After is the last name of the previous page ("" from the start).
	After string
	// Limit is the page size; 0 means no limit.
	Limit int
}

// ProjectList lists the projects opts.Filter lets through, by name, with their workspace
// counts, and reports whether more follow the page.
func (s *Service) ProjectList(ctx context.Context, opts ProjectListOptions) ([]api.Project, bool, error) {
	var limit *int
	if opts.Limit > 0 {
		n := opts.Limit + 1
		limit = &n
	}
	out, err := s.projectList(ctx, "ProjectList", opts, limit)
	if _, down := db.RemoteNodeDown(err); down {
		// A Citus worker does not answer: list from strata's tables, count each project on
		// its own, and mark those that cannot be counted.
		if out, err = s.projectList(ctx, "ProjectListNoCounts", opts, limit); err == nil {
			for i := range out {
				if cerr := s.countWorkspaces(ctx, &out[i]); cerr != nil {
					if _, down := db.RemoteNodeDown(cerr); !down {
						return nil, false, cerr
					}
					out[i].Unavailable = cerr.Error()
					var fe *fault.Error
					if errors.As(cerr, &fe) {
						out[i].Unavailable = fe.Detail
					}
				}
			}
		}
	}
	if err != nil {
		return nil, false, categorize(err)
	}
	more := opts.Limit > 0 && len(out) > opts.Limit
	if more {
		out = out[:opts.Limit]
	}
	return out, more, nil
}

func (s *Service) projectList(ctx context.Context, query string, opts ProjectListOptions, limit *int) ([]api.Project, error) {
	f := opts.Filter
	rows, err := s.db.Query(ctx, q.Get(query), f.All, f.Names, f.Prefixes, opts.After, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []api.Project{}
	for rows.Next() {
		var p api.Project
		var n int64
		if err := rows.Scan(&p.Name, &p.CreatedAt, &p.CreatedBy, &p.Adopted, &p.CredentialsRole, &p.Encryption, &n); err != nil {
			return nil, err
		}
		p.CreatedAt = p.CreatedAt.UTC()
		p.Workspaces = int(n)
		out = append(out, p)
	}
	return out, rows.Err()
}

// ProjectDelete deletes a project: its states table, locks, versions and credentials role,
// and its schema when nothing else is left in it (an adopted schema may hold more). A
// project that still holds states needs force. HTTP locks go with it (their keys are
// released); pg clients holding keys are not terminated, but lose the table.
func (s *Service) ProjectDelete(ctx context.Context, actor Actor, name string, force bool) error {
	if err := ValidateProject(name, s.db.Schema()); err != nil {
		return err
	}
	type lockKey struct {
		key   int64
		owner string
	}
	var released []lockKey
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		var ignored string
		if err := tx.QueryRow(ctx, q.Get("ProjectLockTimeout")).Scan(&ignored); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, q.Get("ProjectDDLLock"), db.SchemaKey(s.db.Schema()), lockProjectDDL).Scan(&ignored); err != nil {
			return err
		}
		p, err := scanProject(tx.QueryRow(ctx, q.Get("ProjectGetForUpdate"), name))
		if errors.Is(err, db.ErrNotFound) {
			return fault.NotFound("project %q not found", name)
		}
		if err != nil {
			return err
		}
		var states int64
		if err := tx.QueryRow(ctx, pq("ProjectStateCount", name)).Scan(&states); err != nil {
			return err
		}
		if states > 0 && !force {
			return fault.Conflict("project %q still holds %d state(s); delete with ?force=true to drop them", name, states)
		}
		rows, err := tx.Query(ctx, q.Get("ProjectLockKeys"), name)
		if err != nil {
			return err
		}
		for rows.Next() {
			var k lockKey
			if err := rows.Scan(&k.key, &k.owner); err != nil {
				rows.Close()
				return err
			}
			released = append(released, k)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, q.Get("ProjectUnsafeTriggers")).Scan(&ignored); err != nil {
			return err
		}
		for _, ddl := range []string{"ProjectDropTrigger", "ProjectDropTable", "ProjectDropHistory", "ProjectDropSequence"} {
			if _, err := tx.Exec(ctx, pq(ddl, name)); err != nil {
				return fmt.Errorf("project %s: %s: %w", name, ddl, err)
			}
		}
		if p.CredentialsRole != "" {
			var dropped bool
			if err := tx.QueryRow(ctx, q.Get("ProjectRoleDrop"), p.CredentialsRole).Scan(&dropped); err != nil {
				return err
			}
		}
		var schemaDropped bool
		if err := tx.QueryRow(ctx, q.Get("ProjectDropSchemaIfEmpty"), name).Scan(&schemaDropped); err != nil {
			return err
		}
		for _, k := range released {
			if k.owner != "" && k.owner != s.replica {
				if err := tx.QueryRow(ctx, q.Get("LockNotify"), s.channel, k.owner).Scan(&ignored); err != nil {
					return err
				}
			}
		}
		if _, err := tx.Exec(ctx, q.Get("ProjectDeleteRow"), name); err != nil {
			return err
		}
		return audit(ctx, tx, actor, "project.delete", name, map[string]any{"force": force, "states": states, "schemaDropped": schemaDropped, "locks": len(released)})
	})
	if err != nil {
		return categorizeIn(name, err)
	}
	for _, k := range released {
		if k.owner != "" {
			s.afterUnlock(context.WithoutCancel(ctx), k.owner, k.key)
		}
	}
	return nil
}

// ProjectCredentials creates (or, called again, re-keys) a login role for pg backend
// clients that can use only this project's states table and the shared id sequence, and
// returns a ready conn_str and backend block. It is for pg clients only: HTTP clients use
// strata tokens. The role cannot run the pg backend's DDL (CREATE … IF NOT EXISTS checks
// privileges first), so the backend block sets the skip_* flags; strata created the
// objects. The password reaches PostgreSQL only as a SCRAM-SHA-256 verifier.
func (s *Service) ProjectCredentials(ctx context.Context, actor Actor, name string) (api.ProjectCredentials, error) {
	if err := ValidateProject(name, s.db.Schema()); err != nil {
		return api.ProjectCredentials{}, err
	}
	role := "tf_" + name
	if len(role) > 63 {
		role = role[:63]
	}
	password := db.RandomPassword()
	verifier := db.SCRAMVerifier(password)
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		p, err := scanProject(tx.QueryRow(ctx, q.Get("ProjectGetForUpdate"), name))
		if errors.Is(err, db.ErrNotFound) {
			return fault.NotFound("project %q not found", name)
		}
		if err != nil {
			return err
		}
		if p.Encryption {
			return fault.Conflict("project %q is encrypted: its states table holds ciphertext, which the pg backend would read as a broken state (and strata refuses plaintext writes into it), so it has no pg backend credentials; use the HTTP backend (strata project backend-config)", name)
		}
		if p.CredentialsRole == "" {
			var other string
			err := tx.QueryRow(ctx, q.Get("ProjectRoleOwner"), role).Scan(&other)
			if err == nil {
				return fault.Conflict("role %q already belongs to project %q", role, other)
			}
			if !errors.Is(err, db.ErrNotFound) {
				return err
			}
		} else {
			role = p.CredentialsRole
		}
		var roleCreated bool
		if err := tx.QueryRow(ctx, q.Get("ProjectRoleApply"), name, role, verifier).Scan(&roleCreated); err != nil {
			return db.LoginRoleFault(role, err)
		}
		if p.CredentialsRole == "" && !roleCreated {
			return fault.Conflict("a database role %q exists that strata did not make; drop or rename it", role)
		}
		if _, err := tx.Exec(ctx, q.Get("ProjectSetRole"), name, role); err != nil {
			return err
		}
		return audit(ctx, tx, actor, "project.credentials", name, map[string]any{"role": role})
	})
	if err != nil {
		return api.ProjectCredentials{}, categorize(err)
	}
	base := s.opts.ClientURL
	if base == "" {
		base = s.opts.SessionURL
	}
	if base == "" {
		base = s.db.URL()
	}
	conn := db.ClientConnString(base, role, password)
	backend := fmt.Sprintf(`terraform {
  backend "pg" {
    conn_str             = %q
    schema_name          = %q
    skip_schema_creation = true
    skip_table_creation  = true
    skip_index_creation  = true
  }
}
`, conn, name)
	return api.ProjectCredentials{Project: name, Role: role, Password: password, ConnStr: conn, Backend: backend}, nil
}

func truncateList(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
