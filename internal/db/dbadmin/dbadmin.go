// Package dbadmin is server administration: creating, cloning, renaming and dropping
// databases, setting a role's password, and serializing such work across processes. These
// run on a single connection (never a pool) because CREATE/DROP/ALTER DATABASE cannot run
// inside a transaction block and each is a one-off. They exist for the embedded cluster
// (internal/pgembed) and the test helper (internal/pgtest); capability code never calls them,
// which is why they live apart from internal/db's pool, transactions and queries. Being
// under internal/db, this package may import pgx; errors go through db.Translate, the one
// seam that turns driver errors into strata's.
package dbadmin

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stratahq/strata/internal/db"
)

// adminTimeout bounds one administrative statement when ctx has no deadline of its own, so a
// wedged server fails a caller instead of hanging it.
const adminTimeout = 2 * time.Minute

// lockAdmin is the second int4 of the advisory key WithAdvisoryLock takes; see SchemaKey.
const lockAdmin int32 = 3

// validDatabaseName reports an error unless name is a plain lower-case identifier: the only
// database names strata creates, so that quoting never changes what a name means.
func validDatabaseName(name string) error {
	if err := db.ValidateSchemaName(name); err != nil {
		return fmt.Errorf("database name %q: %w", name, err)
	}
	return nil
}

// duplicateDatabase is interpretError that also counts "database already exists" as a
// conflict, as a unique violation would be.
func duplicateDatabase(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.DuplicateDatabase {
		return &db.Error{Kind: db.ErrConflict, Code: pgErr.Code, Err: err}
	}
	return db.Translate(err)
}

// withConn runs fn on a fresh single connection to url and closes it afterwards.
func withConn(ctx context.Context, url string, fn func(ctx context.Context, c *pgx.Conn) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, adminTimeout)
		defer cancel()
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("parse database URL: %w", err)
	}
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "strata-admin"
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect to database: %w", db.Translate(err))
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = c.Close(cctx)
	}()
	return fn(ctx, c)
}

// CreateDatabase creates database name as a copy of template with STRATEGY FILE_COPY, which
// copies the template's files directly instead of WAL-logging every block: about half the time
// of the default WAL_LOG for the small databases strata's tests clone. template may be ""
// for template1. The template must have no other connections while it is copied.
func CreateDatabase(ctx context.Context, adminURL, name, template string) error {
	if err := validDatabaseName(name); err != nil {
		return err
	}
	if template == "" {
		template = "template1"
	}
	if err := validDatabaseName(template); err != nil {
		return err
	}
	sql := "CREATE DATABASE " + db.QuoteIdent(name) + " TEMPLATE " + db.QuoteIdent(template) + " STRATEGY FILE_COPY"
	return withConn(ctx, adminURL, func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Exec(ctx, sql); err != nil {
			return fmt.Errorf("create database %s from %s: %w", name, template, duplicateDatabase(err))
		}
		return nil
	})
}

// DropDatabase drops database name if it exists, terminating its connections first
// (WITH (FORCE)), so a test that leaked a connection cannot keep its database alive.
func DropDatabase(ctx context.Context, adminURL, name string) error {
	if err := validDatabaseName(name); err != nil {
		return err
	}
	return withConn(ctx, adminURL, func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+db.QuoteIdent(name)+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop database %s: %w", name, db.Translate(err))
		}
		return nil
	})
}

// RenameDatabase renames database from to to. Nobody may be connected to from; PostgreSQL
// waits a few seconds for departing connections before it refuses.
func RenameDatabase(ctx context.Context, adminURL, from, to string) error {
	if err := validDatabaseName(from); err != nil {
		return err
	}
	if err := validDatabaseName(to); err != nil {
		return err
	}
	return withConn(ctx, adminURL, func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Exec(ctx, "ALTER DATABASE "+db.QuoteIdent(from)+" RENAME TO "+db.QuoteIdent(to)); err != nil {
			return fmt.Errorf("rename database %s to %s: %w", from, to, duplicateDatabase(err))
		}
		return nil
	})
}

// DatabaseExists reports whether a database called name exists on the server adminURL
// points to.
func DatabaseExists(ctx context.Context, adminURL, name string) (bool, error) {
	var exists bool
	err := withConn(ctx, adminURL, func(ctx context.Context, c *pgx.Conn) error {
		err := c.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).Scan(&exists)
		if err != nil {
			return fmt.Errorf("look up database %s: %w", name, db.Translate(err))
		}
		return nil
	})
	return exists, err
}

// SetRolePassword sets role's password (stored as PostgreSQL's password_encryption says,
// scram-sha-256 by default). PostgreSQL cannot bind parameters in ALTER ROLE, so the server
// itself quotes both the name and the password with format(%I, %L); nothing is spliced into
// SQL on this side.
func SetRolePassword(ctx context.Context, url, role, password string) error {
	if role == "" || password == "" {
		return errors.New("set role password: role and password must not be empty")
	}
	return withConn(ctx, url, func(ctx context.Context, c *pgx.Conn) error {
		var stmt string
		if err := c.QueryRow(ctx, "SELECT format('ALTER ROLE %I PASSWORD %L', $1::text, $2::text)", role, password).Scan(&stmt); err != nil {
			return fmt.Errorf("set password of role %s: %w", role, db.Translate(err))
		}
		if _, err := c.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("set password of role %s: %w", role, db.Translate(err))
		}
		return nil
	})
}

// WithAdvisoryLock runs fn while holding a transaction-scoped advisory lock named by name on
// the database url points to, so that processes sharing a server (parallel test binaries) do
// a one-time job, such as building a template database, exactly once: each re-checks inside fn
// whether the job is already done. The key is (db.SchemaKey(name), 3) in the two-int4 space, so it
// never collides with strata's own keys or with Terraform's single-bigint ones. The lock lives
// on its own connection, in a transaction that only commits after fn returns; fn is free to
// open connections of its own (CREATE DATABASE cannot run inside a transaction).
func WithAdvisoryLock(ctx context.Context, url, name string, fn func(ctx context.Context) error) error {
	return withConn(ctx, url, func(ctx context.Context, c *pgx.Conn) (err error) {
		tx, err := c.Begin(ctx)
		if err != nil {
			return fmt.Errorf("advisory lock %s: %w", name, db.Translate(err))
		}
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = tx.Rollback(rctx)
		}()
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, $2)", db.SchemaKey(name), lockAdmin); err != nil {
			return fmt.Errorf("advisory lock %s: %w", name, db.Translate(err))
		}
		return fn(ctx)
	})
}

// URLForDatabase returns connStr changed to connect to database dbname on the same server,
// as the same user, with every other setting kept. It accepts both forms libpq and pgx
// accept: a postgres:// (or postgresql://) URL and a key=value string.
func URLForDatabase(connStr, dbname string) (string, error) {
	if dbname == "" {
		return "", errors.New("database URL: empty database name")
	}
	if strings.HasPrefix(connStr, "postgres://") || strings.HasPrefix(connStr, "postgresql://") {
		u, err := url.Parse(connStr)
		if err != nil {
			return "", fmt.Errorf("parse database URL: %w", err)
		}
		u.Path = "/" + dbname
		u.RawPath = ""
		// A dbname query parameter would override the path.
		if q := u.Query(); q.Has("dbname") {
			q.Del("dbname")
			u.RawQuery = q.Encode()
		}
		return u.String(), nil
	}
	pairs, err := parseKeywordValue(connStr)
	if err != nil {
		return "", fmt.Errorf("parse database URL: %w", err)
	}
	var b strings.Builder
	replaced := false
	for _, p := range pairs {
		v := p[1]
		if p[0] == "dbname" {
			if replaced {
				continue
			}
			v, replaced = dbname, true
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(p[0] + "=" + quoteKeywordValue(v))
	}
	if !replaced {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("dbname=" + quoteKeywordValue(dbname))
	}
	return b.String(), nil
}

// quoteKeywordValue quotes a value for a key=value connection string: single quotes, with
// backslash and single quote escaped by a backslash (libpq's rules).
func quoteKeywordValue(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return "'" + r.Replace(v) + "'"
}

// parseKeywordValue splits a key=value connection string into its pairs, in order, following
// libpq's rules: whitespace around '=' is allowed, values may be single-quoted, and a
// backslash escapes the next character.
func parseKeywordValue(s string) ([][2]string, error) {
	var pairs [][2]string
	i := 0
	skipSpace := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
			i++
		}
	}
	for {
		skipSpace()
		if i >= len(s) {
			return pairs, nil
		}
		start := i
		for i < len(s) && s[i] != '=' && s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r' {
			i++
		}
		key := s[start:i]
		skipSpace()
		if i >= len(s) || s[i] != '=' || key == "" {
			return nil, fmt.Errorf("missing \"=\" after %q", key)
		}
		i++
		skipSpace()
		var v strings.Builder
		if i < len(s) && s[i] == '\'' {
			i++
			closed := false
			for i < len(s) {
				c := s[i]
				i++
				if c == '\\' && i < len(s) {
					v.WriteByte(s[i])
					i++
					continue
				}
				if c == '\'' {
					closed = true
					break
				}
				v.WriteByte(c)
			}
			if !closed {
				return nil, fmt.Errorf("unterminated quoted value for %q", key)
			}
		} else {
			for i < len(s) && s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r' {
				c := s[i]
				i++
				if c == '\\' && i < len(s) {
					c = s[i]
					i++
				}
				v.WriteByte(c)
			}
		}
		pairs = append(pairs, [2]string{key, v.String()})
	}
}

// CitusNode is a node of a Citus cluster as its coordinator's metadata names it.
type CitusNode struct {
	Host string
	Port int
}

// CitusWorkers lists the worker nodes registered in the Citus metadata of the database at url
// (the coordinator's), for test harnesses that make a database on every node. It fails when
// the citus extension is not there.
func CitusWorkers(ctx context.Context, url string) ([]CitusNode, error) {
	var out []CitusNode
	err := withConn(ctx, url, func(ctx context.Context, c *pgx.Conn) error {
		var ext string
		if err := c.QueryRow(ctx, "SELECT coalesce((SELECT extversion FROM pg_extension WHERE extname = 'citus'), '')").Scan(&ext); err != nil {
			return db.Translate(err)
		}
		if ext == "" {
			return errors.New("the citus extension is not installed in this database (CREATE EXTENSION citus; SELECT citus_add_node(host, port) per worker)")
		}
		rows, err := c.Query(ctx, "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid <> 0 AND isactive AND noderole = 'primary' ORDER BY nodeport")
		if err != nil {
			return db.Translate(err)
		}
		defer rows.Close()
		for rows.Next() {
			var n CitusNode
			if err := rows.Scan(&n.Host, &n.Port); err != nil {
				return err
			}
			out = append(out, n)
		}
		return rows.Err()
	})
	return out, err
}

// CitusSetUp makes the database at url a Citus coordinator with the given workers: the
// extension in it and in the same-named database of each worker (CREATE DATABASE is not
// propagated by Citus), the coordinator's own address, and each worker registered.
func CitusSetUp(ctx context.Context, url, coordHost string, coordPort int, workerURLs []string, workers []CitusNode) error {
	for _, w := range workerURLs {
		if err := withConn(ctx, w, func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS citus")
			return db.Translate(err)
		}); err != nil {
			return fmt.Errorf("worker %s: %w", w, err)
		}
	}
	return withConn(ctx, url, func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS citus"); err != nil {
			return db.Translate(err)
		}
		if _, err := c.Exec(ctx, "SELECT citus_set_coordinator_host($1, $2)", coordHost, coordPort); err != nil {
			return db.Translate(err)
		}
		for _, w := range workers {
			if _, err := c.Exec(ctx, "SELECT citus_add_node($1, $2)", w.Host, w.Port); err != nil {
				return fmt.Errorf("citus_add_node(%s, %d): %w", w.Host, w.Port, db.Translate(err))
			}
		}
		return nil
	})
}
