// Package db is strata's one seam to PostgreSQL: the only package that imports pgx.
//
// It owns the connection pool, the transaction helper, the embedded schema migrations, and
// the translation of driver errors into strata's own error categories (ErrNotFound,
// ErrConflict, …), so that the capability packages above it never see an SQLSTATE. Capability
// packages keep their SQL in .sql files next to their code, parsed with ParseQueries; every
// statement is sent with bound parameters. The only text substituted into SQL is an
// identifier (strata's schema, a Terraform project's schema), always quoted by
// pgx.Identifier, because PostgreSQL cannot bind identifiers.
package db

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"regexp"
	"slices"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultSchema is the PostgreSQL schema that holds strata's own tables unless configured
// otherwise.
const DefaultSchema = "strata"

// identRE is what strata accepts as its schema name: a plain lower-case PostgreSQL
// identifier, so that quoting never changes its meaning.
var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ValidateSchemaName checks a name for strata's schema.
func ValidateSchemaName(schema string) error {
	if !identRE.MatchString(schema) {
		return fmt.Errorf("schema name %q: must be a lower-case identifier matching %s", schema, identRE)
	}
	return nil
}

// Options configure Open. The zero value of every field but URL is usable.
type Options struct {
	// URL is a PostgreSQL connection string (URL or key=value form). Pool settings such as
	// pool_max_conns may be given in it.
	URL string
	// Schema holds strata's tables; DefaultSchema when empty.
	Schema string
	// Logger receives slow-query and lifecycle messages; slog.Default() when nil.
	Logger *slog.Logger
	// Tracer, when set, observes every query (metrics); see QueryObserver.
	Observer QueryObserver
	// MaxConns overrides the pool size when the URL does not set pool_max_conns.
	MaxConns int32
}

// QueryObserver is told the name and outcome of every query, for metrics. Name is taken from
// the query's "-- name: X" header, or "other".
type QueryObserver interface {
	ObserveQuery(name string, code string, d time.Duration)
}

// DB is a pool of connections to one database, bound to strata's schema.
type DB struct {
	pool   *pgxpool.Pool
	schema string
	key    int32
	logger *slog.Logger
	url    string
	// keepsPlans is KeepsPlans, read from the configuration once (pool.Config copies it).
	keepsPlans bool
	// announcer sends the announcements of transactions that deferred their notifications.
	announcer announcer
}

// epochUnchecked marks a pooled connection (pgconn's CustomData) whose history epoch check
// could not run when it connected: the function was not there yet (a database being
// migrated), or the server was a standby (the check returns NULL) or read-only, where no
// version can be drawn. Such a connection is checked again each time it is acquired, until a
// check runs.
//
// It was once checked only when it connected: a new database's first connections predate its
// migrations, and they could serve every write that followed, so the primary never recorded
// its epoch; a promoted standby then took its own epoch for the database's first one and drew
// the lost history's versions again (TestAsyncFailoverCannotForkHistory failed so under load;
// TestEpochCheckedOnceTheFunctionExists is the deterministic case). What is left: a
// connection to a standby whose check ran just before a promotion and whose transaction
// begins just after it, in the same acquisition, draws a version before any check of the new
// epoch — unless another connection checked first. A pool whose URL says
// target_session_attrs=read-write (docs/operations.md) never connects to a standby at all.
const epochUnchecked = "strata.epochUnchecked"

// epochCheck runs the history epoch check on conn and records whether it ran. The
// node_pillars login role may not run it at all (it draws no versions), which counts as run.
func epochCheck(ctx context.Context, conn *pgx.Conn, epochSQL, schema string) error {
	data := conn.PgConn().CustomData()
	var ep *string
	err := conn.QueryRow(ctx, epochSQL, schema).Scan(&ep)
	var pgErr *pgconn.PgError
	switch {
	case err == nil && ep != nil, errors.As(err, &pgErr) && pgErr.Code == pgerrcode.InsufficientPrivilege:
		delete(data, epochUnchecked)
		return nil
	case err == nil, epochCheckAbsent(err):
		data[epochUnchecked] = true
		return nil
	}
	return interpretError(err)
}

// Open connects a pool and checks that the server answers. It does not migrate.
func Open(ctx context.Context, opts Options) (*DB, error) {
	schema := opts.Schema
	if schema == "" {
		schema = DefaultSchema
	}
	if err := ValidateSchemaName(schema); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	if opts.MaxConns > 0 && !hasPoolMaxConns(opts.URL) {
		cfg.MaxConns = opts.MaxConns
	}
	// Parallel query off: strata's queries are short index walks with a LIMIT, for which
	// parallel workers on a busy machine made label-selector lists 5-6 times slower in
	// measurements (docs/benchmarks.md); an operator can still turn it on in the URL.
	if _, set := cfg.ConnConfig.RuntimeParams["max_parallel_workers_per_gather"]; !set {
		cfg.ConnConfig.RuntimeParams["max_parallel_workers_per_gather"] = "0"
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "strata"
	}
	// The tracer is always there: it also counts round trips for a context that asks
	// (CountRoundTrips), which costs one context lookup per statement.
	cfg.ConnConfig.Tracer = &tracer{obs: opts.Observer}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	// Every connection checks the database's history epoch before it is used (migration
	// 0024): the first one on a promoted standby, a recovered or a restored cluster moves
	// the versions past anything the lost history can have handed out, before any write.
	// A connection whose check could not run is checked again each time it is acquired
	// (epochCheck).
	epochSQL := "SELECT " + pgx.Identifier{schema}.Sanitize() + ".history_epoch_check($1)"
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		return epochCheck(ctx, conn, epochSQL, schema)
	}
	cfg.PrepareConn = func(ctx context.Context, conn *pgx.Conn) (bool, error) {
		if _, unchecked := conn.PgConn().CustomData()[epochUnchecked]; !unchecked {
			return true, nil
		}
		if err := epochCheck(ctx, conn, epochSQL, schema); err != nil {
			return false, nil // a new connection instead, whose own check reports the error
		}
		return true, nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, interpretError(err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database: %w", interpretError(err))
	}
	return &DB{pool: pool, schema: schema, key: SchemaKey(schema), logger: logger, url: opts.URL,
		keepsPlans: cfg.ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement}, nil
}

func hasPoolMaxConns(url string) bool {
	return regexp.MustCompile(`pool_max_conns=`).MatchString(url)
}

// KeepsPlans reports whether the pool sends statements prepared under a name, which
// PostgreSQL plans once per connection and then keeps (pgx's default query mode,
// cache_statement). In the modes a transaction-mode pooler needs (exec, simple_protocol,
// cache_describe) each statement is planned again on every execution, and a statement that
// is costly to plan is better sent as a call of a PL/pgSQL function, whose plans the server
// keeps in every mode.
func (d *DB) KeepsPlans() bool { return d.keepsPlans }

// Close closes every connection of the pool.
func (d *DB) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	d.FlushAnnouncements(ctx)
	cancel()
	d.pool.Close()
}

// Schema is the schema that holds strata's tables.
func (d *DB) Schema() string { return d.schema }

// URL is the connection string the pool was opened with (it may hold a password: never log it).
func (d *DB) URL() string { return d.url }

// Ping checks that the database answers.
func (d *DB) Ping(ctx context.Context) error { return interpretError(d.pool.Ping(ctx)) }

// ProbeWrite writes one row (health_probe, the replica's), to learn whether writes succeed:
// after a disk-full error, nothing else tells when space is back.
func (d *DB) ProbeWrite(ctx context.Context, replica string) error {
	_, err := d.Exec(ctx, &Query{Name: "HealthProbe", Text: `INSERT INTO {{schema}}.health_probe (replica) VALUES ($1)
		ON CONFLICT (replica) DO UPDATE SET at = now()`}, replica)
	if err == nil {
		lastDiskFull.Store(0)
	}
	return err
}

// Privileges are what strata's database role may do beyond its own objects.
type Privileges struct {
	Role                 string
	Superuser            bool
	CreateOnDatabase     bool // CREATE on the database: new schemas (Terraform projects)
	CreateRole           bool // CREATEROLE: project and Salt login roles
	SignalBackend        bool // pg_signal_backend: force-unlock a pg client's lock
	ReadAllStats         bool // pg_read_all_stats: other roles' sessions (lock holders' details)
	CreateOnPublicSchema bool // CREATE on schema public: the pg backend's shared sequence
}

// RolePrivileges reads the connected role's privileges.
func (d *DB) RolePrivileges(ctx context.Context) (Privileges, error) {
	var p Privileges
	err := d.pool.QueryRow(ctx, `SELECT r.rolname, r.rolsuper, has_database_privilege(current_database(), 'CREATE'),
		r.rolcreaterole, pg_has_role('pg_signal_backend', 'MEMBER'), pg_has_role('pg_read_all_stats', 'MEMBER'),
		coalesce(has_schema_privilege('public', 'CREATE'), false)
		FROM pg_roles r WHERE r.rolname = current_user`).Scan(&p.Role, &p.Superuser, &p.CreateOnDatabase, &p.CreateRole, &p.SignalBackend, &p.ReadAllStats, &p.CreateOnPublicSchema)
	return p, interpretError(err)
}

// CheckWritable reports, as an ErrReadOnly error, a database that would refuse writes: a hot
// standby (pg_is_in_recovery) or one whose sessions start read-only
// (default_transaction_read_only, as an operator sets it during maintenance). Two settings
// read on a pooled connection, no write.
func (d *DB) CheckWritable(ctx context.Context) error {
	var readOnly, recovery bool
	err := d.pool.QueryRow(ctx, "SELECT current_setting('transaction_read_only')::boolean, pg_is_in_recovery()").Scan(&readOnly, &recovery)
	if err != nil {
		return interpretError(err)
	}
	switch {
	case recovery:
		return &Error{Kind: ErrReadOnly, Err: errors.New("the database is a standby (in recovery)")}
	case readOnly:
		return &Error{Kind: ErrReadOnly, Err: errors.New("the database's transactions are read-only (default_transaction_read_only)")}
	}
	return nil
}

// PoolStats reports the pool's connection counts, for metrics.
func (d *DB) PoolStats() PoolStats {
	s := d.pool.Stat()
	return PoolStats{
		Total: s.TotalConns(), Idle: s.IdleConns(), Acquired: s.AcquiredConns(), Max: s.MaxConns(),
		AcquireCount: s.AcquireCount(), AcquireDuration: s.AcquireDuration(),
		EmptyAcquireCount: s.EmptyAcquireCount(),
	}
}

// PoolStats is a snapshot of the pool's counters.
type PoolStats struct {
	Total, Idle, Acquired, Max int32
	AcquireCount               int64
	AcquireDuration            time.Duration
	EmptyAcquireCount          int64
}

// SchemaKey derives the first int4 of strata's two-int4 advisory keys from the schema name
// (FNV-1a, 32 bits). Two strata installations in two schemas of one database therefore take
// different keys and never block each other; and because the two-int4 key space
// (pg_advisory_xact_lock(int4, int4)) is disjoint from the single-bigint space, these keys
// cannot collide with the ones Terraform's and OpenTofu's pg backend take.
func SchemaKey(schema string) int32 {
	h := fnv.New32a()
	h.Write([]byte(schema))
	return int32(h.Sum32())
}

// The second int4 of strata's advisory keys says what the lock protects.
const (
	lockMigrations      int32 = 1
	lockResourceVersion int32 = 2
)

// Querier runs queries; both *DB and *Tx implement it, so capability code is written once
// for either.
type Querier interface {
	Exec(ctx context.Context, q *Query, args ...any) (int64, error)
	Query(ctx context.Context, q *Query, args ...any) (Rows, error)
	QueryRow(ctx context.Context, q *Query, args ...any) Row
}

// Row is one result row; Scan returns ErrNotFound when there was none.
type Row interface {
	Scan(dest ...any) error
}

// Rows iterates a result set. Always Close it (Next returning false closes it too).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

type pgxQuerier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Bytes is a bytea parameter. Every other []byte argument is sent as text (JSON documents,
// mostly), which PostgreSQL reads for jsonb and text parameters in every query mode: with
// named prepared statements the server says a parameter is jsonb and pgx sends []byte as
// its text, but in the modes a transaction-mode pooler needs (pgx's exec and simple_protocol,
// where the type of a parameter comes from its Go type) a []byte would go as bytea and
// `$1::jsonb` would fail on its hex form. So bytea is the marked case, not JSON.
type Bytes []byte

// params prepares arguments for pgx: []byte as text, Bytes as bytea.
func params(args []any) []any {
	var out []any
	for i, a := range args {
		var v any
		switch b := a.(type) {
		case []byte:
			if b == nil {
				v = nil
			} else {
				v = string(b)
			}
		case Bytes:
			v = []byte(b)
		default:
			if out != nil {
				out[i] = a
			}
			continue
		}
		if out == nil {
			out = slices.Clone(args)
		}
		out[i] = v
	}
	if out == nil {
		return args
	}
	return out
}

func exec(ctx context.Context, c pgxQuerier, schema string, q *Query, args []any) (int64, error) {
	tag, err := c.Exec(ctx, q.render(schema), params(args)...)
	if err != nil {
		return 0, interpretError(err)
	}
	return tag.RowsAffected(), nil
}

func query(ctx context.Context, c pgxQuerier, schema string, q *Query, args []any) (Rows, error) {
	rows, err := c.Query(ctx, q.render(schema), params(args)...)
	if err != nil {
		return nil, interpretError(err)
	}
	return &rowsWrap{rows}, nil
}

func queryRow(ctx context.Context, c pgxQuerier, schema string, q *Query, args []any) Row {
	return rowWrap{c.QueryRow(ctx, q.render(schema), params(args)...)}
}

type rowWrap struct{ r pgx.Row }

func (r rowWrap) Scan(dest ...any) error { return interpretError(r.r.Scan(dest...)) }

type rowsWrap struct{ r pgx.Rows }

func (r *rowsWrap) Next() bool             { return r.r.Next() }
func (r *rowsWrap) Scan(dest ...any) error { return interpretError(r.r.Scan(dest...)) }
func (r *rowsWrap) Err() error             { return interpretError(r.r.Err()) }
func (r *rowsWrap) Close()                 { r.r.Close() }

// Exec runs a statement and reports the number of rows it affected.
func (d *DB) Exec(ctx context.Context, q *Query, args ...any) (int64, error) {
	return exec(ctx, d.pool, d.schema, q, args)
}

// Query runs a query returning rows.
func (d *DB) Query(ctx context.Context, q *Query, args ...any) (Rows, error) {
	return query(ctx, d.pool, d.schema, q, args)
}

// QueryRow runs a query returning at most one row.
func (d *DB) QueryRow(ctx context.Context, q *Query, args ...any) Row {
	return queryRow(ctx, d.pool, d.schema, q, args)
}

// Tx is a transaction; it is only valid inside the function given to InTx.
type Tx struct {
	tx     txConn
	schema string
	key    int32
	db     *DB
	memo   map[any]any
	// beforeCommit runs, in order, when the transaction's function has returned nil.
	beforeCommit []func(context.Context) error
	// announce holds what is announced after COMMIT, by channel (DeferNotifications, Announce).
	announce map[string]map[string]bool
	// owned is set for a transaction InTx opened (its function's return commits it); joined
	// counts the functions running in it that joined it (WithTx) instead.
	owned  bool
	joined int
	// atCommit holds the steps SendWithCommit left for the COMMIT's round trip.
	atCommit []Step
}

// Owned reports whether the function running in t is the one whose return commits it: false
// in a function that joined an outer transaction (WithTx) and in a ReadTx, which is never
// committed. SendWithCommit holds steps only in an owned transaction.
func (t *Tx) Owned() bool { return t.owned && t.joined == 0 }

// Sent reports whether t has sent anything to the server yet: false for a transaction InTx
// opened whose statements so far are all held for its COMMIT (SendWithCommit), so that the
// first of them will be its first statement.
func (t *Tx) Sent() bool {
	if l, ok := t.tx.(*lazyTx); ok {
		return l.begun
	}
	return true
}

// Holding reports whether steps SendWithCommit held are still waiting to go out; their
// Scans have run once it is false.
func (t *Tx) Holding() bool { return len(t.atCommit) > 0 }

// SendWithCommit holds steps to go out in the round trip of the transaction's COMMIT, in
// front of it, so that a write whose results nobody needs before the transaction ends costs
// no round trip of its own (a label PATCH: the lock and read, then the write, its stamp and
// COMMIT; docs/benchmarks.md). A statement the transaction sends before its COMMIT takes the
// held steps in front of itself instead (in its own round trip when it is a Pipeline), so
// they always run in the order they were given. Their Scans run when their results arrive.
// An error among them fails whatever carried them; at COMMIT the transaction then rolls back,
// and a connection lost in that round trip leaves the outcome unknown, as for any COMMIT.
//
// A step held for COMMIT cannot be retried inside the transaction: a statement that must not
// commit when it finds nothing to do (a stamp whose version was taken) has to fail instead,
// and the caller retries the whole transaction.
//
// When the transaction is not the caller's to commit (Owned is false) it sends steps at
// once, as Pipeline does, and returns their error.
func (t *Tx) SendWithCommit(ctx context.Context, steps ...Step) error {
	if !t.Owned() {
		return t.Pipeline(ctx, steps...)
	}
	t.atCommit = append(t.atCommit, steps...)
	return nil
}

// sendHeld sends the steps SendWithCommit holds, ahead of a statement that is about to go
// out on its own.
func (t *Tx) sendHeld(ctx context.Context) error {
	if len(t.atCommit) == 0 {
		return nil
	}
	held := t.atCommit
	t.atCommit = nil
	return sendPipeline(ctx, t.tx, t.schema, held)
}

// BeforeCommit registers fn to run in the transaction after its function has returned nil,
// just before COMMIT (an error from fn rolls the transaction back and is returned). It is for
// work a transaction must do once however many of its steps asked for it: a bulk batch that
// changed a group's memberships in many lines stamps the group once, at its end, when it
// takes the group's lock in a fixed order. Functions registered by fn run too.
func (t *Tx) BeforeCommit(fn func(context.Context) error) {
	t.beforeCommit = append(t.beforeCommit, fn)
}

// Memo returns what compute returned for key earlier in this transaction, or runs it and
// keeps the result until the transaction ends (errors are not kept). It is for facts that a
// lock the transaction holds keeps true to its end: a batch of writes of one kind takes the
// kind's key and reads its revision once, not once per object.
func (t *Tx) Memo(key any, compute func() (any, error)) (any, error) {
	if v, ok := t.memo[key]; ok {
		return v, nil
	}
	v, err := compute()
	if err != nil {
		return nil, err
	}
	if t.memo == nil {
		t.memo = map[any]any{}
	}
	t.memo[key] = v
	return v, nil
}

// Recall returns what Memo keeps for key, if anything, without computing it: for a caller
// that would send the statements computing it in a pipeline of its own (kind.HoldSteps).
func (t *Tx) Recall(key any) (any, bool) {
	v, ok := t.memo[key]
	return v, ok
}

type txSlot struct{}

// WithoutTx returns ctx without a transaction to join: InTx made with it opens its own, for
// work that must commit on its own whatever the caller is in the middle of.
func WithoutTx(ctx context.Context) context.Context {
	return context.WithValue(ctx, txSlot{}, (*Tx)(nil))
}

// WithTx returns ctx carrying tx: InTx calls of tx's DB made with it join tx.
func WithTx(ctx context.Context, tx *Tx) context.Context {
	return context.WithValue(ctx, txSlot{}, tx)
}

// Schema is the schema that holds strata's tables.
func (t *Tx) Schema() string { return t.schema }

// Exec runs a statement in the transaction.
func (t *Tx) Exec(ctx context.Context, q *Query, args ...any) (int64, error) {
	if err := t.sendHeld(ctx); err != nil {
		return 0, err
	}
	return exec(ctx, t.tx, t.schema, q, args)
}

// Query runs a query in the transaction.
func (t *Tx) Query(ctx context.Context, q *Query, args ...any) (Rows, error) {
	if err := t.sendHeld(ctx); err != nil {
		return nil, err
	}
	return query(ctx, t.tx, t.schema, q, args)
}

// QueryRow runs a single-row query in the transaction.
func (t *Tx) QueryRow(ctx context.Context, q *Query, args ...any) Row {
	if err := t.sendHeld(ctx); err != nil {
		return errRow{err}
	}
	return queryRow(ctx, t.tx, t.schema, q, args)
}

// InTx runs fn in a transaction, committing when fn returns nil and rolling back otherwise.
// The rollback runs even when ctx is cancelled, so a cancelled request never leaves a
// transaction open on a pooled connection.
//
// When ctx carries a transaction of d (WithTx), fn joins it instead: what it does commits or
// rolls back with the outer transaction. That lets one operation made of several services'
// writes (an import of many pillars, groups and nodes) be one transaction without those
// services knowing about each other.
func (d *DB) InTx(ctx context.Context, fn func(tx *Tx) error) (err error) {
	return d.inTx(ctx, fn, commitError)
}

// LockingReadTx runs fn, which only reads, in a transaction like InTx's: READ COMMITTED and
// read-write, so that fn may lock what it reads (a pillar read takes its target FOR SHARE,
// which ReadTx's READ ONLY mode refuses) and see it stay put until the read ends. A
// connection lost at its COMMIT is a plain unavailable error, without InTx's "outcome
// unknown": a read has no outcome to be unknown, and the locks it took end with its
// session either way. fn must not write — a write would be reported failed when it might
// have committed; writes go through InTx.
//
// When ctx carries a transaction of d (WithTx), fn joins it, as in InTx.
func (d *DB) LockingReadTx(ctx context.Context, fn func(tx *Tx) error) error {
	return d.inTx(ctx, fn, interpretError)
}

// inTx is InTx and LockingReadTx; atCommit interprets the COMMIT's error.
func (d *DB) inTx(ctx context.Context, fn func(tx *Tx) error, atCommit func(error) error) (err error) {
	if outer, ok := ctx.Value(txSlot{}).(*Tx); ok && outer != nil && outer.db == d {
		return outer.join(fn)
	}
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return interpretError(err)
	}
	// Released last, after the rollback: the pool closes a connection that comes back
	// with a transaction still open (a rollback that failed).
	defer conn.Release()
	ltx := &lazyTx{conn: conn}
	rollback := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		ltx.rollback(rctx)
	}
	defer func() {
		if p := recover(); p != nil {
			rollback() // never return a connection to the pool with a transaction open
			panic(p)
		}
		if err != nil {
			rollback()
		}
	}()
	tx := &Tx{tx: ltx, schema: d.schema, key: d.key, db: d, owned: true}
	if err := fn(tx); err != nil {
		return err
	}
	for i := 0; i < len(tx.beforeCommit); i++ {
		if err := tx.beforeCommit[i](ctx); err != nil {
			return err
		}
	}
	err = atCommit(ltx.commit(ctx, tx.batch(tx.atCommit)))
	tx.atCommit = nil
	if len(tx.announce) > 0 && ltx.begun && ctx.Value(withoutAnnouncement{}) == nil {
		// Also after a failed COMMIT: its outcome may be unknown, and a wake-up too many
		// costs a poll.
		d.announce(tx.announce)
	}
	return err
}

// ReadTx runs fn in a REPEATABLE READ READ ONLY transaction: every statement fn runs sees
// one snapshot of the database. Lists use it to read their items and their resourceVersion
// from the same snapshot, which READ COMMITTED (a fresh snapshot per statement) cannot give.
// It never waits for writers and is always rolled back (there is nothing to commit).
//
// When ctx carries a transaction of d (WithTx), fn joins it, as in InTx, so a read inside a
// larger operation sees that operation's own writes.
func (d *DB) ReadTx(ctx context.Context, fn func(tx *Tx) error) error {
	if outer, ok := ctx.Value(txSlot{}).(*Tx); ok && outer != nil && outer.db == d {
		return outer.join(fn)
	}
	ptx, err := d.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return interpretError(err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = ptx.Rollback(rctx) // also when fn panics: never pool a connection mid-transaction
	}()
	return fn(&Tx{tx: ptx, schema: d.schema, key: d.key, db: d})
}

// errorsIsAny reports whether err matches any of targets.
func errorsIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// Step is one statement of a Pipeline. Scan, when set, reads the statement's single row;
// without it the statement is executed for its effect.
type Step struct {
	Query *Query
	Args  []any
	Scan  func(Row) error
}

// Pipeline sends steps in one round trip outside any transaction of the caller (PostgreSQL
// runs them as one implicit transaction, in order); see Tx.Pipeline. It is for work that
// needs no transaction of its own but several statements; since PostgreSQL commits them at
// the end, a connection lost before the answer leaves the outcome unknown. Steps that only
// read (a check and a read) go through ReadPipeline, whose lost connection is a plain 503.
func (d *DB) Pipeline(ctx context.Context, steps ...Step) error {
	err := sendPipeline(ctx, d.pool, d.schema, steps)
	if err != nil {
		// PostgreSQL commits the implicit transaction of a pipeline at its end: a connection
		// lost meanwhile leaves a write in it applied or not.
		var e *Error
		if errors.As(err, &e) && e.Kind == ErrUnavailable && (e.Code == "" || sessionEndedAtCommit(e.Code)) {
			e.OutcomeUnknown = true
		}
	}
	return err
}

// ReadPipeline is Pipeline for steps that only read: a connection lost before its answer
// is a plain unavailable error, without "outcome unknown", since nothing it did can have
// been applied (Terraform's state GET reads this way). Steps that write go through Pipeline.
func (d *DB) ReadPipeline(ctx context.Context, steps ...Step) error {
	return sendPipeline(ctx, d.pool, d.schema, steps)
}

// Pipeline sends steps in one round trip and PostgreSQL runs them in order, each as its own
// statement (with its own snapshot, as if sent one by one). It is for statements that do not
// need each other's results: a write that is several statements costs one round trip instead
// of one per statement. The first error stops the pipeline and is returned.
func (t *Tx) Pipeline(ctx context.Context, steps ...Step) error {
	if len(t.atCommit) > 0 {
		steps = append(t.atCommit, steps...)
		t.atCommit = nil
	}
	return sendPipeline(ctx, t.tx, t.schema, steps)
}

// batchSender is what sends a pgx batch: a pool or a transaction.
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

func sendPipeline(ctx context.Context, to batchSender, schema string, steps []Step) error {
	return interpretError(to.SendBatch(ctx, batchOf(schema, steps)).Close())
}

// batch is steps as a pgx batch in t's schema (nil for none).
func (t *Tx) batch(steps []Step) *pgx.Batch {
	if len(steps) == 0 {
		return nil
	}
	return batchOf(t.schema, steps)
}

// join runs fn, a function that joined t (WithTx) rather than opened it.
func (t *Tx) join(fn func(tx *Tx) error) error {
	t.joined++
	defer func() { t.joined-- }()
	return fn(t)
}

func batchOf(schema string, steps []Step) *pgx.Batch {
	b := &pgx.Batch{}
	for _, s := range steps {
		qq := b.Queue(s.Query.render(schema), params(s.Args)...)
		if s.Scan != nil {
			scan := s.Scan
			qq.QueryRow(func(r pgx.Row) error { return scan(rowWrap{r}) })
		} else {
			qq.Exec(func(pgconn.CommandTag) error { return nil })
		}
	}
	return b
}
