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

// TestConsoleKindReportFoldsEarlier (issue 29, finding 7): the console's kind page repeated,
// in every revision's report, the changes earlier revisions had decided, as if they were
// questions. A revision's table lists its own changes; the earlier ones are one line.
func TestConsoleKindReportFoldsEarlier(t *testing.T) {
	t.Parallel()
	b := setup(t)
	must := func(status int, method, path, body string) {
		t.Helper()
		r := b.do(t, method, path, b.admin, strings.NewReader(body))
		require.Equal(t, status, r.status, "%s %s: %s", method, path, r.body)
	}
	must(201, "POST", "/v1/orgs", `{"metadata":{"name":"acme"}}`)
	must(201, "PUT", "/v1/kinds/Db", `{"scope":"org","schema":{"type":"object","properties":{"size":{"type":"integer"}}}}`)
	must(201, "POST", "/v1/orgs/acme/resources/Db", `{"metadata":{"name":"main"},"spec":{"size":3}}`)
	must(201, "PUT", "/v1/kinds/Db", `{"schema":{"type":"object","properties":{"size":{"type":"number"}}},"acknowledge":[{"path":"/spec/size","rule":"readersUpgradedFirst"}]}`)
	must(201, "PUT", "/v1/kinds/Db", `{"schema":{"type":"object","properties":{"size":{"type":"number"},"tier":{"type":"string"}}}}`)

	cc := newConsoleClient(t, b.srv.URL)
	cc.signIn(b.admin)
	status, _, page := cc.get("/ui/kinds/Db")
	require.Equal(t, 200, status)
	sections := regexp.MustCompile(`(?s)<h3>Revision (\d+) .*?</section>`).FindAllStringSubmatch(page, -1)
	byRev := map[string]string{}
	for _, s := range sections {
		byRev[s[1]] = s[0]
	}
	require.Contains(t, byRev["2"], "type-widened", "revision 2 made the change")
	require.NotContains(t, byRev["3"], "type-widened", "revision 3 does not ask it again: %s", byRev["3"])
	require.Contains(t, byRev["3"], "1 earlier finding decided since revision 1")
	require.Contains(t, byRev["3"], "property-added")
}
