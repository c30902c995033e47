package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/auth"
)

// nodeIn is a node of org with labels, for the org list tests.
func nodeIn(name, org string, labels map[string]string) api.Object {
	return api.Object{Metadata: api.ObjectMeta{Name: name, Labels: labels}, Spec: json.RawMessage(fmt.Sprintf(`{"org":%q}`, org))}
}

// listNames reads GET path as token and returns the names of the page and its continue token.
func listNames(t *testing.T, b *testBundle, path, token string) ([]string, string) {
	t.Helper()
	r := b.do(t, http.MethodGet, path, token, nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	var l api.ObjectList
	require.NoError(t, json.Unmarshal(r.body, &l))
	names := []string{}
	for _, o := range l.Items {
		names = append(names, o.Metadata.Name)
	}
	return names, l.Continue
}

// TestNodeListByOrg is item 3 of issue 29: GET /v1/nodes?org=ORG keeps the nodes whose
// spec.org is ORG, in the query, composing with labelSelector, the token's name scopes and
// paging; an org the token may not read answers as a missing one (404, the same problem),
// and the parameter on a kind with no org reference is a 400 naming it, never ignored.
// Seen failing before the fix: ?org= was ignored and every org's nodes came back.
func TestNodeListByOrg(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	c, err := client.New(b.srv.URL, b.admin, nil)
	require.NoError(t, err)
	for _, o := range []string{"acme", "globex"} {
		_, err := c.Orgs().Create(ctx, api.Object{Metadata: api.ObjectMeta{Name: o}})
		require.NoError(t, err)
	}
	var acme, acmeProd []string
	for i := range 7 {
		env := []string{"prod", "dev"}[i%2]
		name := fmt.Sprintf("a%02d", i)
		_, err := c.Nodes().Create(ctx, nodeIn(name, "acme", map[string]string{"env": env}))
		require.NoError(t, err)
		acme = append(acme, name)
		if env == "prod" {
			acmeProd = append(acmeProd, name)
		}
		// Interleaved by name with acme's, so a page boundary falls among both.
		_, err = c.Nodes().Create(ctx, nodeIn(fmt.Sprintf("a%02dx", i), "globex", map[string]string{"env": env}))
		require.NoError(t, err)
	}

	names, cont := listNames(t, b, "/v1/nodes?org=acme", b.admin)
	require.Equal(t, acme, names)
	require.Empty(t, cont)
	names, _ = listNames(t, b, "/v1/nodes?org=acme&labelSelector="+url.QueryEscape("env=prod"), b.admin)
	require.Equal(t, acmeProd, names)
	names, _ = listNames(t, b, "/v1/nodes?org=globex&labelSelector="+url.QueryEscape("env=dev"), b.admin)
	require.Equal(t, []string{"a01x", "a03x", "a05x"}, names)
	all, _ := listNames(t, b, "/v1/nodes", b.admin)
	require.Len(t, all, 14, "without ?org= every org's nodes, as before")

	// Paging: the pages of two hold only acme's nodes and together are all of them.
	var paged []string
	path := "/v1/nodes?org=acme&limit=2"
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		names, cont := listNames(t, b, path, b.admin)
		require.LessOrEqual(t, len(names), 2)
		paged = append(paged, names...)
		if cont == "" {
			break
		}
		// A continue token belongs to its org's list: another org's list refuses it.
		r := b.do(t, http.MethodGet, "/v1/nodes?org=globex&limit=2&continue="+url.QueryEscape(cont), b.admin, nil)
		require.Equal(t, http.StatusBadRequest, r.status, string(r.body))
		path = "/v1/nodes?org=acme&limit=2&continue=" + url.QueryEscape(cont)
	}
	require.Equal(t, acme, paged)

	// A token that reads nodes a0* and org acme only: its own names, in the org it may read.
	_, limited, err := b.tokens.Create(ctx, auth.AuditActor{Actor: "test"}, auth.CreateParams{Name: "acme-reader",
		Scopes: []string{"nodes:read:a0*", "orgs:read:acme"}})
	require.NoError(t, err)
	names, _ = listNames(t, b, "/v1/nodes?org=acme", limited)
	require.Equal(t, acme, names)
	// globex exists but the token may not read it: the same 404 as an org that does not exist.
	forbidden := problem(t, b.do(t, http.MethodGet, "/v1/nodes?org=globex", limited, nil), http.StatusNotFound, "not-found")
	missing := problem(t, b.do(t, http.MethodGet, "/v1/nodes?org=globez", limited, nil), http.StatusNotFound, "not-found")
	require.Equal(t, `Org "globex" not found`, forbidden.Detail)
	require.Equal(t, `Org "globez" not found`, missing.Detail)
	problem(t, b.do(t, http.MethodGet, "/v1/nodes?org=globez", b.admin, nil), http.StatusNotFound, "not-found")
	problem(t, b.do(t, http.MethodGet, "/v1/nodes?org=globex&watch=true", limited, nil), http.StatusNotFound, "not-found")

	// Kinds without an org reference refuse the parameter instead of ignoring it.
	p := problem(t, b.do(t, http.MethodGet, "/v1/orgs?org=acme", b.admin, nil), http.StatusBadRequest, "validation")
	require.Contains(t, p.Detail, "Org objects belong to no org")
	require.Equal(t, "org", p.Errors[0].Field)
	p = problem(t, b.do(t, http.MethodGet, "/v1/orgs/acme/groups?org=acme", b.admin, nil), http.StatusBadRequest, "validation")
	require.Contains(t, p.Detail, "/v1/orgs/{org}/groups")
	require.Equal(t, "org", p.Errors[0].Field)

	// The Go client's ListOptions.Org sends it.
	l, err := c.Nodes().ListAll(ctx, client.ListOptions{Org: "globex", LabelSelector: "env=prod"})
	require.NoError(t, err)
	require.Len(t, l.Items, 4)
	for _, o := range l.Items {
		require.True(t, strings.HasSuffix(o.Metadata.Name, "x"), o.Metadata.Name)
	}
}

// TestNodeWatchByOrg: a watch of ?org=acme starts with acme's nodes, sends the changes of
// acme's nodes only, a node moving out of acme as DELETED and one moving in as ADDED, also
// when resumed from a resourceVersion before the move. Seen failing before the fix (every
// org's nodes and changes were sent).
func TestNodeWatchByOrg(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := watchSetup(t, time.Hour, time.Minute)
	for _, o := range []string{"acme", "globex"} {
		_, err := b.admin.Orgs().Create(ctx, api.Object{Metadata: api.ObjectMeta{Name: o}})
		require.NoError(t, err)
	}
	nodes := b.admin.Nodes()
	_, err := nodes.Create(ctx, nodeIn("web01", "acme", map[string]string{"env": "prod"}))
	require.NoError(t, err)
	_, err = nodes.Create(ctx, nodeIn("db01", "globex", nil))
	require.NoError(t, err)
	start, err := nodes.List(ctx, client.ListOptions{Org: "acme"})
	require.NoError(t, err)

	w, err := nodes.Watch(ctx, client.WatchOptions{Org: "acme"})
	require.NoError(t, err)
	defer w.Close()
	require.Equal(t, "ADDED web01", eventOf(next(t, w)))

	_, err = nodes.Create(ctx, nodeIn("db02", "globex", nil)) // elsewhere: not sent
	require.NoError(t, err)
	_, err = nodes.Patch(ctx, "db01", []byte(`{"metadata":{"labels":{"touched":"yes"}}}`))
	require.NoError(t, err)
	_, err = nodes.Patch(ctx, "web01", []byte(`{"metadata":{"labels":{"env":"dev"}}}`))
	require.NoError(t, err)
	require.Equal(t, "MODIFIED web01", eventOf(next(t, w)))
	_, err = nodes.Patch(ctx, "web01", []byte(`{"spec":{"org":"globex"}}`))
	require.NoError(t, err)
	require.Equal(t, "DELETED web01", eventOf(next(t, w)), "moving out of the org")
	_, err = nodes.Patch(ctx, "db01", []byte(`{"spec":{"org":"acme"}}`))
	require.NoError(t, err)
	require.Equal(t, "ADDED db01", eventOf(next(t, w)), "moving into the org")
	_, err = nodes.Patch(ctx, "web01", []byte(`{"metadata":{"labels":{"env":"prod"}}}`)) // now in globex
	require.NoError(t, err)
	_, err = nodes.Create(ctx, nodeIn("app01", "acme", nil))
	require.NoError(t, err)
	require.Equal(t, "ADDED app01", eventOf(next(t, w)), "a change in another org is not sent")

	// Resumed from before: the same story from the log, with a selector on top.
	w2, err := nodes.Watch(ctx, client.WatchOptions{Org: "acme", ResourceVersion: start.ResourceVersion, LabelSelector: "env"})
	require.NoError(t, err)
	defer w2.Close()
	require.Equal(t, "MODIFIED web01", eventOf(next(t, w2)))
	require.Equal(t, "DELETED web01", eventOf(next(t, w2)))
	_, err = nodes.Patch(ctx, "app01", []byte(`{"metadata":{"labels":{"env":"prod"}}}`))
	require.NoError(t, err)
	require.Equal(t, "ADDED app01", eventOf(next(t, w2)), "db01 has no env label; app01 gained one")
}
