package server

import (
	"context"
	"fmt"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/db/migrations"
)

// DoctorCheck is one feature and whether the database and strata's role can serve it.
type DoctorCheck struct {
	Feature string `json:"feature"`
	OK      bool   `json:"ok"`
	// Needs says what is missing (empty when OK).
	Needs string `json:"needs,omitempty"`
}

// Doctor checks, on the open database, what each of strata's features needs: the schema at
// this release's version, a database that accepts writes, and the role's privileges for the
// optional features. strata doctor prints it; serve logs what is missing at start and lists
// it among /readyz's warnings and in GET /v1/status, so a missing privilege is known before
// the first request that needs it.
func Doctor(ctx context.Context, d *db.DB) ([]DoctorCheck, error) {
	var out []DoctorCheck
	st, err := d.CheckSchema(ctx, migrations.Latest())
	if err != nil {
		return nil, err
	}
	schemaOK := st.Current >= migrations.Latest() && st.Compatible()
	schemaNeeds := ""
	if !schemaOK {
		schemaNeeds = fmt.Sprintf("the schema is at version %d; run strata migrate up (this release knows %d)", st.Current, migrations.Latest())
	}
	out = append(out, DoctorCheck{Feature: "serve (schema " + fmt.Sprint(migrations.Latest()) + ")", OK: schemaOK, Needs: schemaNeeds})
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
	return out, nil
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
