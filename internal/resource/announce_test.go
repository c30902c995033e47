package resource_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
)

// notifications collects what a session LISTENing on channels receives within quiet of the
// last one (or of the start).
func notifications(t *testing.T, s *db.Session, quiet time.Duration) []db.Notification {
	t.Helper()
	var out []db.Notification
	for {
		ctx, cancel := context.WithTimeout(context.Background(), quiet)
		n, err := s.WaitForNotification(ctx)
		cancel()
		if errors.Is(err, db.ErrNoNotification) {
			return out
		}
		require.NoError(t, err)
		out = append(out, n)
	}
}

func channelsAndPayloads(ns []db.Notification) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Channel + " " + n.Payload
	}
	return out
}

// TestObjectWritesAnnounceAfterCommit (issue 31, item 4; migration 0036): a write of an
// object sends no NOTIFY inside its transaction, where PostgreSQL would hold its database-wide
// notification lock through the commit flush. The statement triggers stay silent (a write
// whose announcement is suppressed, as if its writer died after COMMIT, is heard on neither
// channel), the change row carries the render the write alters, and the replica announces the
// write after COMMIT: on "<schema>.changes" for the change pollers and, naming the render, on
// "<schema>.pillars" for the render caches. Control: a plain SQL write, which does not defer,
// still notifies "<schema>.pillars" from inside its transaction, so the listener hears what
// the triggers send.
func TestObjectWritesAnnounceAfterCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	_, err := b.svc.Create(ctx, org("acme"), nodeObj("", nil))
	require.NoError(t, err)
	_, err = b.svc.Create(ctx, node("web01"), nodeObj("acme", map[string]string{"role": "db"}))
	require.NoError(t, err)
	b.db.FlushAnnouncements(ctx)

	s, err := b.db.OpenSession(ctx, "announce test")
	require.NoError(t, err)
	defer s.Close(ctx)
	changes, pillars := b.db.Schema()+".changes", b.db.Schema()+".pillars"
	require.NoError(t, s.Listen(ctx, changes))
	require.NoError(t, s.Listen(ctx, pillars))
	notifications(t, s, 200*time.Millisecond) // anything left from the setup

	patch := []byte(`{"metadata":{"labels":{"role":"web"}}}`)
	_, err = b.svc.Patch(db.WithoutAnnouncement(ctx), node("web01"), patch)
	require.NoError(t, err)
	require.Empty(t, notifications(t, s, 300*time.Millisecond), "the write's triggers notified inside its transaction")
	var scope *string
	require.NoError(t, b.db.QueryRow(ctx, &db.Query{Name: "scope", Text: `SELECT render_scope FROM {{schema}}.changes ORDER BY resource_version DESC LIMIT 1`}).Scan(&scope))
	require.NotNil(t, scope)
	require.Equal(t, "node:web01", *scope)

	sent := b.db.AnnouncementsSent()
	_, err = b.svc.Patch(ctx, node("web01"), []byte(`{"metadata":{"labels":{"role":"app"}}}`))
	require.NoError(t, err)
	got := notifications(t, s, 300*time.Millisecond)
	require.ElementsMatch(t, []string{changes + " ", pillars + " node:web01"}, channelsAndPayloads(got),
		"one announcement after COMMIT: a wake-up for the pollers, and the render it alters for the caches")
	require.Equal(t, sent+1, b.db.AnnouncementsSent(), "both in one statement")

	// An annotation changes no render: the change row says so.
	_, err = b.svc.Patch(ctx, node("web01"), []byte(`{"metadata":{"annotations":{"note":"x"}}}`))
	require.NoError(t, err)
	require.NoError(t, b.db.QueryRow(ctx, &db.Query{Name: "scope", Text: `SELECT render_scope FROM {{schema}}.changes ORDER BY resource_version DESC LIMIT 1`}).Scan(&scope))
	require.Nil(t, scope, "an annotation alters no render")
	notifications(t, s, 200*time.Millisecond)

	// Control: a writer that does not defer notifies from its transaction, as before.
	_, err = b.db.Exec(ctx, &db.Query{Name: "plain", Text: `UPDATE {{schema}}.labels SET value = 'sql' WHERE key_name = 'role'`})
	require.NoError(t, err)
	got = notifications(t, s, 300*time.Millisecond)
	require.Len(t, got, 1, "%v", got)
	require.Equal(t, pillars, got[0].Channel)
	require.Equal(t, "node:web01", got[0].Payload)
}
