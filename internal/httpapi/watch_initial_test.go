package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/resource"
)

// TestWatchInitialEventsAskEndedHere (review of issue 27, item 4): a watch from version 0
// starts with every current object as ADDED, and those initial events were sent without the
// check every later event gets (has this replica revoked the token, signed the session out, or
// seen the session expire?), so a stream whose authority ended between the request's
// authentication and its snapshot still delivered the whole snapshot. Here the replica's clock
// runs 13 hours ahead of the database's (a console session lasts 12): the database still
// serves the session, so the stream opens, but by this replica's clock it has expired, so the
// stream must end with its ERROR 401 before any object. Seen failing before the fix (the first
// line was "ADDED before").
func TestWatchInitialEventsAskEndedHere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := pgtest.NewDB(t)
	tokens := auth.NewService(d, auth.WithClock(func() time.Time { return time.Now().Add(auth.SessionTTL + time.Hour) }))
	secret, err := tokens.Bootstrap(ctx, "")
	require.NoError(t, err)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := resource.NewService(d)
	hub := resource.NewHub(svc, func(ctx context.Context) (*db.Session, error) { return d.OpenSession(ctx, "watch test") }, quiet)
	ix := hub.ServeLists()
	hubCtx, stopHub := context.WithCancel(ctx)
	done := make(chan struct{})
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Tokens: tokens, Resources: svc, Watch: hub, WatchBookmarkInterval: time.Minute,
		WatchRecheckInterval: time.Minute, MaxBodyBytes: 64 << 10, Version: "test", Logger: quiet}))
	go func() { defer close(done); hub.Run(hubCtx) }() // after New, which connects the kinds' registry
	t.Cleanup(func() { srv.Close() })
	t.Cleanup(func() { stopHub(); <-done })
	waitIndex(t, ix)
	admin, err := client.New(srv.URL, secret, nil)
	require.NoError(t, err)
	_, err = admin.Orgs().Create(ctx, api.Object{Metadata: api.ObjectMeta{Name: "before"}})
	require.NoError(t, err)

	cc := newConsoleClient(t, srv.URL)
	cc.signIn(secret)
	lines := consoleStream(t, cc)
	select {
	case l, ok := <-lines:
		require.True(t, ok, "the stream ended without an event")
		var ev struct {
			Type   string `json:"type"`
			Object struct {
				Status int `json:"status"`
			} `json:"object"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &ev), l)
		require.Equal(t, "ERROR", ev.Type, "an initial event reached a stream whose session had ended: %s", l)
		require.Equal(t, 401, ev.Object.Status)
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
}
