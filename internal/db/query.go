package db

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Query is one named SQL statement from a .sql file. Its text may name strata's schema as
// {{schema}}, which is replaced by the quoted schema name of the DB that runs it; other
// {{name}} placeholders are identifiers bound with WithIdent. Values are always bound
// parameters ($1, $2, …), never text.
type Query struct {
	Name string
	Text string

	once     sync.Mutex
	rendered map[string]string
}

// render replaces {{schema}} with the quoted schema name, caching the result per schema.
func (q *Query) render(schema string) string {
	q.once.Lock()
	defer q.once.Unlock()
	if s, ok := q.rendered[schema]; ok {
		return s
	}
	s := strings.ReplaceAll(q.Text, "{{schema}}", pgx.Identifier{schema}.Sanitize())
	if q.rendered == nil {
		q.rendered = map[string]string{}
	}
	q.rendered[schema] = s
	return s
}

// WithIdent returns a copy of q whose {{name}} placeholders are replaced by value, quoted as
// an identifier. It exists for per-project schemas, which PostgreSQL cannot take as bound
// parameters; callers validate value against their own naming rules first.
func (q *Query) WithIdent(name, value string) *Query {
	return &Query{Name: q.Name, Text: strings.ReplaceAll(q.Text, "{{"+name+"}}", pgx.Identifier{value}.Sanitize())}
}

// QuoteIdent quotes an identifier for use in a DDL statement text.
func QuoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }

// Queries is the set of named queries parsed from one file.
type Queries map[string]*Query

// Get returns the named query and panics when it is missing: a missing query is a
// programming error that the package's tests catch on their first run.
func (qs Queries) Get(name string) *Query {
	q, ok := qs[name]
	if !ok {
		panic(fmt.Sprintf("db: no query named %q", name))
	}
	return q
}

// MustParseQueries reads a .sql file of statements, each introduced by a line
// "-- name: QueryName", and panics on a malformed file (they are embedded, so a bad one
// cannot reach a release).
func MustParseQueries(fsys fs.FS, path string) Queries {
	qs, err := ParseQueries(fsys, path)
	if err != nil {
		panic(err)
	}
	return qs
}

// ParseQueries reads a .sql file of statements, each introduced by "-- name: QueryName".
// The header stays in the text, so the database's own logs and strata's query metrics can
// name the statement.
func ParseQueries(fsys fs.FS, path string) (Queries, error) {
	b, err := fs.ReadFile(fsys, path)
	if err != nil {
		return nil, err
	}
	qs := Queries{}
	var cur *Query
	var body strings.Builder
	flush := func() {
		if cur != nil {
			cur.Text = strings.TrimSpace(body.String())
			qs[cur.Name] = cur
		}
		body.Reset()
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "-- name:"); ok {
			flush()
			name = strings.TrimSpace(name)
			if name == "" {
				return nil, fmt.Errorf("%s: empty query name", path)
			}
			if _, dup := qs[name]; dup {
				return nil, fmt.Errorf("%s: query %q defined twice", path, name)
			}
			cur = &Query{Name: name}
		}
		if cur != nil {
			body.WriteString(line)
			body.WriteByte('\n')
		}
	}
	flush()
	if len(qs) == 0 {
		return nil, fmt.Errorf("%s: no queries", path)
	}
	return qs, nil
}

// queryName extracts the name from a statement's "-- name: X" header.
func queryName(sql string) string {
	rest, ok := strings.CutPrefix(sql, "-- name:")
	if !ok {
		return "other"
	}
	if i := strings.IndexByte(rest, '\n'); i >= 0 {
		rest = rest[:i]
	}
	return strings.TrimSpace(rest)
}

// tracer reports each query's duration and outcome to a QueryObserver (when there is one)
// and counts round trips for a context that asks for it (CountRoundTrips).
type tracer struct{ obs QueryObserver }

type traceKey struct{}

type traceData struct {
	name  string
	start time.Time
}

func (t *tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if rt := roundTripsOf(ctx); rt != nil {
		rt.trip(tripName(data.SQL))
	}
	if t.obs == nil {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, traceData{name: queryName(data.SQL), start: time.Now()})
}

// The statements of a pipeline (DB.Pipeline, Tx.Pipeline) are reported each under its own
// name, with the time from the pipeline's start to its result.
type batchKey struct{}

func (t *tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	if rt := roundTripsOf(ctx); rt != nil {
		rt.trip("pipeline:")
	}
	if t.obs == nil {
		return ctx
	}
	return context.WithValue(ctx, batchKey{}, time.Now())
}

func (t *tracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	if rt := roundTripsOf(ctx); rt != nil {
		rt.more(tripName(data.SQL))
	}
	start, ok := ctx.Value(batchKey{}).(time.Time)
	if !ok {
		return
	}
	t.obs.ObserveQuery(queryName(data.SQL), outcomeCode(data.Err), time.Since(start))
}

func (t *tracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (t *tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	td, ok := ctx.Value(traceKey{}).(traceData)
	if !ok {
		return
	}
	t.obs.ObserveQuery(td.name, outcomeCode(data.Err), time.Since(td.start))
}

// outcomeCode is a statement's outcome for the metrics: ok, its SQLSTATE, or error.
func outcomeCode(err error) string {
	if err == nil {
		return "ok"
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return "error"
}
