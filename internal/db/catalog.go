package db

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// Catalog reads for backup and restore (package server): which of some schemas exist, and how
// many tables some schemas hold. They read PostgreSQL's catalogs, which no capability owns.

const (
	schemasPresentSQL = `SELECT nspname FROM pg_namespace WHERE nspname = ANY($1::text[]) ORDER BY nspname`
	tableCountSQL     = `SELECT count(*) FROM pg_tables WHERE schemaname = ANY($1::text[])`
)

// SchemasPresent returns which of schemas exist in the database.
func (d *DB) SchemasPresent(ctx context.Context, schemas []string) ([]string, error) {
	rows, err := d.pool.Query(ctx, schemasPresentSQL, schemas)
	if err != nil {
		return nil, interpretError(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, interpretError(err)
		}
		out = append(out, s)
	}
	return out, interpretError(rows.Err())
}

// BackupScope returns the Terraform project schemas strata manages (their states are part of
// a backup) and how many tables the backup dumps.
func (d *DB) BackupScope(ctx context.Context) (projects []string, tables int, err error) {
	rows, err := d.pool.Query(ctx, "SELECT name FROM "+pgx.Identifier{d.schema}.Sanitize()+".tf_projects ORDER BY name")
	if err != nil {
		return nil, 0, interpretError(err)
	}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			rows.Close()
			return nil, 0, interpretError(err)
		}
		projects = append(projects, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, interpretError(err)
	}
	err = d.pool.QueryRow(ctx, tableCountSQL, append([]string{d.schema}, projects...)).Scan(&tables)
	return projects, tables, interpretError(err)
}

// schemaAccessSQL reads, from catalogs any role may read, whether strata's schema exists,
// who owns it, and whether the connected role may use it and create in it.
const schemaAccessSQL = `SELECT pg_get_userbyid(n.nspowner), has_schema_privilege(n.oid, 'USAGE'), has_schema_privilege(n.oid, 'CREATE')
	FROM pg_namespace n WHERE n.nspname = $1`

// SchemaAccess is what the connected role may do in strata's schema.
type SchemaAccess struct {
	Exists        bool
	Owner         string
	Usage, Create bool
}

// SchemaAccess reads the connected role's access to strata's schema, so strata doctor can say
// what a role without it needs instead of PostgreSQL's bare "permission denied for schema".
func (d *DB) SchemaAccess(ctx context.Context) (SchemaAccess, error) {
	var a SchemaAccess
	err := d.pool.QueryRow(ctx, schemaAccessSQL, d.schema).Scan(&a.Owner, &a.Usage, &a.Create)
	if errors.Is(err, pgx.ErrNoRows) {
		return a, nil
	}
	if err != nil {
		return a, interpretError(err)
	}
	a.Exists = true
	return a, nil
}
