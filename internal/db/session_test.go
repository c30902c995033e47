package db_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pgtest"
)

// TestSession: a session's advisory locks are its own and last as long as it does; LISTEN
// receives notifications; an interrupted wait leaves the session usable; closing it frees
// its keys.
func TestSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabaseURL(t)
	a, err := db.OpenSession(ctx, url, "strata", "session-a")
	require.NoError(t, err)
	// Pool settings in the URL (it is often the pool's own) are left out of the session.
	b, err := db.OpenSession(ctx, withParam(url, "pool_max_conns", "3"), "strata", "")
	require.NoError(t, err)
	defer b.Close(ctx)
	require.NotZero(t, a.PID())
	require.NotEqual(t, a.PID(), b.PID())
	require.False(t, a.BackendStart().IsZero())

	var app string
	require.NoError(t, b.QueryRow(ctx, &db.Query{Name: "t", Text: "SELECT application_name FROM pg_stat_activity WHERE pid = $1"}, int32(a.PID())).Scan(&app))
	require.Equal(t, "session-a", app)

	ok, err := a.TryAdvisoryLock(ctx, 42)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = b.TryAdvisoryLock(ctx, 42)
	require.NoError(t, err)
	require.False(t, ok, "held by a's session")

	require.NoError(t, b.Listen(ctx, "strata_test_channel"))
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = b.WaitForNotification(wctx)
	cancel()
	require.ErrorIs(t, err, db.ErrNoNotification)
	require.False(t, b.Closed(), "an interrupted wait keeps the session")
	_, err = a.Exec(ctx, &db.Query{Name: "t", Text: "SELECT pg_notify('strata_test_channel', 'hello')"})
	require.NoError(t, err)
	wctx, cancel = context.WithTimeout(ctx, 5*time.Second)
	n, err := b.WaitForNotification(wctx)
	cancel()
	require.NoError(t, err)
	require.Equal(t, "hello", n.Payload)
	require.Equal(t, a.PID(), n.PID)

	ok, err = a.AdvisoryUnlock(ctx, 42)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = a.TryAdvisoryLock(ctx, 42)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, a.Close(ctx))
	require.True(t, a.Closed())
	require.Eventually(t, func() bool {
		ok, err := b.TryAdvisoryLock(ctx, 42)
		return err == nil && ok
	}, 5*time.Second, 10*time.Millisecond, "closing a session frees its keys")

	// A terminated backend surfaces as a lost session, not as a missed notification.
	_, err = a.Exec(ctx, &db.Query{Name: "t", Text: "SELECT 1"})
	require.Error(t, err)
	c, err := db.OpenSession(ctx, url, "strata", "")
	require.NoError(t, err)
	_, err = b.Exec(ctx, &db.Query{Name: "t", Text: "SELECT pg_terminate_backend($1)"}, int32(c.PID()))
	require.NoError(t, err)
	_, err = c.WaitForNotification(ctx)
	require.Error(t, err)
	require.False(t, errors.Is(err, db.ErrNoNotification))
	require.True(t, c.Closed())
}

// withParam adds a connection parameter to url in its own form: a query parameter of a
// postgres:// URL, or a keyword/value pair (STRATA_TEST_DATABASE_URL may be either).
func withParam(url, key, value string) string {
	if strings.Contains(url, "://") {
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		return url + sep + key + "=" + value
	}
	return url + " " + key + "=" + value
}
