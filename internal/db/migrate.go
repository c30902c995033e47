package db

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migration is one embedded schema change.
type Migration struct {
	Version int64
	Name    string
	SQL     string
}

// AppliedMigration is a row of schema_migrations.
type AppliedMigration struct {
	Version   int64
	Name      string
	AppliedAt time.Time
}

// ErrSchemaTooNew is returned when the database was migrated by a newer strata.
var ErrSchemaTooNew = errors.New("database schema is newer than this strata")

var migrationFileRE = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.sql$`)

// Migrations returns the embedded migrations in version order. It fails on a gap or a
// duplicate version, so two branches adding the same number cannot both land.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, e := range entries {
		m := migrationFileRE.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration file %q: name must be NNNN_name.sql", e.Name())
		}
		v, _ := strconv.ParseInt(m[1], 10, 64)
		b, err := fs.ReadFile(migrationFS, "migrations/"+e.Name())
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: m[2], SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != int64(i+1) {
			return nil, fmt.Errorf("migration versions must be contiguous from 1: found %04d at position %d", m.Version, i+1)
		}
	}
	return ms, nil
}

// LatestVersion is the highest embedded migration version.
func LatestVersion() int64 {
	ms, err := Migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}

// MigrationsHash identifies the embedded migration set; tests name their template database
// after it so a changed migration builds a new template.
func MigrationsHash() string {
	ms, _ := Migrations()
	h := sha256.New()
	for _, m := range ms {
		fmt.Fprintf(h, "%d\x00%s\x00%s\x00", m.Version, m.Name, m.SQL)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// renderMigration substitutes the schema's quoted name and its advisory key.
func renderMigration(sql, schema string) string {
	r := strings.NewReplacer(
		"{{schema}}", pgx.Identifier{schema}.Sanitize(),
		"{{schema_key}}", strconv.FormatInt(int64(SchemaKey(schema)), 10),
		"{{rv_lock}}", strconv.FormatInt(int64(lockResourceVersion), 10),
	)
	return r.Replace(sql)
}

// Migrate applies every pending migration in one transaction, guarded by the
// transaction-scoped advisory lock (SchemaKey(schema), 1). Several strata processes starting
// at once on an empty database serialize on that lock: the first applies the batch, the
// others find nothing pending once it commits. A failed batch rolls back whole, leaving the
// previous schema in place. It returns the versions it applied.
func (d *DB) Migrate(ctx context.Context) ([]Migration, error) {
	ms, err := Migrations()
	if err != nil {
		return nil, err
	}
	var applied []Migration
	err = d.InTx(ctx, func(tx *Tx) error {
		if _, err := tx.tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, $2)", d.key, lockMigrations); err != nil {
			return interpretError(err)
		}
		ident := pgx.Identifier{d.schema}.Sanitize()
		// Argument-less Exec uses the simple protocol, so a file may hold many statements.
		if _, err := tx.tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+ident+";"+
			"CREATE TABLE IF NOT EXISTS "+ident+".schema_migrations ("+
			"version bigint PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"); err != nil {
			return interpretError(err)
		}
		current, err := currentVersion(ctx, tx.tx, ident)
		if err != nil {
			return err
		}
		latest := ms[len(ms)-1].Version
		if current > latest {
			return fmt.Errorf("%w: the database is at version %d, this strata knows versions up to %d; upgrade strata", ErrSchemaTooNew, current, latest)
		}
		for _, m := range ms {
			if m.Version <= current {
				continue
			}
			start := time.Now()
			if _, err := tx.tx.Exec(ctx, renderMigration(m.SQL, d.schema)); err != nil {
				return fmt.Errorf("apply migration %04d_%s: %w", m.Version, m.Name, interpretError(err))
			}
			if _, err := tx.tx.Exec(ctx, "INSERT INTO "+ident+".schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
				return interpretError(err)
			}
			d.logger.Info("applied migration", "version", m.Version, "name", m.Name, "duration", time.Since(start))
			applied = append(applied, m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return applied, nil
}

func currentVersion(ctx context.Context, c pgxQuerier, ident string) (int64, error) {
	var v int64
	if err := c.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+ident+".schema_migrations").Scan(&v); err != nil {
		return 0, interpretError(err)
	}
	return v, nil
}

// AppliedMigrations lists the rows of schema_migrations; an empty list when strata's schema
// does not exist yet.
func (d *DB) AppliedMigrations(ctx context.Context) ([]AppliedMigration, error) {
	var exists bool
	if err := d.pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", pgx.Identifier{d.schema}.Sanitize()+".schema_migrations").Scan(&exists); err != nil {
		return nil, interpretError(err)
	}
	if !exists {
		return nil, nil
	}
	rows, err := d.pool.Query(ctx, "SELECT version, name, applied_at FROM "+pgx.Identifier{d.schema}.Sanitize()+".schema_migrations ORDER BY version")
	if err != nil {
		return nil, interpretError(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AppliedMigration, error) {
		var a AppliedMigration
		err := r.Scan(&a.Version, &a.Name, &a.AppliedAt)
		return a, err
	})
	return out, interpretError(err)
}

// SchemaVersion is the highest applied migration version (0 before the first).
func (d *DB) SchemaVersion(ctx context.Context) (int64, error) {
	applied, err := d.AppliedMigrations(ctx)
	if err != nil || len(applied) == 0 {
		return 0, err
	}
	return applied[len(applied)-1].Version, nil
}
