package httpapi_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
)

// TestConsoleListDetails is finding 10 of issue 29 for lists: an empty list says why — no
// objects yet, none matching the selector, or none this token may see — instead of "Nothing
// here that this token may see" for all three; the node list shows each node's org, linked.
// Seen failing before the fix.
func TestConsoleListDetails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	cc := newConsoleClient(t, b.srv.URL)
	cc.signIn(b.admin)

	_, _, page := cc.get("/ui/nodes")
	require.Contains(t, page, "No nodes yet.")
	require.NotContains(t, page, "Nothing here")
	_, _, page = cc.get("/ui/orgs")
	require.Contains(t, page, "No orgs yet.")

	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"acme"}}`)).status)
	require.Equal(t, 201, b.do(t, "POST", "/v1/nodes", b.admin, strings.NewReader(`{"metadata":{"name":"web01","labels":{"env":"prod"}},"spec":{"org":"acme"}}`)).status)
	_, _, page = cc.get("/ui/nodes")
	require.Regexp(t, `<th scope="col">Name</th><th scope="col">Org</th><th scope="col">Labels</th>`, page)
	require.Regexp(t, `<td><a href="/ui/nodes/web01">web01</a></td><td><a href="/ui/orgs/acme">acme</a></td><td>env=prod</td>`, page)
	_, _, page = cc.get("/ui/nodes?labelSelector=env%3Ddev")
	require.Contains(t, page, "No nodes match the selector.")
	_, _, page = cc.get("/ui/orgs/acme/groups")
	require.Contains(t, page, "No groups yet.")
	require.NotContains(t, page, `<th scope="col">Org</th>`, "a group's org is the page's")

	// A token that sees some nodes only: the empty list says so.
	_, secret, err := b.tokens.Create(ctx, auth.AuditActor{Actor: "test"}, auth.CreateParams{Name: "db-reader", Scopes: []string{"nodes:read:db*", "orgs:read:*"}})
	require.NoError(t, err)
	limited := newConsoleClient(t, b.srv.URL)
	limited.signIn(secret)
	_, _, page = limited.get("/ui/nodes")
	require.Contains(t, page, "No nodes this token may see.")
	require.NotContains(t, page, "web01")
	_, _, page = limited.get("/ui/nodes?labelSelector=env%3Dprod")
	require.Contains(t, page, "No nodes this token may see match the selector.")
}

// TestConsoleHistoryDiffKeepsIndentation is finding 10 of issue 29: the side-by-side diff of
// a pillar's history lost its indentation (each line sat in a <code>, whose white space HTML
// collapses). Each side of a line is now a <pre>, and the line keeps its leading spaces. Seen
// failing before the fix.
func TestConsoleHistoryDiffKeepsIndentation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, 201, b.do(t, "PUT", "/v1/pillars/global/app", b.admin, strings.NewReader(`{"tls":{"on":true,"ports":[443]}}`)).status)
	require.Equal(t, 200, b.do(t, "PUT", "/v1/pillars/global/app", b.admin, strings.NewReader(`{"tls":{"on":false,"ports":[443]}}`)).status)
	cc := newConsoleClient(t, b.srv.URL)
	cc.signIn(b.admin)
	_, _, page := cc.get("/ui/pillar?target=global&category=app")
	require.Regexp(t, `<tr class="changed"><td><pre class="line">    &#34;on&#34;: true,</pre></td><td><pre class="line"></pre></td></tr>`, page)
	require.Regexp(t, `<td><pre class="line">      443</pre></td><td><pre class="line">      443</pre></td>`, page)
	require.NotRegexp(t, regexp.MustCompile(`<table class="diff">(?s:.)*<code>`), page)
}

// TestConsoleProjectsEncrypted is finding 10 of issue 29: the projects page says which
// projects store their states encrypted. Seen failing before the fix (no such column).
func TestConsoleProjectsEncrypted(t *testing.T) {
	t.Parallel()
	b := setupStateKeys(t, testKeys(t))
	require.Equal(t, 201, b.do(t, "PUT", "/v1/projects/vault", b.admin, strings.NewReader(`{"encryption": true}`)).status)
	require.Equal(t, 201, b.do(t, "PUT", "/v1/projects/net", b.admin, strings.NewReader(`{}`)).status)
	cc := newConsoleClient(t, b.srv.URL)
	cc.signIn(b.admin)
	_, _, page := cc.get("/ui/state")
	require.Contains(t, page, `<th scope="col">Encrypted</th>`)
	require.Regexp(t, `<a href="/ui/state/net">net</a></td><td>0</td><td>no</td>`, page)
	require.Regexp(t, `<a href="/ui/state/vault">vault</a></td><td>0</td><td>yes</td>`, page)
}
