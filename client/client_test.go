package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/testserver"
)

// The client's tests and examples talk to a real strata API on a throwaway database
// (internal/testserver), as a program using the package does.
func TestMain(m *testing.M) { pgtest.Main(m) }

func newClient(t *testing.T) (*client.Client, *testserver.Server) {
	t.Helper()
	s := testserver.Start(t)
	c, err := client.New(s.URL, s.Token, nil)
	require.NoError(t, err)
	return c, s
}

func node(name, org string, labels map[string]string) client.Object {
	return client.Object{Metadata: client.ObjectMeta{Name: name, Labels: labels}, Spec: json.RawMessage(`{"org":"` + org + `"}`)}
}

// TestErrorsAreTyped: every refusal is an *Error carrying the status and the server's
// problem document, and the Is… helpers tell them apart.
func TestErrorsAreTyped(t *testing.T) {
	t.Parallel()
	c, s := newClient(t)
	ctx := context.Background()

	_, err := c.Orgs().Get(ctx, "nothing")
	require.True(t, client.IsNotFound(err), "%v", err)
	var e *client.Error
	require.True(t, errors.As(err, &e))
	require.Equal(t, 404, e.Status)
	require.Equal(t, "https://strata.dev/problems/not-found", e.Problem.Type)
	require.Equal(t, "/v1/orgs/nothing", e.Problem.Instance)
	require.Contains(t, err.Error(), "(HTTP 404)")

	_, err = c.Orgs().Create(ctx, client.Object{Metadata: client.ObjectMeta{Name: "acme"}})
	require.NoError(t, err)
	_, err = c.Orgs().Create(ctx, client.Object{Metadata: client.ObjectMeta{Name: "acme"}})
	require.True(t, client.IsConflict(err), "%v", err)

	// A field's refusal names the field by JSON pointer.
	_, err = c.Orgs().Create(ctx, client.Object{Metadata: client.ObjectMeta{Name: "bad", Labels: map[string]string{"Bad Key!": "x"}}})
	require.True(t, errors.As(err, &e))
	require.Equal(t, 422, e.Status)
	require.Equal(t, "/metadata/labels/Bad Key!", e.Problem.Errors[0].Field)
	require.True(t, strings.HasPrefix(err.Error(), "/metadata/labels/Bad Key!: "), err.Error())

	// A stale resourceVersion is a conflict, not an overwrite.
	cur, err := c.Orgs().Get(ctx, "acme")
	require.NoError(t, err)
	cur.Metadata.Labels = map[string]string{"env": "prod"}
	_, err = c.Orgs().Replace(ctx, cur)
	require.NoError(t, err)
	cur.Metadata.Labels = map[string]string{"env": "dev"}
	_, err = c.Orgs().Replace(ctx, cur)
	require.True(t, client.IsConflict(err), "%v", err)

	bad, err := client.New(s.URL, "strata_nottherightone0000000000000000000000000", nil)
	require.NoError(t, err)
	_, err = bad.Orgs().List(ctx, client.ListOptions{})
	require.True(t, client.IsUnauthorized(err), "%v", err)

	_, reader, err := s.Tokens.Create(ctx, auth.AuditActor{Actor: "test"}, auth.CreateParams{Name: "reader", Scopes: []string{"orgs:read:acme"}})
	require.NoError(t, err)
	rc, err := client.New(s.URL, reader, nil)
	require.NoError(t, err)
	_, err = rc.Orgs().Get(ctx, "acme")
	require.NoError(t, err)
	err = rc.Orgs().Delete(ctx, "acme", client.DeleteOptions{})
	require.True(t, client.IsForbidden(err), "%v", err)
	require.Contains(t, err.Error(), "orgs:delete", "the refusal names the scope it needs")

	// A Terraform lock conflict is a 423 whose holder LockOf reads.
	_, err = c.ProjectPut(ctx, "net")
	require.NoError(t, err)
	_, err = c.StateLock(ctx, "net", "default", client.LockInfo{ID: "one", Who: "alice@ci", Operation: "OperationTypeApply"})
	require.NoError(t, err)
	_, err = c.StateLock(ctx, "net", "default", client.LockInfo{ID: "two", Who: "bob@laptop"})
	require.True(t, client.IsLocked(err), "%v", err)
	l, ok := client.LockOf(err)
	require.True(t, ok)
	require.Equal(t, "net", l.Project)
	require.Equal(t, "default", l.Workspace)
	require.Equal(t, "alice@ci", l.Holder.Who)
	require.Contains(t, err.Error(), "net/default is locked by alice@ci (lock ID one")
}

// TestListFollowsContinue: a list's pages, followed by their continue tokens, hold every
// matching object once and in name order; ListAll does the same in one call.
func TestListFollowsContinue(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t)
	ctx := context.Background()
	_, err := c.Orgs().Create(ctx, client.Object{Metadata: client.ObjectMeta{Name: "acme"}})
	require.NoError(t, err)
	var want []string
	for i := 0; i < 7; i++ {
		name := fmt.Sprintf("web%02d", i)
		env := "prod"
		if i%3 == 0 {
			env = "dev"
		} else {
			want = append(want, name)
		}
		_, err := c.Nodes().Create(ctx, node(name, "acme", map[string]string{"env": env}))
		require.NoError(t, err)
	}
	var got []string
	opts := client.ListOptions{Limit: 2, LabelSelector: "env=prod"}
	pages := 0
	for {
		page, err := c.Nodes().List(ctx, opts)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Items), 2)
		require.NotEmpty(t, page.ResourceVersion)
		for _, o := range page.Items {
			got = append(got, o.Metadata.Name)
		}
		pages++
		if page.Continue == "" {
			break
		}
		opts.Continue = page.Continue
	}
	require.Equal(t, want, got)
	require.Equal(t, 2, pages)

	all, err := c.Nodes().ListAll(ctx, client.ListOptions{Limit: 2, LabelSelector: "env=prod"})
	require.NoError(t, err)
	require.Len(t, all.Items, len(want))

	// A continue token belongs to its list: reused with another selector it is refused.
	first, err := c.Nodes().List(ctx, client.ListOptions{Limit: 1, LabelSelector: "env=prod"})
	require.NoError(t, err)
	_, err = c.Nodes().List(ctx, client.ListOptions{Limit: 1, LabelSelector: "env=dev", Continue: first.Continue})
	var e *client.Error
	require.True(t, errors.As(err, &e), "%v", err)
	require.Equal(t, 400, e.Status)
	require.Equal(t, "continue", e.Problem.Errors[0].Field)
}

// TestWatchResumesAfterDisconnect: a watch closed (a dropped connection) and started again
// from the last resourceVersion it received gets exactly the changes made in between, in
// order, none twice.
func TestWatchResumesAfterDisconnect(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.Orgs().Create(ctx, client.Object{Metadata: client.ObjectMeta{Name: "acme"}})
	require.NoError(t, err)
	list, err := c.Nodes().List(ctx, client.ListOptions{})
	require.NoError(t, err)

	w, err := c.Nodes().Watch(ctx, client.WatchOptions{ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	_, err = c.Nodes().Create(ctx, node("web01", "acme", nil))
	require.NoError(t, err)
	ev := nextChange(t, w)
	require.Equal(t, client.EventAdded, ev.Type)
	require.Equal(t, "web01", ev.Object.Metadata.Name)
	last := ev.Object.Metadata.ResourceVersion
	require.NoError(t, w.Close()) // the connection drops

	// Changes while nobody watches.
	_, err = c.Nodes().Patch(ctx, "web01", []byte(`{"metadata":{"labels":{"env":"prod"}}}`))
	require.NoError(t, err)
	_, err = c.Nodes().Create(ctx, node("web02", "acme", nil))
	require.NoError(t, err)
	require.NoError(t, c.Nodes().Delete(ctx, "web01", client.DeleteOptions{}))

	w, err = c.Nodes().Watch(ctx, client.WatchOptions{ResourceVersion: last})
	require.NoError(t, err)
	defer w.Close()
	var seen []string
	for len(seen) < 3 {
		ev := nextChange(t, w)
		seen = append(seen, ev.Type+" "+ev.Object.Metadata.Name)
	}
	require.Equal(t, []string{"MODIFIED web01", "ADDED web02", "DELETED web01"}, seen)
}

// nextChange returns the next event that is not a BOOKMARK.
func nextChange(t *testing.T, w *client.Watcher) client.Event {
	t.Helper()
	for {
		ev, err := w.Next()
		require.NoError(t, err)
		if ev.Type != client.EventBookmark {
			return ev
		}
	}
}

// TestRetriesOn503WithRetryAfter: a 503 with a Retry-After is sent again after the wait the
// server asks for, up to Retries times; a longer wait than MaxRetryWait, a POST the server
// may have half done, or no Retry-After at all return the 503 at once.
func TestRetriesOn503WithRetryAfter(t *testing.T) {
	t.Parallel()
	c, s := newClient(t)
	ctx := context.Background()
	_, err := c.Orgs().Create(ctx, client.Object{Metadata: client.ObjectMeta{Name: "acme"}})
	require.NoError(t, err)

	// Two refusals, then the real answer: the GET succeeds after two waits of a second.
	s.FailNext(2, "1", "connections")
	before, start := s.Requests(), time.Now()
	o, err := c.Orgs().Get(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, "acme", o.Metadata.Name)
	require.Equal(t, int64(3), s.Requests()-before)
	require.GreaterOrEqual(t, time.Since(start), 2*time.Second, "it waited as Retry-After asked")

	// A PUT's body is sent again whole.
	s.FailNext(1, "0", "shutting-down")
	o.Metadata.Labels = map[string]string{"env": "prod"}
	o, err = c.Orgs().Replace(ctx, o)
	require.NoError(t, err)
	require.Equal(t, "prod", o.Metadata.Labels["env"])

	// More refusals than Retries: the last 503 is returned, with its reason.
	c.Retries = 1
	s.FailNext(2, "0", "connections")
	before = s.Requests()
	_, err = c.Orgs().Get(ctx, "acme")
	var e *client.Error
	require.True(t, errors.As(err, &e), "%v", err)
	require.Equal(t, 503, e.Status)
	require.Equal(t, "connections", e.Problem.Reason)
	require.Equal(t, int64(2), s.Requests()-before)
	c.Retries = client.DefaultRetries

	for _, tc := range []struct {
		name       string
		retryAfter string
		reason     string
		call       func() error
	}{
		{"a wait longer than MaxRetryWait", "10", "read-only", func() error { _, err := c.Orgs().Get(ctx, "acme"); return err }},
		{"no Retry-After", "", "connections", func() error { _, err := c.Orgs().Get(ctx, "acme"); return err }},
		{"a POST that may have been half done", "0", "unavailable", func() error {
			_, err := c.Orgs().Create(ctx, client.Object{Metadata: client.ObjectMeta{Name: "beta"}})
			return err
		}},
	} {
		s.FailNext(1, tc.retryAfter, tc.reason)
		before, start := s.Requests(), time.Now()
		err := tc.call()
		require.True(t, errors.As(err, &e), "%s: %v", tc.name, err)
		require.Equal(t, 503, e.Status, tc.name)
		require.Equal(t, int64(1), s.Requests()-before, "%s: not sent again", tc.name)
		require.Less(t, time.Since(start), 5*time.Second, tc.name)
	}
	// A write whose outcome is unknown is never sent again, not even an idempotent method:
	// applied, a PUT carrying its resourceVersion would come back 409 for the caller's own
	// change. The 503 says so (Problem.Outcome) and the caller reads before retrying.
	for name, call := range map[string]func() error{
		"PUT": func() error { _, err := c.Orgs().Replace(ctx, o); return err },
		"DELETE": func() error {
			return c.Orgs().Delete(ctx, "acme", client.DeleteOptions{})
		},
	} {
		s.FailNextOutcomeUnknown(1, "0")
		before := s.Requests()
		err := call()
		require.True(t, errors.As(err, &e), "%s: %v", name, err)
		require.Equal(t, 503, e.Status, name)
		require.Equal(t, "unknown", e.Problem.Outcome, name)
		require.Equal(t, int64(1), s.Requests()-before, "%s: an unknown outcome is not sent again", name)
	}

	// A POST the server refused before doing anything (connections) is sent again.
	s.FailNext(1, "0", "connections")
	_, err = c.Orgs().Create(ctx, client.Object{Metadata: client.ObjectMeta{Name: "beta"}})
	require.NoError(t, err)

	// Retries stop when the context ends.
	s.FailNext(5, "5", "connections")
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = c.Orgs().Get(short, "acme")
	require.Error(t, err)
	require.Less(t, time.Since(start), 4*time.Second)
	s.FailNext(0, "", "")
}

// TestPillarSecretFlag: a secret category's row says so (Pillar.Secret), as the server's
// answer does; the client's Pillar had no such member and dropped it.
func TestPillarSecretFlag(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t)
	ctx := context.Background()
	_, err := c.PillarCategorySet(ctx, "db", client.PillarCategoryRequest{Secret: true})
	require.NoError(t, err)
	global := client.PillarTarget{Global: true}
	p, err := c.PillarSet(ctx, global, "db", json.RawMessage(`{"password":"hunter2"}`), "")
	require.NoError(t, err)
	require.True(t, p.Secret)
	p, err = c.PillarGet(ctx, global, "db")
	require.NoError(t, err)
	require.True(t, p.Secret)
	require.JSONEq(t, `{"password":"hunter2"}`, string(p.Data), "the admin token may read secrets")

	_, err = c.PillarSet(ctx, global, "app", json.RawMessage(`{"port":80}`), "")
	require.NoError(t, err)
	p, err = c.PillarGet(ctx, global, "app")
	require.NoError(t, err)
	require.False(t, p.Secret)
}

// TestRawRequests: Do and DoRaw reach what the package does not wrap, with the same errors.
func TestRawRequests(t *testing.T) {
	t.Parallel()
	c, s := newClient(t)
	ctx := context.Background()
	body, hdr, err := c.DoRaw(ctx, client.Request{Method: http.MethodGet, Path: "/v1/openapi.json"})
	require.NoError(t, err)
	require.Equal(t, "application/json", hdr.Get("Content-Type"))
	require.Contains(t, string(body), `"openapi": "3.1.0"`)
	var v struct {
		Version string `json:"version"`
	}
	_, err = c.Do(ctx, client.Request{Method: http.MethodGet, Path: "/version"}, &v)
	require.NoError(t, err)
	require.Equal(t, "test", v.Version)
	_, err = c.Do(ctx, client.Request{Method: http.MethodGet, Path: "/v1/nothing"}, nil)
	require.True(t, client.IsNotFound(err), "%v", err)

	resp, err := http.Get(s.URL + "/healthz")
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.NoError(t, c.Health(ctx))
}
