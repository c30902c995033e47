package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
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

// watchBundle is an API with a change poller, served with short server timeouts.
type watchBundle struct {
	// stopHub stops the change poller, as a shutting-down replica does.
	stopHub func()
	srv     *httptest.Server
	admin   *client.Client
	db      *db.DB
	tokens  *auth.Service
	secret  string
}

// watchSetup serves the API with a hub, a bookmark interval and the server's read and
// write timeouts set to timeout, so a stream that outlives them shows they do not cut it.
func watchSetup(t *testing.T, bookmark, timeout time.Duration, opts ...func(*httpapi.Options)) *watchBundle {
	t.Helper()
	return watchSetupAPI(t, bookmark, timeout, nil, opts...)
}

// watchSetupAPI is watchSetup with tune run on the API before it serves anything.
func watchSetupAPI(t *testing.T, bookmark, timeout time.Duration, tune func(*httpapi.API), opts ...func(*httpapi.Options)) *watchBundle {
	t.Helper()
	d := pgtest.NewDB(t)
	tokens := auth.NewService(d)
	secret, err := tokens.Bootstrap(context.Background(), "")
	require.NoError(t, err)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := resource.NewService(d)
	hub := resource.NewHub(svc, func(ctx context.Context) (*db.Session, error) { return d.OpenSession(ctx, "watch test") }, quiet)
	ix := hub.ServeLists()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	o := httpapi.Options{Tokens: tokens, Resources: svc, Watch: hub, WatchBookmarkInterval: bookmark,
		MaxBodyBytes: 64 << 10, Version: "test", Logger: quiet}
	for _, f := range opts {
		f(&o)
	}
	api := httpapi.New(o)
	go func() { defer close(done); hub.Run(ctx) }() // after New, which connects the kinds' registry
	if tune != nil {
		tune(api)
	}
	srv := httptest.NewUnstartedServer(api)
	srv.Config.WriteTimeout = timeout
	srv.Config.ReadTimeout = timeout
	srv.Start()
	// The hub stops first, which ends the streams; then the server can close.
	t.Cleanup(func() { srv.Close() })
	t.Cleanup(func() { cancel(); <-done })
	waitIndex(t, ix)
	c, err := client.New(srv.URL, secret, nil)
	require.NoError(t, err)
	return &watchBundle{stopHub: cancel, srv: srv, admin: c, db: d, tokens: tokens, secret: secret}
}

// eventWait bounds every wait of these tests for a watch event (or a stream's end): one that
// does not come fails the test within it, saying so, instead of hanging it until the test
// binary's timeout (issue 30: an annotation-only change dropped as a no-op held
// TestWatchSelectorEnterAndLeave for ten minutes).
const eventWait = 20 * time.Second

// nextOrEnd returns w's next event or how the stream ended. When nothing arrives within
// eventWait it closes w and fails the test.
func nextOrEnd(t *testing.T, w *client.Watcher) (api.Event, error) {
	t.Helper()
	timer := time.AfterFunc(eventWait, func() { w.Close() })
	ev, err := w.Next()
	if !timer.Stop() {
		require.FailNow(t, "no watch event within "+eventWait.String(), "the stream was closed after waiting (%v)", err)
	}
	return ev, err
}

// next returns the next event that is not a BOOKMARK, failing the test when none (or an
// error) comes within eventWait of the previous.
func next(t *testing.T, w *client.Watcher) api.Event {
	t.Helper()
	for {
		ev, err := nextOrEnd(t, w)
		require.NoError(t, err)
		if ev.Type != api.EventBookmark {
			return ev
		}
	}
}

func eventOf(ev api.Event) string { return ev.Type + " " + ev.Object.Metadata.Name }

// TestWatchStartsWithCurrentObjects: without a resourceVersion the stream starts with every
// current object as ADDED, then sends the changes, each with its resourceVersion.
func TestWatchStartsWithCurrentObjects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := watchSetup(t, time.Hour, time.Minute)
	orgs := b.admin.Orgs()
	for _, n := range []string{"b", "a"} {
		_, err := orgs.Create(ctx, api.Object{Metadata: api.ObjectMeta{Name: n}})
		require.NoError(t, err)
	}
	w, err := orgs.Watch(ctx, client.WatchOptions{})
	require.NoError(t, err)
	defer w.Close()
	require.Equal(t, "ADDED a", eventOf(next(t, w)))
	require.Equal(t, "ADDED b", eventOf(next(t, w)))

	c, err := orgs.Create(ctx, api.Object{Metadata: api.ObjectMeta{Name: "c"}})
	require.NoError(t, err)
	_, err = orgs.Patch(ctx, "a", []byte(`{"metadata":{"labels":{"x":"1"}}}`))
	require.NoError(t, err)
	require.NoError(t, orgs.Delete(ctx, "b", client.DeleteOptions{}))
	ev := next(t, w)
	require.Equal(t, "ADDED c", eventOf(ev))
	require.Equal(t, c.Metadata.ResourceVersion, ev.Object.Metadata.ResourceVersion)
	ev = next(t, w)
	require.Equal(t, "MODIFIED a", eventOf(ev))
	require.Equal(t, map[string]string{"x": "1"}, ev.Object.Metadata.Labels)
	require.Equal(t, "DELETED b", eventOf(next(t, w)))

	// Resuming from the first change's version repeats exactly what followed it.
	w2, err := orgs.Watch(ctx, client.WatchOptions{ResourceVersion: c.Metadata.ResourceVersion})
	require.NoError(t, err)
	defer w2.Close()
	require.Equal(t, "MODIFIED a", eventOf(next(t, w2)))
	require.Equal(t, "DELETED b", eventOf(next(t, w2)))
}

// TestWatchSelectorEnterAndLeave: with a label selector an object that starts matching is
// ADDED, one that stops matching is DELETED (with its current labels), one that changes and
// still matches is MODIFIED, and changes of objects that never match are not sent.
func TestWatchSelectorEnterAndLeave(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := watchSetup(t, time.Hour, time.Minute)
	orgs := b.admin.Orgs()
	for n, env := range map[string]string{"p": "prod", "d": "dev"} {
		_, err := orgs.Create(ctx, api.Object{Metadata: api.ObjectMeta{Name: n, Labels: map[string]string{"env": env}}})
		require.NoError(t, err)
	}
	w, err := orgs.Watch(ctx, client.WatchOptions{LabelSelector: "env=prod"})
	require.NoError(t, err)
	defer w.Close()
	require.Equal(t, "ADDED p", eventOf(next(t, w)))

	patch := func(name, env string) {
		t.Helper()
		_, err := orgs.Patch(ctx, name, []byte(`{"metadata":{"labels":{"env":"`+env+`"}}}`))
		require.NoError(t, err)
	}
	patch("d", "staging") // never matches: nothing
	patch("d", "prod")    // enters
	ev := next(t, w)
	require.Equal(t, "ADDED d", eventOf(ev))
	patch("p", "dev") // leaves
	ev = next(t, w)
	require.Equal(t, "DELETED p", eventOf(ev))
	require.Equal(t, "dev", ev.Object.Metadata.Labels["env"], "the object as it is now")
	patch("p", "qa") // still outside: nothing
	_, err = orgs.Patch(ctx, "d", []byte(`{"metadata":{"annotations":{"n":"1"}}}`))
	require.NoError(t, err)
	require.Equal(t, "MODIFIED d", eventOf(next(t, w)))
	require.NoError(t, orgs.Delete(ctx, "p", client.DeleteOptions{}))
	require.NoError(t, orgs.Delete(ctx, "d", client.DeleteOptions{}))
	require.Equal(t, "DELETED d", eventOf(next(t, w)), "the deletion of a non-matching object is not sent")
}

// TestWatchBookmarksOutliveServerTimeouts: BOOKMARKs arrive at the configured interval
// carrying a resourceVersion the stream is complete through, and the stream carries events
// long after the server's read and write timeouts (1s here) would have cut it.
func TestWatchBookmarksOutliveServerTimeouts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := watchSetup(t, 200*time.Millisecond, time.Second)
	orgs := b.admin.Orgs()
	first, err := orgs.Create(ctx, api.Object{Metadata: api.ObjectMeta{Name: "first"}})
	require.NoError(t, err)
	w, err := orgs.Watch(ctx, client.WatchOptions{ResourceVersion: first.Metadata.ResourceVersion})
	require.NoError(t, err)
	defer w.Close()
	began := time.Now()
	bookmarks := 0
	for time.Since(began) < 3*time.Second {
		ev, err := nextOrEnd(t, w)
		require.NoError(t, err)
		require.Equal(t, api.EventBookmark, ev.Type)
		require.Equal(t, "Org", ev.Object.Kind)
		rv, err := strconv.ParseInt(ev.Object.Metadata.ResourceVersion, 10, 64)
		require.NoError(t, err)
		want, _ := strconv.ParseInt(first.Metadata.ResourceVersion, 10, 64)
		require.GreaterOrEqual(t, rv, want)
		bookmarks++
	}
	require.Greater(t, bookmarks, 1)
	later, err := orgs.Create(ctx, api.Object{Metadata: api.ObjectMeta{Name: "later"}})
	require.NoError(t, err)
	ev := next(t, w)
	require.Equal(t, "ADDED later", eventOf(ev))
	require.Equal(t, later.Metadata.ResourceVersion, ev.Object.Metadata.ResourceVersion)
	// The next bookmark covers the change just received.
	for {
		ev, err := nextOrEnd(t, w)
		require.NoError(t, err)
		if ev.Type == api.EventBookmark {
			require.Equal(t, later.Metadata.ResourceVersion, ev.Object.Metadata.ResourceVersion)
			break
		}
	}
}

// TestWatchRefusals: a resourceVersion that is not a positive integer and a watch value that
// is not a boolean are 400s; a version older than the retained changes is a 410.
func TestWatchRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := watchSetup(t, time.Hour, time.Minute)
	for _, q := range []string{"watch=true&resourceVersion=abc", "watch=true&resourceVersion=-3", "watch=maybe", "watch=true&labelSelector=%3D%3D"} {
		resp, err := http.DefaultClient.Do(authed(t, b, "/v1/orgs?"+q))
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", q, body)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	}
	old, err := b.admin.Orgs().Create(ctx, api.Object{Metadata: api.ObjectMeta{Name: "old"}})
	require.NoError(t, err)
	_, err = b.admin.Orgs().Create(ctx, api.Object{Metadata: api.ObjectMeta{Name: "newer"}})
	require.NoError(t, err)
	_, err = resource.PruneChanges(ctx, b.db, time.Now().Add(time.Hour), 100)
	require.NoError(t, err)
	_, err = b.admin.Orgs().Watch(ctx, client.WatchOptions{ResourceVersion: old.Metadata.ResourceVersion})
	require.True(t, client.IsGone(err), "%v", err)
	var ce *client.Error
	require.True(t, errors.As(err, &ce))
	require.Equal(t, httpapi.ProblemTypeBase+"gone", ce.Problem.Type)

	// A watch in an org that does not exist is a 404.
	_, err = b.admin.Groups("nowhere").Watch(ctx, client.WatchOptions{})
	require.True(t, client.IsNotFound(err), "%v", err)
}

// TestWatchHonoursTokenScope: a token that may read only orgs whose names start with "a"
// sees only their events, in the initial list and afterwards.
func TestWatchHonoursTokenScope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := watchSetup(t, time.Hour, time.Minute)
	_, secret, err := b.tokens.Create(ctx, auth.AuditActor{Actor: "test"}, auth.CreateParams{Name: "a-only", Scopes: []string{"orgs:read:a*"}})
	require.NoError(t, err)
	for _, n := range []string{"a1", "b1"} {
		_, err := b.admin.Orgs().Create(ctx, api.Object{Metadata: api.ObjectMeta{Name: n}})
		require.NoError(t, err)
	}
	c, err := client.New(b.srv.URL, secret, nil)
	require.NoError(t, err)
	w, err := c.Orgs().Watch(ctx, client.WatchOptions{})
	require.NoError(t, err)
	defer w.Close()
	require.Equal(t, "ADDED a1", eventOf(next(t, w)))
	for _, n := range []string{"b2", "a2"} {
		_, err := b.admin.Orgs().Create(ctx, api.Object{Metadata: api.ObjectMeta{Name: n}})
		require.NoError(t, err)
	}
	require.Equal(t, "ADDED a2", eventOf(next(t, w)))
}

// TestWatchStreamFormat: the stream is NDJSON, one event object per line.
func TestWatchStreamFormat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := watchSetup(t, time.Hour, time.Minute)
	_, err := b.admin.Orgs().Create(ctx, api.Object{Metadata: api.ObjectMeta{Name: "x"}})
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(authed(t, b, "/v1/orgs?watch=true"))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/x-ndjson", resp.Header.Get("Content-Type"))
	line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
	require.NoError(t, err)
	var ev map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(line, &ev))
	require.JSONEq(t, `"ADDED"`, string(ev["type"]))
	var obj api.Object
	require.NoError(t, json.Unmarshal(ev["object"], &obj))
	require.Equal(t, "x", obj.Metadata.Name)
}

func authed(t *testing.T, b *watchBundle, path string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+b.secret)
	return req
}

// TestWatchEndsWithErrorEvent: when the replica's poller stops (shutdown), an open stream
// ends with an ERROR event carrying a 503 problem document, which the client returns as an
// *Error, rather than staying open.
func TestWatchEndsWithErrorEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var logged syncLog
	b := watchSetup(t, 50*time.Millisecond, time.Minute, func(o *httpapi.Options) {
		o.Logger = slog.New(slog.NewJSONHandler(&logged, nil))
	})
	w, err := b.admin.Orgs().Watch(ctx, client.WatchOptions{})
	require.NoError(t, err)
	defer w.Close()
	ev, err := nextOrEnd(t, w)
	require.NoError(t, err)
	require.Equal(t, api.EventBookmark, ev.Type)
	b.stopHub()
	for n := 0; ; n++ {
		ev, err = nextOrEnd(t, w)
		if err != nil {
			break
		}
		require.Equal(t, api.EventBookmark, ev.Type)
		require.Less(t, n, 1000, "the stream goes on sending bookmarks instead of ending")
	}
	var ce *client.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, http.StatusServiceUnavailable, ce.Status)
	require.Equal(t, httpapi.ProblemTypeBase+"unavailable", ce.Problem.Type)
	require.Equal(t, "shutting-down", ce.Problem.Reason, "the ERROR event names its reason, as every 503 problem does")
	require.Equal(t, "/v1/orgs", ce.Problem.Instance)
	_, err = nextOrEnd(t, w)
	require.ErrorIs(t, err, io.EOF, "nothing follows the ERROR event")
	// The server's log says what happened: a watch ended by the shutdown, not a failed line
	// of a bulk apply, and not as an error (nothing went wrong).
	log := logged.String()
	require.NotContains(t, log, "bulk apply")
	require.Contains(t, log, `"msg":"watch ended: the server is shutting down"`)
	require.Contains(t, log, `"level":"INFO"`)
	require.NotContains(t, log, `"level":"ERROR"`)
}

// syncLog is a log destination the server's goroutines and the test share.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
