package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/db/migrations"
	"github.com/stratahq/strata/internal/keyref"
	"github.com/stratahq/strata/internal/secret"
)

// DoctorCheck is one feature and whether the database and strata's role can serve it.
type DoctorCheck struct {
	Feature string `json:"feature"`
	OK      bool   `json:"ok"`
	// Needs says what is missing (empty when OK).
	Needs string `json:"needs,omitempty"`
	// Note says what serve will do about a check that passes (pending migrations it applies).
	Note string `json:"note,omitempty"`
}

// Doctor checks, on the open database, what each of strata's features needs: the schema at
// this release's version, a database that accepts writes, and the role's privileges for the
// optional features. strata doctor prints it; serve logs what is missing at start and lists
// it among /readyz's warnings and in GET /v1/status, so a missing privilege is known before
// the first request that needs it.
func Doctor(ctx context.Context, d *db.DB) ([]DoctorCheck, error) {
	var out []DoctorCheck
	schema, schemaOK, err := doctorSchema(ctx, d)
	if err != nil {
		return nil, err
	}
	out = append(out, schema)
	werr := d.CheckWritable(ctx)
	out = append(out, DoctorCheck{Feature: "writes", OK: werr == nil, Needs: needsText(werr)})
	p, err := d.RolePrivileges(ctx)
	if err != nil {
		return nil, err
	}
	add := func(feature string, ok bool, needs string) {
		c := DoctorCheck{Feature: feature, OK: ok || p.Superuser}
		if !c.OK {
			c.Needs = needs
		}
		out = append(out, c)
	}
	add("Terraform projects (a schema each)", p.CreateOnDatabase, "CREATE on database (GRANT CREATE ON DATABASE … TO "+p.Role+")")
	out = append(out, loginRolesCheck(ctx, d, p, schemaOK && werr == nil))
	add("force-unlock of pg clients' locks", p.SignalBackend, "membership in pg_signal_backend (GRANT pg_signal_backend TO "+p.Role+")")
	add("lock holders' user, address and application", p.ReadAllStats, "membership in pg_read_all_stats (GRANT pg_read_all_stats TO "+p.Role+")")
	citus, err := d.DetectCitus(ctx)
	if err != nil {
		return nil, err
	}
	if c := CitusCheck(citus); c != nil {
		out = append(out, *c)
	}
	return out, nil
}

// CitusCheck is the doctor line of a Citus cluster (nil on plain PostgreSQL, where nothing
// changes): the coordinator, the workers and Citus's version. Projects are distributed
// schemas only when the cluster has a worker to put them on.
func CitusCheck(c *db.Citus) *DoctorCheck {
	if c == nil {
		return nil
	}
	check := DoctorCheck{Feature: "Citus (Terraform projects as distributed schemas)", OK: len(c.Workers) > 0, Note: c.String()}
	if !check.OK {
		check.Needs = "a worker node (SELECT citus_add_node(host, port) on the coordinator); until then projects stay on the coordinator: " + c.String()
	}
	return &check
}

// loginRolesCheck runs what the credentials commands do to a login role — create it, give it
// a new password, drop it — on a throwaway role, rolled back: the CREATEROLE attribute alone
// said "works" where PostgreSQL 15 refused every rotation (issue 28), and PostgreSQL 16 adds
// rules of its own (ADMIN OPTION). What failed is named with PostgreSQL's own words.
func loginRolesCheck(ctx context.Context, d *db.DB, p db.Privileges, testable bool) DoctorCheck {
	c := DoctorCheck{Feature: "project and Salt credentials (login roles)", OK: true}
	if !testable {
		c.OK = false
		c.Needs = "the schema at this release's version and a writable database (to test creating, re-issuing and dropping a login role)"
		return c
	}
	err := d.CheckLoginRoles(ctx, "strata_doctor_"+db.RandomPassword()[:12])
	if err == nil {
		return c
	}
	c.OK = false
	c.Needs = err.Error()
	if !p.CreateRole && !p.Superuser {
		c.Needs = "the CREATEROLE attribute (ALTER ROLE " + p.Role + " CREATEROLE): " + c.Needs
	}
	return c
}

func needsText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// DoctorWarnings are the checks that failed, as sentences.
func DoctorWarnings(checks []DoctorCheck) []string {
	var out []string
	for _, c := range checks {
		if !c.OK {
			out = append(out, c.Feature+": needs "+c.Needs)
		}
	}
	return out
}

// doctorSchema is the first check: whether this release can serve the database's schema. A
// schema behind this release (a fresh database included) passes — serve applies the pending
// migrations at start, as strata migrate up does — with a note saying so; a newer schema
// passes when it declares this release compatible. A role that may not use strata's schema
// fails naming the grant it needs and the schema's owner, rather than PostgreSQL's bare
// "permission denied for schema". current says whether the schema is at (or, compatible,
// past) this release's version: what the checks that use strata's functions need.
func doctorSchema(ctx context.Context, d *db.DB) (c DoctorCheck, current bool, err error) {
	latest := migrations.Latest()
	c = DoctorCheck{Feature: "serve (schema " + fmt.Sprint(latest) + ")"}
	acc, err := d.SchemaAccess(ctx)
	if err != nil {
		return c, false, err
	}
	role := "this role"
	if p, err := d.RolePrivileges(ctx); err == nil {
		role = p.Role
		if p.Superuser {
			acc.Usage, acc.Create = true, true
		}
	}
	switch {
	case acc.Exists && !acc.Usage:
		c.Needs = fmt.Sprintf("access to schema %s, which belongs to role %s: run strata as %s (its tables are %s's too), or GRANT %s TO %s",
			d.Schema(), acc.Owner, acc.Owner, acc.Owner, acc.Owner, role)
		return c, false, nil
	case !acc.Exists:
		p, err := d.RolePrivileges(ctx)
		if err != nil {
			return c, false, err
		}
		if !p.CreateOnDatabase && !p.Superuser {
			c.Needs = fmt.Sprintf("schema %s does not exist and %s may not create it: CREATE on the database (GRANT CREATE ON DATABASE … TO %s), or create the schema owned by %s", d.Schema(), p.Role, p.Role, p.Role)
			return c, false, nil
		}
		c.OK = true
		c.Note = fmt.Sprintf("a new database: strata serve creates schema %s and applies the %d migrations at start (or strata migrate up)", d.Schema(), latest)
		return c, false, nil
	}
	st, err := d.CheckSchema(ctx, latest)
	if errors.Is(err, db.ErrPermission) {
		c.Needs = fmt.Sprintf("privileges on the tables of schema %s, which belong to role %s: run strata as %s, or GRANT %s TO %s", d.Schema(), acc.Owner, acc.Owner, acc.Owner, role)
		return c, false, nil
	}
	if err != nil {
		return c, false, err
	}
	switch {
	case !st.Compatible():
		c.Needs = fmt.Sprintf("a newer strata: the schema is at version %d and needs a release knowing at least %d (this one knows %d)", st.Current, st.Required, latest)
	case st.Current < latest:
		c.OK = true
		c.Note = fmt.Sprintf("the schema is at version %d: strata serve applies the %d pending migrations at start (or strata migrate up)", st.Current, latest-st.Current)
	default:
		c.OK = true
		c.Note = st.Warning()
		current = true
	}
	return c, current, nil
}

// DoctorKeys checks the keys: whether keys (what the replica would be started with) hold
// every key id the database's sealed values are recorded under (CheckKeys' comparison). A
// replica lacking one is not ready and refuses secrets.
func DoctorKeys(ctx context.Context, d *db.DB, keys *secret.Keyring) (DoctorCheck, error) {
	c := DoctorCheck{Feature: "encryption keys (secret pillars, encrypted projects)"}
	if v, err := d.SchemaVersion(ctx); err != nil {
		if errors.Is(err, db.ErrPermission) {
			c.Needs = "access to strata's schema (see the serve check)"
			return c, nil
		}
		return c, err
	} else if v < keyRefsVersion {
		c.OK = true
		c.Note = fmt.Sprintf("the schema (version %d) does not record the keys its values need yet; strata serve records them when it migrates", v)
		return c, nil
	}
	refs, err := keyref.Referenced(ctx, d)
	if errors.Is(err, db.ErrPermission) {
		c.Needs = "SELECT on " + d.Schema() + ".key_refs"
		return c, nil
	}
	if err != nil {
		return c, err
	}
	missing := keyref.Missing(refs, keys.IDs())
	switch {
	case len(missing) > 0:
		c.Needs = (&secret.MissingKeysError{IDs: missing}).Error()
	case len(refs) == 0:
		c.OK = true
		c.Note = "no value is sealed yet"
	default:
		c.OK = true
		c.Note = "every key the data references is held: " + strings.Join(refs, ", ")
	}
	return c, nil
}

// keyRefsVersion is the migration that records the keys sealed values reference (0031).
const keyRefsVersion = 31

// KeysForCheck loads the keys a replica started with cfg would hold, for strata doctor: the
// key files and commands given, else the embedded default's key file when it exists. It never
// creates a key. None: secret.NoKeys().
func KeysForCheck(ctx context.Context, cfg Config) (*secret.Keyring, error) {
	cfg.setDefaults()
	files := cfg.EncryptionKeyFiles
	if len(files) == 0 && len(cfg.EncryptionKeyCommands) == 0 && cfg.DatabaseURL == "" {
		path := filepath.Join(cfg.DataDir, secret.DefaultKeyFile)
		if _, err := os.Stat(path); err == nil {
			files = []string{path}
		}
	}
	keys, err := secret.LoadKeys(ctx, cfg.EncryptionKeyCommands, files)
	if err != nil {
		return nil, fmt.Errorf("encryption keys: %w", err)
	}
	if keys == nil {
		keys = secret.NoKeys()
	}
	return keys, nil
}

// OpenBeside opens cfg's database for a command that runs beside a server (strata doctor,
// strata backup create): with no --database-url, the embedded cluster a running strata serves
// from the data dir, through its socket, or — when none runs — the cluster started for the
// command (stopped after). It does not migrate.
func OpenBeside(ctx context.Context, cfg Config) (*Database, error) {
	cfg.setDefaults()
	if cfg.DatabaseURL == "" {
		if u := runningEmbeddedURL(cfg.DataDir); u != "" {
			cfg.DatabaseURL = u
		}
	}
	return OpenDatabase(ctx, cfg, nil)
}
