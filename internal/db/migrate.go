package db

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stratahq/strata/internal/db/migrations"
)

// Migration is one schema change of the set in internal/db/migrations.
type Migration = migrations.Migration

// AppliedMigration is a row of schema_migrations.
type AppliedMigration struct {
	Version   int64
	Name      string
	AppliedAt time.Time
	// CompatibleSince is the recorded compatible-since version; rows applied before it was
	// recorded count as their own version.
	CompatibleSince int64
}

// ErrSchemaTooNew is returned when the database was migrated by a newer strata whose schema
// this strata cannot run on.
var ErrSchemaTooNew = errors.New("database schema is newer than this strata")

// ErrMigrationLockTimeout is returned when a migration waited longer than its lock_timeout for
// a lock another session holds. The migration's transaction rolled back; retrying is safe.
var ErrMigrationLockTimeout = errors.New("migration waited too long for a lock")

// DefaultMigrationLockTimeout bounds how long a migration's statement waits for a table lock,
// so DDL never queues indefinitely behind a long reader (queued DDL blocks every later reader).
const DefaultMigrationLockTimeout = 5 * time.Second

// renderMigration substitutes the schema's quoted name and its advisory key.
func renderMigration(sql, schema string) string {
	r := strings.NewReplacer(
		"{{schema}}", pgx.Identifier{schema}.Sanitize(),
		"{{schema_key}}", strconv.FormatInt(int64(SchemaKey(schema)), 10),
		"{{rv_lock}}", strconv.FormatInt(int64(lockResourceVersion), 10),
	)
	return r.Replace(sql)
}

// MigrateOptions tunes Migrate.
type MigrateOptions struct {
	// LockTimeout bounds each statement's wait for a lock (default
	// DefaultMigrationLockTimeout); a negative value waits without limit.
	LockTimeout time.Duration
	// Migrations replaces the embedded set (tests); nil uses migrations.Embedded().
	Migrations []Migration
}

// SchemaStatus compares the database's schema with the one a strata binary knows.
type SchemaStatus struct {
	// Current is the highest applied version (0 before the first migration).
	Current int64
	// Known is the highest version the binary embeds.
	Known int64
	// Required is the lowest known version that can run on the database's schema: the
	// highest compatible-since over the applied migrations.
	Required int64
}

// Compatible reports whether the binary can run on the schema (once it is migrated up to
// the binary's version, when it is older).
func (s SchemaStatus) Compatible() bool { return s.Known >= s.Required }

// Warning describes a compatible schema that is newer than the binary ("" otherwise): a
// staged rollout in progress, which an operator should finish.
func (s SchemaStatus) Warning() string {
	if s.Current > s.Known && s.Compatible() {
		return fmt.Sprintf("schema is at %d, newer than this release's %d; compatible since %d", s.Current, s.Known, s.Required)
	}
	return ""
}

// Err is nil when the binary can serve on the schema: ErrSchemaTooNew naming the three
// versions when it cannot, and an error when migrations are still pending.
func (s SchemaStatus) Err() error {
	switch {
	case s.Current > s.Known && s.Known < s.Required:
		return fmt.Errorf("%w: the database is at version %d, this strata knows versions up to %d, and the schema needs at least %d (compatible since); upgrade strata",
			ErrSchemaTooNew, s.Current, s.Known, s.Required)
	case s.Current < s.Known:
		return fmt.Errorf("database schema is at version %d, this strata expects %d; run strata migrate up", s.Current, s.Known)
	}
	return nil
}

// CheckSchema compares the database's schema with a binary knowing versions up to known.
// Readiness uses it: compatible-newer is ready with Warning, anything else is Err.
func (d *DB) CheckSchema(ctx context.Context, known int64) (SchemaStatus, error) {
	st := SchemaStatus{Known: known}
	applied, err := d.AppliedMigrations(ctx)
	if err != nil {
		return st, err
	}
	for _, a := range applied {
		st.Current = max(st.Current, a.Version)
		st.Required = max(st.Required, a.CompatibleSince)
	}
	return st, nil
}

// Migrate applies every pending embedded migration with the default options.
func (d *DB) Migrate(ctx context.Context) ([]Migration, error) {
	return d.MigrateWith(ctx, MigrateOptions{})
}

// MigrateWith applies every pending migration. Consecutive transactional migrations run in
// one transaction, guarded by the transaction-scoped advisory lock (SchemaKey(schema), 1).
// Several strata processes starting at once on an empty database serialize on that lock:
// the first applies the batch, the others find nothing pending once it commits. A failed
// batch rolls back whole, leaving the previous schema in place. A no-transaction migration
// runs alone after the batch before it commits, on a dedicated connection holding the same
// key as a session lock, and is recorded only once it succeeded.
//
// On a schema newer than the set, it applies nothing: it returns nil when the schema's
// compatible-since allows this binary and ErrSchemaTooNew otherwise. It returns the versions
// it applied.
func (d *DB) MigrateWith(ctx context.Context, opts MigrateOptions) ([]Migration, error) {
	ms := opts.Migrations
	if ms == nil {
		var err error
		if ms, err = migrations.Embedded(); err != nil {
			return nil, err
		}
	}
	if len(ms) == 0 {
		return nil, errors.New("no migrations")
	}
	timeout := opts.LockTimeout
	if timeout == 0 {
		timeout = DefaultMigrationLockTimeout
	}
	var applied []Migration
	for {
		batch, next, err := d.migrateBatch(ctx, ms, timeout)
		applied = append(applied, batch...)
		if err != nil || next == nil {
			return applied, err
		}
		done, err := d.migrateAlone(ctx, *next, timeout)
		if err != nil {
			return applied, err
		}
		if done {
			applied = append(applied, *next)
		}
	}
}

// lockTimeoutSetting renders a timeout for set_config: whole milliseconds, 0 for none.
func lockTimeoutSetting(timeout time.Duration) string {
	if timeout < 0 {
		return "0"
	}
	return strconv.FormatInt(max(timeout.Milliseconds(), 1), 10)
}

// migrationError wraps a failed migration statement; a lock_timeout becomes
// ErrMigrationLockTimeout with advice.
func migrationError(m Migration, timeout time.Duration, err error) error {
	if isLockTimeout(err) {
		return fmt.Errorf("apply migration %04d_%s: %w", m.Version, m.Name, lockTimeoutError(timeout, err))
	}
	return fmt.Errorf("apply migration %04d_%s: %w", m.Version, m.Name, interpretError(err))
}

// isLockTimeout reports a statement cancelled by lock_timeout.
func isLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03" && !errors.Is(err, ErrMigrationLockTimeout) // lock_not_available
}

func lockTimeoutError(timeout time.Duration, err error) error {
	return fmt.Errorf("%w: it waited longer than the migration lock timeout (%s) for a lock held by another session, such as a long-running query or an idle open transaction on the same table; nothing was applied, retry once that session is done (or raise --migration-lock-timeout): %v",
		ErrMigrationLockTimeout, timeout, err)
}

// bootstrap creates the schema and schema_migrations, adding compatible_since to tables made
// before it existed. The ALTER runs only when the column is missing: even a no-op ALTER takes
// an exclusive lock that would queue behind every reader of the table.
func bootstrap(ctx context.Context, c pgxQuerier, ident string) error {
	// Nothing to create when the table exists: on Citus even CREATE SCHEMA IF NOT EXISTS on an
	// existing schema is propagated to every worker, so a replica could not start while one
	// worker is down, though only that worker's projects are unavailable.
	var exists bool
	if err := c.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", ident+".schema_migrations").Scan(&exists); err != nil {
		return interpretError(err)
	}
	if exists {
		return bootstrapColumn(ctx, c, ident)
	}
	// Argument-less Exec uses the simple protocol, so a string may hold many statements.
	// Schema-based sharding is off for this statement, so strata's own schema never becomes a
	// Citus tenant schema when a database enables it by default (its migrations then fail:
	// docs/scale-out.md); without Citus the setting is an inert placeholder.
	if _, err := c.Exec(ctx, "SET LOCAL citus.enable_schema_based_sharding = off;"+
		"CREATE SCHEMA IF NOT EXISTS "+ident+";"+
		"CREATE TABLE IF NOT EXISTS "+ident+".schema_migrations ("+
		"version bigint PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(), compatible_since bigint)"); err != nil {
		return interpretError(err)
	}
	return bootstrapColumn(ctx, c, ident)
}

// bootstrapColumn adds compatible_since to a schema_migrations made before it existed.
func bootstrapColumn(ctx context.Context, c pgxQuerier, ident string) error {
	var has bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'compatible_since' AND NOT attisdropped)",
		ident+".schema_migrations").Scan(&has); err != nil {
		return interpretError(err)
	}
	if !has {
		if _, err := c.Exec(ctx, "ALTER TABLE "+ident+".schema_migrations ADD COLUMN IF NOT EXISTS compatible_since bigint"); err != nil {
			return interpretError(err)
		}
	}
	return nil
}

// schemaStatus reads the current and required versions inside the migration lock.
func schemaStatus(ctx context.Context, c pgxQuerier, ident string, known int64) (SchemaStatus, error) {
	st := SchemaStatus{Known: known}
	err := c.QueryRow(ctx, "SELECT coalesce(max(version), 0), coalesce(max(coalesce(compatible_since, version)), 0) FROM "+ident+".schema_migrations").
		Scan(&st.Current, &st.Required)
	return st, interpretError(err)
}

// migrateBatch applies, in one transaction, the pending transactional migrations up to the
// first no-transaction one, which it returns as next.
func (d *DB) migrateBatch(ctx context.Context, ms []Migration, timeout time.Duration) (applied []Migration, next *Migration, err error) {
	ident := pgx.Identifier{d.schema}.Sanitize()
	known := ms[len(ms)-1].Version
	err = d.InTx(ctx, func(tx *Tx) error {
		applied, next = nil, nil
		if _, err := tx.tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, $2)", d.key, lockMigrations); err != nil {
			return interpretError(err)
		}
		// Set only now: waiting for another migrator's advisory lock is not DDL queueing.
		if _, err := tx.tx.Exec(ctx, "SELECT set_config('lock_timeout', $1, true)", lockTimeoutSetting(timeout)); err != nil {
			return interpretError(err)
		}
		if err := bootstrap(ctx, tx.tx, ident); err != nil {
			return err
		}
		st, err := schemaStatus(ctx, tx.tx, ident, known)
		if err != nil {
			return err
		}
		if st.Current > known {
			if err := st.Err(); err != nil {
				return err
			}
			d.logger.Warn("not migrating: "+st.Warning(), "current", st.Current, "known", known, "compatible_since", st.Required)
			return nil
		}
		for i, m := range ms {
			if m.Version <= st.Current {
				continue
			}
			if m.NoTransaction {
				next = &ms[i]
				return nil
			}
			start := time.Now()
			if _, err := tx.tx.Exec(ctx, renderMigration(m.SQL, d.schema)); err != nil {
				return migrationError(m, timeout, err)
			}
			if _, err := tx.tx.Exec(ctx, "INSERT INTO "+ident+".schema_migrations (version, name, compatible_since) VALUES ($1, $2, $3)", m.Version, m.Name, m.CompatibleSince); err != nil {
				return interpretError(err)
			}
			d.logger.Info("applied migration", "version", m.Version, "name", m.Name, "duration", time.Since(start))
			applied = append(applied, m)
		}
		return nil
	})
	if isLockTimeout(err) { // while bootstrapping schema_migrations or reading it
		err = lockTimeoutError(timeout, err)
	}
	if err != nil {
		return nil, nil, err
	}
	return applied, next, nil
}

// migrateAlone runs a no-transaction migration on a dedicated connection (never a pooled one:
// it holds a session advisory lock) that is closed afterwards, which also releases the lock
// should unlocking fail. It reports false when another migrator applied m first.
func (d *DB) migrateAlone(ctx context.Context, m Migration, timeout time.Duration) (bool, error) {
	ident := pgx.Identifier{d.schema}.Sanitize()
	conn, err := pgx.ConnectConfig(ctx, d.pool.Config().ConnConfig.Copy())
	if err != nil {
		return false, interpretError(err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1, $2)", d.key, lockMigrations); err != nil {
		return false, interpretError(err)
	}
	if _, err := conn.Exec(ctx, "SELECT set_config('lock_timeout', $1, false)", lockTimeoutSetting(timeout)); err != nil {
		return false, interpretError(err)
	}
	st, err := schemaStatus(ctx, conn, ident, m.Version)
	if isLockTimeout(err) {
		err = lockTimeoutError(timeout, err)
	}
	if err != nil {
		return false, err
	}
	if st.Current >= m.Version {
		return false, nil // applied by another migrator meanwhile
	}
	if st.Current != m.Version-1 {
		return false, fmt.Errorf("apply migration %04d_%s: the database is at version %d", m.Version, m.Name, st.Current)
	}
	start := time.Now()
	// One statement at a time, outside any transaction block: CREATE INDEX CONCURRENTLY
	// refuses to run inside one, and a multi-statement simple query is an implicit one.
	for _, stmt := range splitStatements(renderMigration(m.SQL, d.schema)) {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return false, migrationError(m, timeout, err)
		}
	}
	if _, err := conn.Exec(ctx, "INSERT INTO "+ident+".schema_migrations (version, name, compatible_since) VALUES ($1, $2, $3)", m.Version, m.Name, m.CompatibleSince); err != nil {
		return false, interpretError(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1, $2)", d.key, lockMigrations); err != nil {
		return true, interpretError(err)
	}
	d.logger.Info("applied migration", "version", m.Version, "name", m.Name, "duration", time.Since(start), "transaction", false)
	return true, nil
}

// splitStatements splits a no-transaction migration at semicolons outside quotes and
// comments. Dollar-quoted bodies are not understood: such a migration holds only plain
// statements (CREATE/DROP INDEX CONCURRENTLY and the like).
func splitStatements(sql string) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" && !onlyComments(s) {
			out = append(out, s)
		}
		cur.Reset()
	}
	inQuote, inIdent := false, false
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		switch {
		case inQuote:
			inQuote = c != '\''
		case inIdent:
			inIdent = c != '"'
		case c == '\'':
			inQuote = true
		case c == '"':
			inIdent = true
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			j := strings.IndexByte(sql[i:], '\n')
			if j < 0 {
				j = len(sql) - i
			}
			cur.WriteString(sql[i : i+j])
			i += j - 1
			continue
		case c == ';':
			flush()
			continue
		}
		cur.WriteByte(c)
	}
	flush()
	return out
}

func onlyComments(s string) bool {
	for _, line := range strings.Split(s, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "--") {
			return false
		}
	}
	return true
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
	// to_jsonb(m) reads compatible_since without failing on a table from before the column.
	rows, err := d.pool.Query(ctx, "SELECT version, name, applied_at, coalesce((to_jsonb(m)->>'compatible_since')::bigint, version) FROM "+
		pgx.Identifier{d.schema}.Sanitize()+".schema_migrations m ORDER BY version")
	if err != nil {
		return nil, interpretError(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AppliedMigration, error) {
		var a AppliedMigration
		err := r.Scan(&a.Version, &a.Name, &a.AppliedAt, &a.CompatibleSince)
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
