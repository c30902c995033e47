package server

import (
	"context"
	"fmt"
	"time"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/db/migrations"
)

// What the serve and migrate commands need of the database layer, so internal/cli reaches the
// database only through this package (the architecture test keeps it so).

// DefaultSchema is the schema of strata's tables unless --schema says otherwise.
const DefaultSchema = db.DefaultSchema

// DefaultMigrationLockTimeout bounds how long a migration statement waits for a table lock.
const DefaultMigrationLockTimeout = db.DefaultMigrationLockTimeout

// Redact hides the password of a database URL (or any URL) for logs and help texts.
func Redact(s string) string { return db.Redact(s) }

// SchemaVersion is the highest schema version this release knows (and migrates to).
func SchemaVersion() int64 { return migrations.Latest() }

// MigrateUp applies the pending migrations (lockTimeout: 0 the default, negative no limit)
// and returns the applied ones as "NNNN_name"; with none applied, note says why (the schema
// is current, or newer than this release but compatible).
func (d *Database) MigrateUp(ctx context.Context, lockTimeout time.Duration) (applied []string, note string, err error) {
	ms, err := d.DB.MigrateWith(ctx, db.MigrateOptions{LockTimeout: lockTimeout})
	if err != nil {
		return nil, "", err
	}
	for _, m := range ms {
		applied = append(applied, fmt.Sprintf("%04d_%s", m.Version, m.Name))
	}
	if len(ms) == 0 {
		st, err := d.DB.CheckSchema(ctx, migrations.Latest())
		if err != nil {
			return nil, "", err
		}
		if w := st.Warning(); w != "" {
			return nil, "nothing to apply: " + w, nil
		}
		return nil, "database schema is current", nil
	}
	return applied, "", nil
}

// MigrationRow is one migration as `strata migrate status` lists it.
type MigrationRow struct {
	Version         int64      `json:"version"`
	Name            string     `json:"name"`
	CompatibleSince int64      `json:"compatibleSince"`
	AppliedAt       *time.Time `json:"appliedAt,omitempty"`
	Status          string     `json:"status"`
}

// MigrationStatus lists the applied migrations and the pending ones this release embeds.
func (d *Database) MigrationStatus(ctx context.Context) ([]MigrationRow, error) {
	applied, err := d.DB.AppliedMigrations(ctx)
	if err != nil {
		return nil, err
	}
	known, err := migrations.Embedded()
	if err != nil {
		return nil, err
	}
	var rows []MigrationRow
	seen := map[int64]bool{}
	latest := known[len(known)-1].Version
	for _, a := range applied {
		at := a.AppliedAt.UTC()
		status := "applied"
		if a.Version > latest {
			status = "applied, newer than this strata"
		}
		rows = append(rows, MigrationRow{a.Version, a.Name, a.CompatibleSince, &at, status})
		seen[a.Version] = true
	}
	for _, m := range known {
		if !seen[m.Version] {
			rows = append(rows, MigrationRow{m.Version, m.Name, m.CompatibleSince, nil, "pending"})
		}
	}
	return rows, nil
}
