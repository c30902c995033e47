package main_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// chromium finds Debian's headless browser; .ci/run installs it (apt-get install -y
// chromium). Without it the console's browser tests fail saying so: they never skip.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("the console's browser tests need Chromium: apt-get install -y chromium (.ci/run installs it)")
	return ""
}

// browser is a headless Chromium tab; a JavaScript dialog (an alert an injected script would
// raise) fails the test.
type browser struct {
	t    *testing.T
	ctx  context.Context
	shot string // directory for screenshots ($STRATA_CONSOLE_SCREENSHOTS), or ""
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // the test may run as root, which Chromium's sandbox refuses
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	b := &browser{t: t, ctx: ctx, shot: os.Getenv("STRATA_CONSOLE_SCREENSHOTS")}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			t.Errorf("a page opened a JavaScript dialog (%q): something was not escaped", ev.Message)
		}
	}()
	return b
}

func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	require.NoError(b.t, chromedp.Do(b.ctx, actions...))
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(b.t, err, sel)
	return s
}

func (b *browser) count(sel string) int {
	b.t.Helper()
	n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+strconvQuote(sel)+`).length`))
	require.NoError(b.t, err)
	return n
}

func strconvQuote(s string) string { q, _ := json.Marshal(s); return string(q) }

func (b *browser) location() string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Location())
	require.NoError(b.t, err)
	return s
}

// screenshot saves the page as name.png when screenshots are asked for (docs/console.md
// shows them).
func (b *browser) screenshot(name string) {
	b.t.Helper()
	if b.shot == "" {
		return
	}
	img, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100)) // 100: PNG
	require.NoError(b.t, err)
	require.NoError(b.t, os.WriteFile(filepath.Join(b.shot, name+".png"), img, 0o644))
}

func visible(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(sel))
}
func click(sel string) chromedp.Action[chromedp.Void] { return chromedp.Click(chromedp.CSS(sel)) }
func setValue(sel, v string) chromedp.Action[chromedp.Void] {
	return chromedp.SetValue(chromedp.CSS(sel), v)
}

// submit clicks a form's button and waits for the page it leads to to load (waiting for an
// element could find it on the page being left).
func (b *browser) submit(sel string) {
	b.t.Helper()
	_, err := chromedp.Run(b.ctx, chromedp.WaitEvent(page.LoadEventFired, nil, click(sel)))
	require.NoError(b.t, err, sel)
}

func (b *browser) signIn(base, token string) {
	b.t.Helper()
	b.do(chromedp.Navigate(base+"/ui/nodes"), visible("#token"))
	require.Contains(b.t, b.location(), "/ui/login?next=%2Fui%2Fnodes", "no session: the sign-in page, coming back to the page asked for")
	b.do(chromedp.SendKeys(chromedp.CSS("#token"), token))
	b.submit("#signin")
	b.do(visible("table.objects"))
	require.True(b.t, strings.HasSuffix(b.location(), "/ui/nodes"), b.location())
}

// TestConsoleInBrowser walks issue 20's flows in a real browser against the real binary:
// sign in; filter nodes by a label selector (a bad one shows the parser's message); see a
// node created meanwhile appear live; open a node and read which layer set a pillar value and
// what it overrode; an annotation holding a script renders as text; force-unlock a Terraform
// lock from the state page (after the typed confirmation; audited); an org-scoped token sees
// its org and gets the 404 page for another's; every page carries the CSP header; sign out
// ends the session.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	c := newCLIEnv(t)
	base := c.s.url
	token := strings.TrimPrefix(c.env[1], "STRATA_TOKEN=")
	c.run("org", "create", "acme")
	c.run("org", "create", "beta")
	c.run("node", "create", "web01", "--org", "acme", "--label", "role=web", "--label", "env=prod")
	c.run("node", "create", "db01", "--org", "acme", "--label", "role=db")
	c.run("node", "create", "b01", "--org", "beta", "--label", "role=web")
	c.run("node", "annotate", "web01", "note=<script>alert(1)</script><img src=x onerror=alert(2)>")
	c.run("group", "--org", "acme", "create", "web", "--node-selector", "role=web", "--priority", "5")
	c.run("pillar", "set", "app", "--global", "-f", c.write("g.json", `{"port": 80, "debug": false}`))
	c.run("pillar", "set", "app", "--org", "acme", "--group", "web", "-f", c.write("w.json", `{"port": 8080, "tls": {"on": true}}`))
	c.run("pillar", "set", "app", "--node", "web01", "-f", c.write("n.json", `{"debug": true}`))
	c.run("project", "create", "net")
	c.run("state", "push", "net", "default", c.write("s1.json", `{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"l-1","outputs":{"pw":{"value":"hunter2","type":"string","sensitive":true}},"resources":[{"mode":"managed","type":"terraform_data","name":"a","provider":"provider[\"terraform.io/builtin/terraform\"]","instances":[{"schema_version":0,"attributes":{"id":"1","input":"x"},"sensitive_attributes":[]}]}]}`))
	c.run("state", "push", "net", "default", c.write("s2.json", `{"version":4,"terraform_version":"1.11.4","serial":2,"lineage":"l-1","outputs":{"pw":{"value":"hunter3","type":"string","sensitive":true}},"resources":[{"mode":"managed","type":"terraform_data","name":"a","provider":"provider[\"terraform.io/builtin/terraform\"]","instances":[{"schema_version":0,"attributes":{"id":"1","input":"y"},"sensitive_attributes":[]}]}]}`))
	c.run("state", "lock", "net", "default")

	// Every console answer carries the policy that forbids inline script.
	resp, err := http.Get(base + "/ui/login")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'", resp.Header.Get("Content-Security-Policy"))
	// The API never takes the console's cookie: /v1 still needs a token.
	req, _ := http.NewRequest("GET", base+"/v1/nodes", nil)
	req.AddCookie(&http.Cookie{Name: "strata_session", Value: "anything"})
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 401, resp.StatusCode)

	b := newBrowser(t)
	b.do(chromedp.Navigate(base+"/ui/login"), visible("#token"))
	b.screenshot("login")
	b.signIn(base, token)
	b.screenshot("nodes")

	// Filter by a selector; a bad one shows the parser's message with its position.
	b.do(setValue("#labelSelector", "role=web,env=prod"))
	b.submit("#filter")
	b.do(visible("table.objects"))
	rows := b.text("table.objects tbody")
	require.Contains(t, rows, "web01")
	require.NotContains(t, rows, "db01")
	b.do(setValue("#labelSelector", "role in (web"))
	b.submit("#filter")
	b.do(visible(".error"))
	require.Contains(t, b.text(".error"), "position 12", "the parser's message, with the position")

	// Live: a node created while the list is open appears without a reload.
	b.do(chromedp.Navigate(base+"/ui/nodes?labelSelector=role%3Dweb"), visible("table.objects"))
	b.do(visible("caption.live"))
	time.Sleep(500 * time.Millisecond) // the page's watch is open
	c.run("node", "create", "web02", "--org", "acme", "--label", "role=web")
	b.do(visible(`a[href="/ui/nodes/web02"]`))

	// A node's merged pillar: which layer set each value and what it overrode.
	b.do(chromedp.Navigate(base+"/ui/nodes/web01"), visible(".pillar"))
	require.Equal(t, "group/acme/web · app", strings.TrimSpace(b.text(`tr[data-path="/port"] td.setby`)))
	require.Equal(t, "global · app", strings.TrimSpace(b.text(`tr[data-path="/port"] td.overrode`)))
	require.Equal(t, "node/web01 · app", strings.TrimSpace(b.text(`tr[data-path="/debug"] td.setby`)))
	require.Contains(t, b.text(".layers ol"), "global · app")
	// The annotation is text, not markup.
	require.Contains(t, b.text("dl.meta"), "<script>alert(1)</script><img src=x onerror=alert(2)>")
	require.Zero(t, b.count("main script, main img"))
	b.screenshot("node")

	// Editing with a stale resourceVersion: "changed meanwhile", nothing saved.
	c.run("node", "label", "web01", "tier=gold")
	b.do(setValue("#edit-labels", "role=web\nenv=prod\nowner=ops"))
	b.submit("#save")
	b.do(visible(".error"))
	require.Contains(t, b.text(".error"), "Changed meanwhile")
	b.do(chromedp.Navigate(base+"/ui/nodes/web01"), visible("#edit-labels"))
	b.do(setValue("#edit-labels", "role=web\nenv=prod\nowner=ops"))
	b.submit("#save")
	b.do(visible(".notice"))
	require.Contains(t, b.text("#labels"), "owner=ops")

	// Terraform state: the lock, the versions, a diff with the sensitive output masked, and a
	// force-unlock behind its confirmation.
	b.do(chromedp.Navigate(base+"/ui/state/net/default?a=1&b=2"), visible("#diff"))
	diff := b.text("#diff")
	require.Contains(t, diff, "terraform_data.a")
	require.Contains(t, diff, "(sensitive)")
	require.NotContains(t, diff, "hunter")
	require.Contains(t, b.text("#lock"), "locked")
	b.screenshot("state")
	b.do(setValue("#confirm", "wrong"))
	b.submit("#force-unlock")
	b.do(visible(".error"))
	require.Contains(t, b.text(".error"), "nothing was changed")
	b.do(setValue("#confirm", "default"))
	b.submit("#force-unlock")
	b.do(visible(".notice"))
	require.Contains(t, b.text("#lock"), "Not locked")
	var audit struct {
		Items []struct{ Action, Target string } `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.run("-o", "json", "audit", "--action", "state.")), &audit))
	require.Equal(t, "state.force-unlock", audit.Items[0].Action)

	// A pillar category page: JSON with its history, side by side.
	b.do(chromedp.Navigate(base+"/ui/pillar?target=node%2Fweb01&category=app"), visible("#pillar-data"))
	b.screenshot("pillar")
	// The history's diff keeps the JSON's indentation as rendered (issue 29, finding 10).
	require.Equal(t, `  "debug": true`, b.text(`section.change table.diff tbody tr:nth-child(2) td:nth-child(2)`))
	b.do(chromedp.Navigate(base+"/ui/kinds/Node"), visible("section.change"))
	b.screenshot("kind")
	b.do(chromedp.Navigate(base+"/ui/audit"), visible("main table"))
	require.Contains(t, b.text("main table"), "console.login")
	b.screenshot("audit")

	// Sign out: the session ends; the console asks to sign in again.
	b.submit("#logout")
	b.do(visible("#token"))
	b.do(chromedp.Navigate(base+"/ui/nodes"), visible("#token"))

	// An org-scoped token: its org, not another's.
	var tok struct {
		Secret string `json:"secret"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.run("-o", "json", "token", "create", "acme-viewer",
		"--scope", "orgs:read:acme", "--scope", "nodes:read:web*", "--scope", "groups:read:acme", "--scope", "pillars:read:*", "--scope", "pillars:render:node/web*")), &tok))
	b.signIn(base, tok.Secret)
	rows = b.text("table.objects tbody")
	require.Contains(t, rows, "web01")
	require.NotContains(t, rows, "db01")
	b.do(chromedp.Navigate(base+"/ui/orgs"), visible("table.objects"))
	require.Contains(t, b.text("table.objects tbody"), "acme")
	require.NotContains(t, b.text("table.objects tbody"), "beta")
	b.do(chromedp.Navigate(base+"/ui/orgs/beta"), visible(".error"))
	require.Equal(t, "Not found", b.text("h1"))
	b.do(chromedp.Navigate(base+"/ui/nodes/web01"), visible(".pillar"))
	require.Zero(t, b.count("#save"), "a read-only token gets no edit button")

	// Revoking the token ends its session at once.
	var toks struct {
		Items []struct{ ID, Name string } `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.run("-o", "json", "token", "list")), &toks))
	for _, tk := range toks.Items {
		if tk.Name == "acme-viewer" {
			c.run("token", "revoke", tk.ID)
		}
	}
	b.do(chromedp.Navigate(base+"/ui/nodes"), visible("#token"))
}
