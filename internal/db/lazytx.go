package db

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// txConn is what a Tx sends its statements through: a pgx transaction (ReadTx) or a
// lazyTx (InTx).
type txConn interface {
	pgxQuerier
	batchSender
}

// lazyTx is a read-write transaction on a pooled connection whose BEGIN is not sent on its
// own: it goes in front of the transaction's first statement, in the same round trip when
// that statement is a pipeline (Tx.Pipeline) — which is how a write opens its transaction,
// takes the kind's key and locks its row in one round trip (docs/benchmarks.md, issue 31) —
// and just before it otherwise. A transaction that sends nothing costs nothing, not even a
// COMMIT.
type lazyTx struct {
	conn  *pgxpool.Conn
	begun bool
	// deferNotify sends SET LOCAL strata.notify with BEGIN (Tx.DeferNotifications).
	deferNotify bool
}

// begin sends BEGIN unless it has gone already.
func (l *lazyTx) begin(ctx context.Context) error {
	if l.begun {
		return nil
	}
	l.begun = true
	if l.deferNotify {
		_, err := l.conn.Exec(ctx, "begin; "+deferredNotify)
		return err
	}
	_, err := l.conn.Exec(ctx, "begin")
	return err
}

func (l *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := l.begin(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return l.conn.Exec(ctx, sql, args...)
}

func (l *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := l.begin(ctx); err != nil {
		return nil, err
	}
	return l.conn.Query(ctx, sql, args...)
}

func (l *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := l.begin(ctx); err != nil {
		return errRow{err}
	}
	return l.conn.QueryRow(ctx, sql, args...)
}

// SendBatch sends b, with BEGIN as its first statement when the transaction has not begun:
// PostgreSQL runs the batch's statements in order up to the first error, so the rest of the
// batch runs inside the transaction BEGIN opened.
func (l *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if !l.begun {
		l.begun = true
		withBegin := &pgx.Batch{}
		withBegin.Queue("begin").Exec(func(pgconn.CommandTag) error { return nil })
		if l.deferNotify {
			withBegin.Queue(deferredNotify).Exec(func(pgconn.CommandTag) error { return nil })
		}
		withBegin.QueuedQueries = append(withBegin.QueuedQueries, b.QueuedQueries...)
		b = withBegin
	}
	return l.conn.SendBatch(ctx, b)
}

// commit ends the transaction, as pgx's Tx.Commit does: a COMMIT answered ROLLBACK (the
// transaction had failed) is pgx.ErrTxCommitRollback. Nothing sent, nothing to commit. held,
// when not nil, is what Tx.SendWithCommit held: its statements go in front of the COMMIT,
// in its round trip (and after a BEGIN when nothing else was sent).
func (l *lazyTx) commit(ctx context.Context, held *pgx.Batch) error {
	if held == nil {
		if !l.begun {
			return nil
		}
		tag, err := l.conn.Exec(ctx, "commit")
		if err != nil {
			return err
		}
		if tag.String() == "ROLLBACK" {
			return pgx.ErrTxCommitRollback
		}
		return nil
	}
	var rolledBack bool
	held.Queue("commit").Exec(func(tag pgconn.CommandTag) error {
		rolledBack = tag.String() == "ROLLBACK"
		return nil
	})
	if err := l.SendBatch(ctx, held).Close(); err != nil {
		return err
	}
	if rolledBack {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// rollback ends the transaction without its changes. A connection whose rollback failed is
// not idle, and the pool closes a connection it gets back that is not idle
// (pgxpool.Conn.Release), so no transaction is ever left open on a pooled connection.
func (l *lazyTx) rollback(ctx context.Context) {
	if l.begun {
		_, _ = l.conn.Exec(ctx, "rollback")
	}
}

// errRow is a row whose Scan fails with err: a QueryRow whose BEGIN failed.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
