package auth_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pgtest"
)

var followQueries = db.MustParseQueries(fstest.MapFS{"follow_test.sql": {Data: []byte(`
-- name: TestAuditIDsAfter
SELECT id FROM {{schema}}.audit_log WHERE id > $1 ORDER BY id;
`)}}, "follow_test.sql")

// TestAuditFollowWaitsForOlderTransactions (issue 18, item 1): a record whose transaction
// commits after a later record's must not be skipped by a follower. Transaction A writes a
// record and stays open; B writes a later one and commits. The follower returns nothing while
// A is open, then A's record and B's, in that order. The control is the naive follower
// ("ids after the last one read"), which returns B's and never A's.
func TestAuditFollowWaitsForOlderTransactions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := pgtest.NewDB(t)
	svc := auth.NewService(d)
	start, err := svc.AuditFollowStart(ctx)
	require.NoError(t, err)
	var lastID int64
	require.NoError(t, d.QueryRow(ctx, &db.Query{Name: "max", Text: `SELECT coalesce(max(id), 0) FROM {{schema}}.audit_log`}).Scan(&lastID))

	written := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	doneA := make(chan error, 1)
	go func() {
		doneA <- d.InTx(ctx, func(tx *db.Tx) error {
			if err := auth.RecordAudit(ctx, tx, auth.AuditEntry{Actor: "a", Action: "test.a", Target: "x"}); err != nil {
				return err
			}
			close(written)
			<-release
			return nil
		})
	}()
	<-written
	require.NoError(t, d.InTx(ctx, func(tx *db.Tx) error {
		return auth.RecordAudit(ctx, tx, auth.AuditEntry{Actor: "b", Action: "test.b", Target: "x"})
	}))

	recs, cur, err := svc.FollowAudit(ctx, start, "test.", 100)
	require.NoError(t, err)
	require.Empty(t, recs, "nothing while an older transaction holding a record is open")

	// Control: the naive follower sees B's record now, and after it A's can never come.
	naive := idsAfter(t, d, lastID)
	require.Len(t, naive, 1, "the naive follower returns B's record at once")
	naiveLast := naive[0]

	free()
	require.NoError(t, <-doneA)
	// Transactions of other tests on the same cluster may hold the line back a moment.
	var actions []string
	require.Eventually(t, func() bool {
		recs, next, err := svc.FollowAudit(ctx, cur, "test.", 100)
		require.NoError(t, err)
		cur = next
		for _, r := range recs {
			actions = append(actions, r.Action)
		}
		return len(actions) >= 2
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, []string{"test.a", "test.b"}, actions)
	require.Empty(t, idsAfter(t, d, naiveLast), "control: after B's id the naive follower never sees A's record")
}

func idsAfter(t *testing.T, d *db.DB, after int64) []int64 {
	t.Helper()
	rows, err := d.Query(context.Background(), followQueries.Get("TestAuditIDsAfter"), after)
	require.NoError(t, err)
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		out = append(out, id)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestAuditCursorParse: cursors round-trip; anything else is a 400 naming after.
func TestAuditCursorParse(t *testing.T) {
	t.Parallel()
	c, err := auth.ParseAuditCursor(auth.AuditCursor{Xact: "1234", ID: 56}.String())
	require.NoError(t, err)
	require.Equal(t, auth.AuditCursor{Xact: "1234", ID: 56}, c)
	for _, bad := range []string{"", "1234", ".5", "x.5", "12.-1", "1.2.3", fmt.Sprint(make([]byte, 30))} {
		_, err := auth.ParseAuditCursor(bad)
		require.Error(t, err, bad)
	}
}

// TestAuditFollowOrdersByTransactionFirst (issue 30, item 7a): the follow order is (xact, id),
// not id. Transaction A takes its transaction id first but writes its record last, after B
// has written and committed; so A's record has the older transaction and the higher id. A
// follower reading one record at a time gets A's record first and B's second, each exactly
// once. Ordered by id alone, the first batch is B's record, and its cursor (B's xact) then
// lies above A's record forever: A's is never delivered (seen failing so, by hand).
func TestAuditFollowOrdersByTransactionFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := pgtest.NewDB(t)
	svc := auth.NewService(d)
	cur, err := svc.AuditFollowStart(ctx)
	require.NoError(t, err)

	began := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	doneA := make(chan error, 1)
	go func() {
		doneA <- d.InTx(ctx, func(tx *db.Tx) error {
			var xid string
			if err := tx.QueryRow(ctx, &db.Query{Name: "xid", Text: `SELECT pg_current_xact_id()::text`}).Scan(&xid); err != nil {
				return err
			}
			close(began)
			<-release
			return auth.RecordAudit(ctx, tx, auth.AuditEntry{Actor: "a", Action: "order.a", Target: "x"})
		})
	}()
	<-began
	require.NoError(t, d.InTx(ctx, func(tx *db.Tx) error {
		return auth.RecordAudit(ctx, tx, auth.AuditEntry{Actor: "b", Action: "order.b", Target: "x"})
	}))
	free()
	require.NoError(t, <-doneA)

	var ids []int64
	var xacts []string
	var actions []string
	follow := func() {
		recs, next, err := svc.FollowAudit(ctx, cur, "order.", 1)
		require.NoError(t, err)
		require.LessOrEqual(t, len(recs), 1, "a batch of 1")
		cur = next
		for _, r := range recs {
			actions = append(actions, r.Action)
			ids = append(ids, r.ID)
			xacts = append(xacts, r.Cursor.Xact)
		}
	}
	// Transactions of other tests on the same cluster may hold the line back a moment. The
	// first record delivered must be A's: that fails at once under the wrong order, without
	// waiting for a record that never comes.
	deadline := time.Now().Add(30 * time.Second)
	for len(actions) < 2 {
		require.True(t, time.Now().Before(deadline), "both records within 30 s; got %v", actions)
		follow()
		if len(actions) > 0 {
			require.Equal(t, "order.a", actions[0], "the older transaction's record comes first")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 3 {
		follow()
	}
	require.Equal(t, []string{"order.a", "order.b"}, actions, "the older transaction's record first, each exactly once")
	require.Greater(t, ids[0], ids[1], "the setup holds: A's record has the higher id")
	require.NotEqual(t, xacts[0], xacts[1])
}
