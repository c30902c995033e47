package httpapi_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// alertRE is the console's error box.
var alertRE = regexp.MustCompile(`(?s)<div class="error" role="alert">(.*?)</div>`)

// TestConsoleErrorsOnce (issue 29, finding 8): a refusal showed its sentence twice — as the
// headline and again as a bullet (": …" when the problem named no field). Each sentence is
// shown once: the entry that repeats the headline is folded into it, its field first.
func TestConsoleErrorsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, "PUT", "/v1/pillars/global/app", b.admin, strings.NewReader(`{"port":80}`))
	require.Equal(t, 201, r.status, string(r.body))
	r = b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"acme"}}`))
	require.Equal(t, 201, r.status, string(r.body))
	cc := newConsoleClient(t, b.srv.URL)
	cc.signIn(b.admin)

	// A pillar that is not JSON: the problem names no field.
	_, _, page := cc.get("/ui/pillar?target=global&category=app")
	etag := regexp.MustCompile(`name="etag" value="([^"]+)"`).FindStringSubmatch(page)[1]
	status, _, page := cc.post("/ui/pillar", url.Values{"csrf": {cc.csrf(page)}, "target": {"global"}, "category": {"app"},
		"etag": {strings.ReplaceAll(etag, "&#34;", `"`)}, "data": {`{"port":`}})
	require.Equal(t, http.StatusBadRequest, status)
	alert := alertRE.FindStringSubmatch(page)
	require.NotNil(t, alert, page)
	require.NotContains(t, alert[1], "<li>", "the headline is not repeated as a bullet: %s", alert[1])
	require.NotContains(t, alert[1], "invalid request:", alert[1])

	// A label the API refuses: the problem names the field; it leads the one line.
	_, _, page = cc.get("/ui/orgs/acme")
	rv := regexp.MustCompile(`name="resourceVersion" value="([^"]+)"`).FindStringSubmatch(page)
	require.NotNil(t, rv, page)
	status, _, page = cc.post("/ui/orgs/acme", url.Values{"csrf": {cc.csrf(page)}, "resourceVersion": {rv[1]}, "labels": {"Bad Key!=x"}})
	require.Contains(t, []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, status)
	alert = alertRE.FindStringSubmatch(page)
	require.NotNil(t, alert, page)
	require.NotContains(t, alert[1], "<li>", "the headline is not repeated as a bullet: %s", alert[1])
	require.Contains(t, alert[1], "/metadata/labels/Bad Key!: ", "the field leads the line: %s", alert[1])
}
