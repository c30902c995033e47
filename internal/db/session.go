package db

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Session is one dedicated database connection, never returned to a pool. It exists for the
// few things that belong to a PostgreSQL session rather than to a transaction: session-level
// advisory locks (held for as long as the session lives, e.g. the lock keeper holding the
// keys of Terraform workspaces locked through strata) and LISTEN. It is the only place in
// strata where session-level advisory locks are allowed: through a pool, a session lock
// would stay with whichever connection happened to run the statement and be lost or
// orphaned when the pool recycles it (the failure of Terraform's own pg backend behind a
// transaction-mode pooler).
//
// A Session is not safe for concurrent use; its owner serializes calls (the lock keeper
// does so with one goroutine). Connect it with a URL that reaches PostgreSQL directly or
// through a session-mode pooler.
type Session struct {
	conn         *pgx.Conn
	schema       string
	pid          uint32
	backendStart time.Time
}

// Notification is a message received on a channel the session listens to.
type Notification struct {
	Channel string
	Payload string
	// PID is the backend that sent it.
	PID uint32
}

// OpenSession connects a dedicated session to url, bound to strata's schema (for the
// {{schema}} placeholder of queries it runs). applicationName names it in
// pg_stat_activity; "strata" when empty.
func OpenSession(ctx context.Context, url, schema, applicationName string) (*Session, error) {
	if schema == "" {
		schema = DefaultSchema
	}
	if !identRE.MatchString(schema) {
		return nil, fmt.Errorf("schema name %q: must match %s", schema, identRE)
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse session URL: %w", err)
	}
	// The same URL often configures strata's pool too; pool settings would reach the server
	// as unknown run-time parameters and fail the connection.
	for k := range cfg.RuntimeParams {
		if strings.HasPrefix(k, "pool_") {
			delete(cfg.RuntimeParams, k)
		}
	}
	if applicationName == "" {
		applicationName = "strata"
	}
	cfg.RuntimeParams["application_name"] = applicationName
	keepAlive(cfg)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect session: %w", interpretError(err))
	}
	s := &Session{conn: conn, schema: schema, pid: conn.PgConn().PID()}
	// backend_start identifies the backend together with its pid: pids are reused, the pair
	// is not, so another process can tell whether this session is still the one it recorded.
	if err := conn.QueryRow(ctx, "SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()").Scan(&s.backendStart); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("read session backend start: %w", interpretError(err))
	}
	return s, nil
}

// Keep-alive settings of sessions. A session lives for hours holding advisory keys; when the
// peer vanishes (a host or network failure, no FIN, no RST), both sides must notice within
// about a minute rather than the kernel's two hours: strata's side so the lock keeper marks
// its locks unprotected and reconnects, the server's side so the dead replica's backend
// ends and its keys go to a keeper that is alive.
const (
	keepAliveIdle     = 15 * time.Second
	keepAliveInterval = 5 * time.Second
	keepAliveCount    = 3
	// userTimeout bounds how long sent data may stay unacknowledged before the server's
	// kernel drops the connection (tcp_user_timeout, in ms on the server side).
	userTimeout = 30 * time.Second
)

// keepAlive turns on TCP keepalives on strata's side of a session (the dialer) and asks
// the server for the same on its side (tcp_keepalives_* and tcp_user_timeout, per-session
// settings any role may change; values in the URL win). Over a Unix socket none of this
// applies — there is no peer to lose but the local server, and PostgreSQL ignores the
// settings there — which is why every keeper call also has its own timeout.
func keepAlive(cfg *pgx.ConnConfig) {
	d := &net.Dialer{
		Timeout: cfg.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount,
		},
	}
	cfg.DialFunc = d.DialContext
	for k, v := range map[string]string{
		"tcp_keepalives_idle":     strconv.Itoa(int(keepAliveIdle.Seconds())),
		"tcp_keepalives_interval": strconv.Itoa(int(keepAliveInterval.Seconds())),
		"tcp_keepalives_count":    strconv.Itoa(keepAliveCount),
		"tcp_user_timeout":        strconv.Itoa(int(userTimeout.Milliseconds())),
	} {
		if _, set := cfg.RuntimeParams[k]; !set {
			cfg.RuntimeParams[k] = v
		}
	}
}

// OpenSession opens a dedicated session with the pool's own connection string. Use it only
// when that string reaches PostgreSQL directly (not through a transaction-mode pooler).
func (d *DB) OpenSession(ctx context.Context, applicationName string) (*Session, error) {
	return OpenSession(ctx, d.url, d.schema, applicationName)
}

// PID is the session's backend process id, as pg_locks and pg_stat_activity show it.
func (s *Session) PID() uint32 { return s.pid }

// BackendStart is when the session's backend started; with PID it identifies the backend.
func (s *Session) BackendStart() time.Time { return s.backendStart }

// Closed reports whether the connection is gone (closed by Close or lost).
func (s *Session) Closed() bool { return s.conn.IsClosed() }

// Close ends the session; PostgreSQL then releases every session lock it held.
func (s *Session) Close(ctx context.Context) error {
	return interpretError(s.conn.Close(ctx))
}

// Exec runs a statement on the session.
func (s *Session) Exec(ctx context.Context, q *Query, args ...any) (int64, error) {
	return exec(ctx, s.conn, s.schema, q, args)
}

// Query runs a query returning rows on the session.
func (s *Session) Query(ctx context.Context, q *Query, args ...any) (Rows, error) {
	return query(ctx, s.conn, s.schema, q, args)
}

// QueryRow runs a single-row query on the session.
func (s *Session) QueryRow(ctx context.Context, q *Query, args ...any) Row {
	return queryRow(ctx, s.conn, s.schema, q, args)
}

// TryAdvisoryLock takes the session-level advisory lock key without waiting and reports
// whether it got it. PostgreSQL counts repeated locks of one key by one session, so the
// caller must track what it holds and lock each key once.
func (s *Session) TryAdvisoryLock(ctx context.Context, key int64) (bool, error) {
	var ok bool
	err := s.conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok)
	return ok, interpretError(err)
}

// AdvisoryUnlock releases one hold of the session-level advisory lock key and reports
// whether the session held it.
func (s *Session) AdvisoryUnlock(ctx context.Context, key int64) (bool, error) {
	var ok bool
	err := s.conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", key).Scan(&ok)
	return ok, interpretError(err)
}

// Listen subscribes the session to channel.
func (s *Session) Listen(ctx context.Context, channel string) error {
	_, err := s.conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize())
	return interpretError(err)
}

// ErrNoNotification is returned by WaitForNotification when ctx ended before a notification
// arrived; the session is still usable.
var ErrNoNotification = errors.New("no notification")

// WaitForNotification blocks until a notification arrives on a listened channel or ctx is
// done. When ctx ends first it returns ErrNoNotification and the session stays usable (the
// driver interrupts the read with a deadline, which does not break the connection); any
// other error means the connection is lost.
func (s *Session) WaitForNotification(ctx context.Context) (Notification, error) {
	n, err := s.conn.WaitForNotification(ctx)
	if err != nil {
		if ctx.Err() != nil && !s.conn.IsClosed() {
			return Notification{}, ErrNoNotification
		}
		return Notification{}, interpretError(err)
	}
	return Notification{Channel: n.Channel, Payload: n.Payload, PID: n.PID}, nil
}

// Listener says what a Subscribe loop does at each step.
type Listener struct {
	// Subscribed is called with true once the session LISTENs (notifications sent while
	// unsubscribed were missed: a subscriber catches up here) and with false when it is lost.
	Subscribed func(on bool)
	// Notify is called for every notification, with its payload.
	Notify func(payload string)
	// Lost is called with the reason whenever the subscription is lost or cannot be made,
	// before the next attempt.
	Lost func(err error)
}

// Subscribe keeps a session from open LISTENing on channel until ctx ends, reconnecting after
// a loss (backing off from 100 ms to 5 s), and tells l. It is the one LISTEN loop strata has:
// the pillar render cache's invalidations and the watch poller's wake-ups both run on it.
func Subscribe(ctx context.Context, open func(context.Context) (*Session, error), channel string, l Listener) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		s, err := open(ctx)
		if err == nil {
			err = s.Listen(ctx, channel)
		}
		if err == nil {
			l.Subscribed(true)
			backoff = 100 * time.Millisecond
			for {
				var n Notification
				if n, err = s.WaitForNotification(ctx); err != nil {
					break
				}
				l.Notify(n.Payload)
			}
		}
		l.Subscribed(false)
		if s != nil {
			closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_ = s.Close(closeCtx)
			cancel()
		}
		if ctx.Err() != nil {
			return
		}
		l.Lost(err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}
