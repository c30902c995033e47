package httpapi

// The web console (issue 20): server-rendered pages under /ui, served from the binary.
//
// The console has no authority of its own. A signed-in browser holds a session (package
// auth: in the database, so any replica serves it; it ends with its token), and every read
// and write a page makes is a request to this same API, run in-process with the session's
// principal (consoleCall): the route table authorizes it exactly as it would a Bearer
// request, so the console shows what the token may read (anything else is the 404 page) and
// offers only the changes the table would allow (mayCall probes the table without running
// the handler). The /v1 API itself never accepts the cookie.
//
// Safety: every form carries the session's CSRF token (the sign-in form a cookie-bound one);
// every answer carries Content-Security-Policy: default-src 'self' — no inline script or style
// anywhere, the one script and style sheet are files under /ui/static; html/template escapes
// every value; no secret is put in a page or a URL (the token is posted once, in the body).

import (
	"bytes"
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/resource"
)

//go:embed ui
var uiFS embed.FS

const (
	sessionCookie   = "strata_session"
	loginCSRFCookie = "strata_login_csrf"
)

// consoleKey carries, in the context of an in-process API request, the principal of the
// console session that made it. Clients cannot set context values, so only consoleCall can.
type consoleKey struct{}

// uiPages are the page templates, each the layout with its own "content".
var uiPages = func() map[string]*template.Template {
	funcs := template.FuncMap{
		"json":  prettyJSON,
		"since": func(t *time.Time) string { return sinceText(t) },
		"time": func(t time.Time) string {
			return t.UTC().Format("2006-01-02 15:04:05 UTC")
		},
		"join":    strings.Join,
		"earlier": earlierFindings,
		"labels":  labelText,
		"query":   url.QueryEscape,
		"path":    url.PathEscape,
	}
	base := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(uiFS, "ui/layout.html"))
	pages := map[string]*template.Template{}
	files, err := fs.Glob(uiFS, "ui/*.html")
	if err != nil {
		panic(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "ui/"), ".html")
		if name == "layout" {
			continue
		}
		pages[name] = template.Must(template.Must(base.Clone()).ParseFS(uiFS, f))
	}
	return pages
}()

// uiPage is what every page template gets.
type uiPage struct {
	Title   string
	User    string // the token's name; empty on the sign-in page
	CSRF    string
	Error   string
	Fields  []api.FieldError
	Notice  string
	Section string // the navigation entry to mark
	Data    any
}

// uiHandler serves a page for a signed-in session.
type uiHandler func(w http.ResponseWriter, r *http.Request, s auth.Session) error

// uiHeaders are on every console answer.
func uiHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// ui adapts a page handler: it resolves the session (no session: to the sign-in page, with
// the page to come back to), checks a POST's CSRF token, and renders what the handler
// returns as an error as an HTML page.
func (a *API) ui(h uiHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uiHeaders(w)
		r.Body = http.MaxBytesReader(w, r.Body, a.maxBody)
		s, err := a.session(r)
		if err != nil {
			if errors.Is(err, auth.ErrNoSession) {
				next := r.URL.Path
				if r.Method == http.MethodGet && r.URL.RawQuery != "" {
					next += "?" + r.URL.RawQuery
				}
				http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(next), http.StatusSeeOther)
				return
			}
			a.uiError(w, r, nil, err)
			return
		}
		if slot, ok := r.Context().Value(principalSlot{}).(*principalHolder); ok {
			slot.p = s.Principal
		}
		if r.Method == http.MethodPost && subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(s.CSRF)) != 1 {
			a.uiError(w, r, &s, fault.New(fault.KindForbidden, "the form's CSRF token does not match this session: reload the page and try again"))
			return
		}
		ctx := auth.WithAuditActor(auth.WithPrincipal(r.Context(), s.Principal), auditActor(r, s.Principal))
		if err := h(w, r.WithContext(ctx), s); err != nil {
			a.uiError(w, r, &s, err)
		}
	})
}

// session resolves the request's session cookie.
func (a *API) session(r *http.Request) (auth.Session, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return auth.Session{}, auth.ErrNoSession
	}
	return a.tokens.LookupSession(r.Context(), c.Value)
}

// render writes a page.
func (a *API) render(w http.ResponseWriter, status int, name string, p uiPage) error {
	t := uiPages[name]
	if t == nil {
		return fmt.Errorf("no console page %q", name)
	}
	p.Error, p.Fields = onceEach(p.Error, p.Fields)
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", p); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, err := buf.WriteTo(w)
	return err
}

// page renders a page of a signed-in session.
func (a *API) uiShow(w http.ResponseWriter, s auth.Session, name, section, title string, data any, notice string) error {
	return a.render(w, http.StatusOK, name, uiPage{Title: title, User: s.Principal.Name, CSRF: s.CSRF, Section: section, Data: data, Notice: notice})
}

// uiError renders an error as a page: what the token may not read is the same 404 page as
// what does not exist, as in the API.
func (a *API) uiError(w http.ResponseWriter, r *http.Request, s *auth.Session, err error) {
	status, title, msg := http.StatusInternalServerError, "Something went wrong", "the server could not render this page; the log says why"
	var fields []api.FieldError
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		status, msg, fields = ae.status, ae.problem.Detail, ae.problem.Errors
	case fault.KindOf(err) != fault.KindInternal:
		fe := classify(err)
		status, msg = kinds[fe.Kind].status, fe.Detail
	default:
		a.logger.Error("console page", "path", r.URL.Path, "err", err)
	}
	switch status {
	case http.StatusNotFound, http.StatusForbidden:
		if !(status == http.StatusForbidden && strings.Contains(msg, "CSRF")) {
			status, title, msg, fields = http.StatusNotFound, "Not found", "There is nothing here that this token may see.", nil
		} else {
			title = "Refused"
		}
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusConflict, http.StatusPreconditionFailed:
		title = "Refused"
	}
	p := uiPage{Title: title, Error: msg, Fields: fields}
	if s != nil {
		p.User, p.CSRF = s.Principal.Name, s.CSRF
	}
	if err := a.render(w, status, "error", p); err != nil {
		a.logger.Error("console error page", "err", err)
	}
}

// apiError is a non-2xx answer of an in-process API request.
type apiError struct {
	status  int
	problem api.Problem
}

func (e *apiError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.problem.Detail) }

// bufferWriter collects an in-process answer.
type bufferWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferWriter) Header() http.Header { return b.header }
func (b *bufferWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}
func (b *bufferWriter) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

// consoleSessionKey carries, beside consoleKey, the console session an in-process request
// was made in: a long request (a watch stream) ends with the session, not only with its
// token (watchList).
type consoleSessionKey struct{}

// consoleRequest is an in-process API request with the session's principal.
func consoleRequest(r *http.Request, s auth.Session, method, path string, body []byte, hdr ...string) *http.Request {
	ctx := context.WithValue(context.WithValue(r.Context(), consoleKey{}, s.Principal), consoleSessionKey{}, s)
	req, err := http.NewRequestWithContext(ctx, method, path, bytes.NewReader(body))
	if err != nil {
		panic(err) // paths are built by the console from escaped parts
	}
	req.RemoteAddr = r.RemoteAddr
	req.Header.Set("X-Request-Id", w3RequestID(r))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return req
}

func w3RequestID(r *http.Request) string {
	if id, ok := r.Context().Value(requestIDKey{}).(string); ok {
		return id
	}
	return ""
}

// consoleCall runs an API request in-process as the session's principal and decodes a JSON
// answer into out (when not nil). A non-2xx answer is an *apiError.
func (a *API) consoleCall(r *http.Request, s auth.Session, method, path string, body []byte, out any, hdr ...string) (http.Header, error) {
	rec := &bufferWriter{header: http.Header{}}
	a.mux.ServeHTTP(rec, consoleRequest(r, s, method, path, body, hdr...))
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.status >= 300 {
		e := &apiError{status: rec.status}
		_ = json.Unmarshal(rec.body.Bytes(), &e.problem)
		if e.problem.Detail == "" {
			e.problem.Detail = http.StatusText(rec.status)
		}
		return rec.header, e
	}
	if out != nil && rec.body.Len() > 0 {
		if raw, ok := out.(*[]byte); ok {
			*raw = rec.body.Bytes()
			return rec.header, nil
		}
		dec := json.NewDecoder(&rec.body)
		dec.UseNumber()
		if err := dec.Decode(out); err != nil {
			return rec.header, fmt.Errorf("console: decoding %s %s: %w", method, path, err)
		}
	}
	return rec.header, nil
}

// mayCall reports whether the route table would let the session make the request: the
// route's authorization runs (mayProbe), its handler does not. Pages show a button only when
// this says yes.
func (a *API) mayCall(r *http.Request, s auth.Session, method, path string) bool {
	verdict := new(bool)
	req := consoleRequest(r.WithContext(context.WithValue(r.Context(), probeKey{}, verdict)), s, method, path, nil)
	a.probe.ServeHTTP(&bufferWriter{header: http.Header{}}, req)
	return *verdict
}

// probeKey carries mayCall's verdict slot.
type probeKey struct{}

// listAllKey marks a probe that asks whether a list shows everything (listsAll).
type listAllKey struct{}

// listsAll reports whether the list at path shows the session's token every object there
// is: a list authorized by its org (a group list) or by a scope that names every object, not
// one its scopes filter to some names.
func (a *API) listsAll(r *http.Request, s auth.Session, path string) bool {
	verdict := new(bool)
	ctx := context.WithValue(context.WithValue(r.Context(), probeKey{}, verdict), listAllKey{}, true)
	a.probe.ServeHTTP(&bufferWriter{header: http.Header{}}, consoleRequest(r.WithContext(ctx), s, "GET", path, nil))
	return *verdict
}

// emptyListText says why a list page is empty, in the kind's words.
func emptyListText(rp resourcePath, selector, all bool) string {
	plural := map[string]string{"Org": "orgs", "Node": "nodes", "Group": "groups"}[rp.Kind]
	if plural == "" {
		plural = rp.Kind + " objects"
	}
	switch {
	case all && selector:
		return "No " + plural + " match the selector."
	case all:
		return "No " + plural + " yet."
	case selector:
		return "No " + plural + " this token may see match the selector."
	}
	return "No " + plural + " this token may see."
}

// probeMux is the route table with every handler replaced by a recorder of the
// authorization's verdict: the same patterns, so the same route and path values.
func (a *API) probeMux() *http.ServeMux {
	mux := http.NewServeMux()
	for _, rt := range a.table() {
		if rt.salt {
			continue
		}
		rt := rt
		mux.Handle(rt.pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			verdict, _ := r.Context().Value(probeKey{}).(*bool)
			p, _ := r.Context().Value(consoleKey{}).(*auth.Principal)
			if verdict == nil || p == nil {
				return
			}
			switch rt.source {
			case fromBody, byHandler:
				// The name is in a body the probe does not have, or the handler decides:
				// offer the button only to a token that may do it for any name.
				*verdict = p.ListFilter(rt.family, rt.verb).All || p.IsAdmin()
			case listed:
				r2, err := rt.authorize(r, p)
				*verdict = err == nil && (r.Context().Value(listAllKey{}) == nil || listFilter(r2).All)
			default:
				_, err := rt.authorize(r, p)
				*verdict = err == nil
			}
		}))
	}
	return mux
}

// uiRoutes registers the console's pages (called from routes).
func (a *API) uiRoutes(mux *http.ServeMux) {
	static, _ := fs.Sub(uiFS, "ui/static")
	files := http.StripPrefix("/ui/static/", http.FileServerFS(static))
	mux.Handle("GET /ui/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uiHeaders(w)
		w.Header().Set("Cache-Control", "public, max-age=300")
		files.ServeHTTP(w, r)
	}))
	mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	mux.Handle("GET /ui/login", http.HandlerFunc(a.uiLoginForm))
	mux.Handle("POST /ui/login", http.HandlerFunc(a.uiLogin))
	mux.Handle("POST /ui/logout", a.ui(a.uiLogout))
	mux.Handle("GET /ui/{$}", a.ui(a.uiHome))
	mux.Handle("GET /ui/pillar", a.ui(a.uiPillar))
	mux.Handle("POST /ui/pillar", a.ui(a.uiPillarSave))
	mux.Handle("GET /ui/state", a.ui(a.uiProjects))
	mux.Handle("GET /ui/state/{project}", a.ui(a.uiWorkspaces))
	mux.Handle("GET /ui/state/{project}/{workspace}", a.ui(a.uiWorkspace))
	mux.Handle("POST /ui/state/{project}/{workspace}/force-unlock", a.ui(a.uiForceUnlock))
	mux.Handle("GET /ui/kinds", a.ui(a.uiKinds))
	mux.Handle("GET /ui/kinds/{kind}", a.ui(a.uiKind))
	mux.Handle("POST /ui/kinds/{kind}", a.ui(a.uiKindDryRun))
	mux.Handle("GET /ui/audit", a.ui(a.uiAudit))
	mux.Handle("GET /ui/watch/{path...}", a.ui(a.uiWatch))
	mux.Handle("GET /ui/{path...}", a.ui(a.uiResource))
	mux.Handle("POST /ui/{path...}", a.ui(a.uiResourceSave))
}

// --- sign-in and sign-out ---

func (a *API) uiLoginForm(w http.ResponseWriter, r *http.Request) {
	uiHeaders(w)
	csrf := auth.NewCSRF()
	http.SetCookie(w, &http.Cookie{Name: loginCSRFCookie, Value: csrf, Path: "/ui/login", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: a.overTLS(r), MaxAge: 3600})
	_ = a.render(w, http.StatusOK, "login", uiPage{Title: "Sign in", CSRF: csrf, Data: map[string]string{"Next": safeNext(r.URL.Query().Get("next"))}})
}

// safeNext keeps a post-sign-in destination inside the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/"
	}
	return next
}

func (a *API) uiLogin(w http.ResponseWriter, r *http.Request) {
	uiHeaders(w)
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	next := safeNext(r.PostFormValue("next"))
	fail := func(status int, msg string) {
		csrf := auth.NewCSRF()
		http.SetCookie(w, &http.Cookie{Name: loginCSRFCookie, Value: csrf, Path: "/ui/login", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: a.overTLS(r), MaxAge: 3600})
		_ = a.render(w, status, "login", uiPage{Title: "Sign in", CSRF: csrf, Error: msg, Data: map[string]string{"Next": next}})
	}
	c, err := r.Cookie(loginCSRFCookie)
	if err != nil || subtle.ConstantTimeCompare([]byte(c.Value), []byte(r.PostFormValue("csrf"))) != 1 {
		fail(http.StatusForbidden, "The sign-in form expired; sign in again.")
		return
	}
	p, err := a.tokens.Verify(r.Context(), strings.TrimSpace(r.PostFormValue("token")))
	if err != nil {
		fail(http.StatusUnauthorized, "That is not a valid token (unknown, expired or revoked).")
		return
	}
	secret, _, err := a.tokens.CreateSession(r.Context(), auditActor(r, p), p, auth.SessionTTL)
	if err != nil {
		a.uiError(w, r, nil, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCSRFCookie, Value: "", Path: "/ui/login", MaxAge: -1})
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: secret, Path: "/ui/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: a.overTLS(r), MaxAge: int(auth.SessionTTL.Seconds())})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (a *API) uiLogout(w http.ResponseWriter, r *http.Request, s auth.Session) error {
	if c, err := r.Cookie(sessionCookie); err == nil {
		if err := a.tokens.EndSession(r.Context(), auditActor(r, s.Principal), c.Value); err != nil {
			return err
		}
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/ui/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: a.overTLS(r)})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
	return nil
}

// --- home ---

func (a *API) uiHome(w http.ResponseWriter, r *http.Request, s auth.Session) error {
	var kinds struct {
		Items []api.KindInfo `json:"items"`
	}
	_, _ = a.consoleCall(r, s, "GET", "/v1/kinds", nil, &kinds)
	var user []api.KindInfo
	for _, k := range kinds.Items {
		if !k.Builtin {
			user = append(user, k)
		}
	}
	return a.uiShow(w, s, "home", "home", "strata", map[string]any{"Kinds": user}, "")
}

// --- resources: one generic page for every kind, as the API has one generic path ---

// resourcePath is a console path under /ui that names API objects: a list (Collection) or
// one object, of a built-in kind or a user kind.
type resourcePath struct {
	API        string // the API path: /v1/…
	Collection bool
	Kind       string // Org, Node, Group or a user kind
	Org        string
	Name       string
}

// parseResourcePath reads the path after /ui/.
func parseResourcePath(p string) (resourcePath, bool) {
	seg := strings.Split(strings.Trim(p, "/"), "/")
	for _, s := range seg {
		if s == "" || s == "." || s == ".." {
			return resourcePath{}, false
		}
	}
	esc := func(parts ...string) string {
		out := make([]string, len(parts))
		for i, s := range parts {
			out[i] = url.PathEscape(s)
		}
		return "/v1/" + strings.Join(out, "/")
	}
	switch {
	case len(seg) == 1 && seg[0] == "orgs":
		return resourcePath{API: esc("orgs"), Collection: true, Kind: "Org"}, true
	case len(seg) == 2 && seg[0] == "orgs":
		return resourcePath{API: esc("orgs", seg[1]), Kind: "Org", Name: seg[1]}, true
	case len(seg) == 1 && seg[0] == "nodes":
		return resourcePath{API: esc("nodes"), Collection: true, Kind: "Node"}, true
	case len(seg) == 2 && seg[0] == "nodes":
		return resourcePath{API: esc("nodes", seg[1]), Kind: "Node", Name: seg[1]}, true
	case len(seg) == 3 && seg[0] == "orgs" && seg[2] == "groups":
		return resourcePath{API: esc("orgs", seg[1], "groups"), Collection: true, Kind: "Group", Org: seg[1]}, true
	case len(seg) == 4 && seg[0] == "orgs" && seg[2] == "groups":
		return resourcePath{API: esc("orgs", seg[1], "groups", seg[3]), Kind: "Group", Org: seg[1], Name: seg[3]}, true
	case len(seg) == 2 && seg[0] == "resources":
		return resourcePath{API: esc("resources", seg[1]), Collection: true, Kind: seg[1]}, true
	case len(seg) == 3 && seg[0] == "resources":
		return resourcePath{API: esc("resources", seg[1], seg[2]), Kind: seg[1], Name: seg[2]}, true
	case len(seg) == 4 && seg[0] == "orgs" && seg[2] == "resources":
		return resourcePath{API: esc("orgs", seg[1], "resources", seg[3]), Collection: true, Kind: seg[3], Org: seg[1]}, true
	case len(seg) == 5 && seg[0] == "orgs" && seg[2] == "resources":
		return resourcePath{API: esc("orgs", seg[1], "resources", seg[3], seg[4]), Kind: seg[3], Org: seg[1], Name: seg[4]}, true
	}
	return resourcePath{}, false
}

// uiLink is the console path of an object of a list.
func (rp resourcePath) itemLink(o api.Object) string {
	return "/ui" + strings.TrimPrefix(rp.API, "/v1") + "/" + url.PathEscape(o.Metadata.Name)
}

type listView struct {
	Path     resourcePath
	Selector string
	Items    []listItem
	Next     string
	WatchURL string
	CanAdd   bool
	// ShowOrg: the kind's objects belong to an org through a reference (a node's spec.org,
	// resource.Kind.OrgMember), shown in an Org column.
	ShowOrg bool
	// Empty says why an empty page is empty: no objects yet, none matching the selector, or
	// none this token may see (its scopes name some objects only).
	Empty string
}

type listItem struct {
	Name, Link, Labels, RV string
	Org, OrgLink           string
}

type objectView struct {
	Path       resourcePath
	Object     api.Object
	Labels     string
	Annots     string
	Spec       string
	Status     string
	CanWrite   bool
	Pillar     *pillarView
	Members    []api.Member
	Categories []categoryLink
	Saved      bool
	// Kinds are the org's lists of objects of user kinds (an org's page).
	Kinds []categoryLink
	// Reload is set when a save was refused because the object changed meanwhile.
	Reload bool
}

type categoryLink struct{ Category, Link string }

func (a *API) uiResource(w http.ResponseWriter, r *http.Request, s auth.Session) error {
	rp, ok := parseResourcePath(r.PathValue("path"))
	if !ok {
		return fault.NotFound("no such console page")
	}
	if rp.Collection {
		return a.uiList(w, r, s, rp)
	}
	v, err := a.objectView(r, s, rp)
	if err != nil {
		return err
	}
	notice := ""
	if r.URL.Query().Get("saved") != "" {
		notice = "Saved."
	}
	return a.uiShow(w, s, "object", sectionOf(rp), rp.Kind+" "+rp.Name, v, notice)
}

func sectionOf(rp resourcePath) string {
	switch rp.Kind {
	case "Org", "Group":
		return "orgs"
	case "Node":
		return "nodes"
	}
	return "kinds"
}

func (a *API) uiList(w http.ResponseWriter, r *http.Request, s auth.Session, rp resourcePath) error {
	q := r.URL.Query()
	v := listView{Path: rp, Selector: q.Get("labelSelector")}
	apiQ := url.Values{"limit": {"50"}}
	if v.Selector != "" {
		apiQ.Set("labelSelector", v.Selector)
	}
	if c := q.Get("continue"); c != "" {
		apiQ.Set("continue", c)
	}
	var list api.ObjectList
	if _, err := a.consoleCall(r, s, "GET", rp.API+"?"+apiQ.Encode(), nil, &list); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.status == http.StatusBadRequest {
			// A selector the API's parser refuses: the page stays, with the parser's message
			// (it names the position).
			p := uiPage{Title: rp.Kind + " list", User: s.Principal.Name, CSRF: s.CSRF, Section: sectionOf(rp), Data: v, Error: ae.problem.Detail}
			return a.render(w, http.StatusBadRequest, "list", p)
		}
		return err
	}
	member := ""
	if k, err := a.resources.Kind(r.Context(), rp.Kind); err == nil {
		member = k.OrgMember
	}
	v.ShowOrg = member != ""
	for _, o := range list.Items {
		it := listItem{Name: o.Metadata.Name, Link: rp.itemLink(o), Labels: labelText(o.Metadata.Labels), RV: o.Metadata.ResourceVersion}
		if v.ShowOrg {
			if it.Org = resource.SpecString(o, member); it.Org != "" {
				it.OrgLink = "/ui/orgs/" + url.PathEscape(it.Org)
			}
		}
		v.Items = append(v.Items, it)
	}
	if len(v.Items) == 0 {
		v.Empty = emptyListText(rp, v.Selector != "", a.listsAll(r, s, rp.API))
	}
	if list.Continue != "" {
		nq := url.Values{"continue": {list.Continue}}
		if v.Selector != "" {
			nq.Set("labelSelector", v.Selector)
		}
		v.Next = r.URL.Path + "?" + nq.Encode()
	}
	wq := url.Values{"resourceVersion": {list.ResourceVersion}}
	if v.Selector != "" {
		wq.Set("labelSelector", v.Selector)
	}
	v.WatchURL = "/ui/watch" + strings.TrimPrefix(rp.API, "/v1") + "?" + wq.Encode()
	return a.uiShow(w, s, "list", sectionOf(rp), rp.Kind+" list", v, "")
}

func (a *API) objectView(r *http.Request, s auth.Session, rp resourcePath) (objectView, error) {
	v := objectView{Path: rp, Saved: r.URL.Query().Get("saved") != ""}
	if _, err := a.consoleCall(r, s, "GET", rp.API, nil, &v.Object); err != nil {
		return v, err
	}
	v.Labels, v.Annots = labelLines(v.Object.Metadata.Labels), labelLines(v.Object.Metadata.Annotations)
	v.Spec, v.Status = prettyJSON(v.Object.Spec), prettyJSON(v.Object.Status)
	v.CanWrite = a.mayCall(r, s, "PUT", rp.API)
	var cats struct {
		Items []struct {
			Category string `json:"category"`
		} `json:"items"`
	}
	target := ""
	switch rp.Kind {
	case "Node":
		target = "node/" + rp.Name
		pv, err := a.pillarView(r, s, rp.Name)
		if err == nil {
			v.Pillar = pv
		}
	case "Org":
		target = "org/" + rp.Name
		var kinds struct {
			Items []api.KindInfo `json:"items"`
		}
		if _, err := a.consoleCall(r, s, "GET", "/v1/kinds", nil, &kinds); err == nil {
			for _, k := range kinds.Items {
				if !k.Builtin && k.Scope == "org" {
					v.Kinds = append(v.Kinds, categoryLink{k.Name, "/ui/orgs/" + url.PathEscape(rp.Name) + "/resources/" + url.PathEscape(k.Name)})
				}
			}
		}
	case "Group":
		target = "group/" + rp.Org + "/" + rp.Name
		var members api.MemberList
		if _, err := a.consoleCall(r, s, "GET", rp.API+"/members", nil, &members); err == nil {
			v.Members = members.Items
		}
	}
	if target != "" {
		if _, err := a.consoleCall(r, s, "GET", pillarAPIPath(target, ""), nil, &cats); err == nil {
			for _, c := range cats.Items {
				v.Categories = append(v.Categories, categoryLink{c.Category, "/ui/pillar?" + url.Values{"target": {target}, "category": {c.Category}}.Encode()})
			}
		}
	}
	return v, nil
}

// uiResourceSave replaces an object with the form's labels, annotations and spec, with the
// resourceVersion the page showed as precondition: a 409 says it changed meanwhile.
func (a *API) uiResourceSave(w http.ResponseWriter, r *http.Request, s auth.Session) error {
	rp, ok := parseResourcePath(r.PathValue("path"))
	if !ok || rp.Collection {
		return fault.NotFound("no such console page")
	}
	labels, err := parseLabelLines("labels", r.PostFormValue("labels"))
	if err != nil {
		return a.objectWithError(w, r, s, rp, http.StatusBadRequest, err.Error(), nil)
	}
	annots, err := parseLabelLines("annotations", r.PostFormValue("annotations"))
	if err != nil {
		return a.objectWithError(w, r, s, rp, http.StatusBadRequest, err.Error(), nil)
	}
	obj := map[string]any{"metadata": map[string]any{"name": rp.Name, "labels": labels, "annotations": annots, "resourceVersion": r.PostFormValue("resourceVersion")}}
	if spec := strings.TrimSpace(r.PostFormValue("spec")); spec != "" {
		obj["spec"] = json.RawMessage(spec)
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return a.objectWithError(w, r, s, rp, http.StatusBadRequest, "spec is not JSON: "+err.Error(), nil)
	}
	if _, err := a.consoleCall(r, s, "PUT", rp.API, body, nil); err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			switch ae.status {
			case http.StatusConflict:
				return a.objectWithError(w, r, s, rp, http.StatusConflict, "Changed meanwhile: someone else changed this "+rp.Kind+" after you loaded the page, so nothing was saved. Reload to see the current version, then make your change again.", nil)
			case http.StatusBadRequest, http.StatusUnprocessableEntity:
				return a.objectWithError(w, r, s, rp, ae.status, ae.problem.Detail, ae.problem.Errors)
			}
		}
		return err
	}
	http.Redirect(w, r, r.URL.Path+"?saved=1", http.StatusSeeOther)
	return nil
}

func (a *API) objectWithError(w http.ResponseWriter, r *http.Request, s auth.Session, rp resourcePath, status int, msg string, fields []api.FieldError) error {
	v, err := a.objectView(r, s, rp)
	if err != nil {
		return err
	}
	v.Reload = status == http.StatusConflict
	return a.render(w, status, "object", uiPage{Title: rp.Kind + " " + rp.Name, User: s.Principal.Name, CSRF: s.CSRF, Section: sectionOf(rp), Data: v, Error: msg, Fields: fields})
}

// uiWatch streams a watch of a list the page shows (NDJSON, the API's own): the page's
// script refreshes the table when an event arrives.
func (a *API) uiWatch(w http.ResponseWriter, r *http.Request, s auth.Session) error {
	rp, ok := parseResourcePath(r.PathValue("path"))
	if !ok || !rp.Collection {
		return fault.NotFound("no such watch")
	}
	q := r.URL.Query()
	wq := url.Values{"watch": {"true"}}
	for _, k := range []string{"labelSelector", "resourceVersion"} {
		if v := q.Get(k); v != "" {
			wq.Set(k, v)
		}
	}
	a.mux.ServeHTTP(w, consoleRequest(r, s, "GET", rp.API+"?"+wq.Encode(), nil))
	return nil
}

// --- pillars: the merged tree with where each leaf came from, and category pages ---

type pillarView struct {
	Leaves []pillarLeaf
	Layers []string
	Empty  bool
}

type pillarLeaf struct {
	Path       string
	Depth      int
	Key        string
	Value      string
	SetBy      string
	SetByLink  string
	Overridden []string
	Branch     bool
}

func (a *API) pillarView(r *http.Request, s auth.Session, node string) (*pillarView, error) {
	var ex struct {
		Pillar  json.RawMessage `json:"pillar"`
		Explain []struct {
			// Path is a leaf's whole pointer; an answer past its path budget front-codes them
			// instead: the previous leaf's first Shared bytes followed by Rest.
			Path   *string `json:"path"`
			Shared int     `json:"shared"`
			Rest   string  `json:"rest"`
			SetBy  struct {
				Target, Category string
			} `json:"setBy"`
			Overridden []struct {
				Target, Category string
			} `json:"overridden"`
		} `json:"explain"`
	}
	if _, err := a.consoleCall(r, s, "GET", "/v1/nodes/"+url.PathEscape(node)+"/pillar?explain=true", nil, &ex); err != nil {
		return nil, err
	}
	var pillarData map[string]any
	dec := json.NewDecoder(bytes.NewReader(ex.Pillar))
	dec.UseNumber()
	if err := dec.Decode(&pillarData); err != nil {
		return nil, fmt.Errorf("console: decoding the pillar of %s: %w", node, err)
	}
	v := &pillarView{Empty: len(pillarData) == 0}
	seen := map[string]bool{}
	var layers []string
	add := func(l string) {
		if !seen[l] {
			seen[l] = true
			layers = append(layers, l)
		}
	}
	// Where each leaf came from goes into a tree of reference tokens, walked below beside the
	// pillar: keyed by whole paths, it would hold a long key once per leaf below it.
	root := &srcNode{}
	at := []srcLevel{{node: root}} // the previous leaf's tokens, with their pointers' lengths
	for _, e := range ex.Explain {
		sv := &src{by: e.SetBy.Target + " · " + e.SetBy.Category, link: "/ui/pillar?" + url.Values{"target": {e.SetBy.Target}, "category": {e.SetBy.Category}}.Encode()}
		for _, o := range e.Overridden {
			sv.over = append(sv.over, o.Target+" · "+o.Category)
			add(o.Target + " · " + o.Category)
		}
		add(sv.by)
		shared, rest := e.Shared, e.Rest
		if e.Path != nil {
			shared, rest = 0, *e.Path
		}
		keep, found := slices.BinarySearchFunc(at, shared, func(l srcLevel, end int) int { return l.end - end })
		if !found || !strings.HasPrefix(rest, "/") {
			return nil, fmt.Errorf("console: the explanation of %s does not continue its previous path", node)
		}
		at = at[:keep+1]
		for _, tok := range strings.Split(rest[1:], "/") {
			at = append(at, srcLevel{node: at[len(at)-1].node.child(tok), end: at[len(at)-1].end + 1 + len(tok)})
		}
		at[len(at)-1].node.src = sv
		// A value below the tree's last level is shown whole at that level, with the
		// layer that set its first leaf.
		if len(at) > maxTreeLevels+1 && at[maxTreeLevels].node.src == nil {
			at[maxTreeLevels].node.src = sv
		}
	}
	rank := func(l string) int {
		switch {
		case strings.HasPrefix(l, "global"):
			return 0
		case strings.HasPrefix(l, "org/"):
			return 1
		case strings.HasPrefix(l, "group/"):
			return 2
		}
		return 3
	}
	sort.SliceStable(layers, func(i, j int) bool { return rank(layers[i]) < rank(layers[j]) })
	v.Layers = layers
	// Every row carries its path (data-path) while the page's paths add up to at most twice
	// the pillar or consolePathBudget, whichever is more; rows after that carry none, so a long
	// key above many leaves cannot make the page (key length × leaves) bytes.
	budget := max(consolePathBudget, 2*len(ex.Pillar))
	ptr := make([]byte, 0, 256)
	var walk func(m map[string]any, at *srcNode, depth int)
	walk = func(m map[string]any, at *srcNode, depth int) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			tok := strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
			mark := len(ptr)
			ptr = append(append(ptr, '/'), tok...)
			var p string
			if len(ptr) <= budget {
				p, budget = string(ptr), budget-len(ptr)
			} else {
				budget = -1
			}
			sub := at.get(tok)
			child, isMap := m[k].(map[string]any)
			if isMap && len(child) > 0 && depth+1 < maxTreeLevels {
				v.Leaves = append(v.Leaves, pillarLeaf{Path: p, Depth: depth, Key: k, Branch: true})
				walk(child, sub, depth+1)
			} else {
				var sv src
				if sub != nil && sub.src != nil {
					sv = *sub.src
				}
				v.Leaves = append(v.Leaves, pillarLeaf{Path: p, Depth: depth, Key: k, Value: compactJSON(m[k]), SetBy: sv.by, SetByLink: sv.link, Overridden: sv.over})
			}
			ptr = ptr[:mark]
		}
	}
	walk(pillarData, root, 0)
	return v, nil
}

// consolePathBudget is the least the node page may spend on its rows' paths (data-path).
const consolePathBudget = 64 << 10

// src is where one leaf of a node's pillar came from, as the node page shows it.
type src struct {
	by, link string
	over     []string
}

// srcNode is one reference token of the explained pillar: where its leaf came from (src), or
// its members by escaped token.
type srcNode struct {
	src      *src
	children map[string]*srcNode
}

// srcLevel is one token of the path the explanations are at and the byte length of the
// pointer ending there.
type srcLevel struct {
	node *srcNode
	end  int
}

// child is n's member tok, added when missing.
func (n *srcNode) child(tok string) *srcNode {
	if n.children == nil {
		n.children = map[string]*srcNode{}
	}
	c := n.children[tok]
	if c == nil {
		c = &srcNode{}
		n.children[tok] = c
	}
	return c
}

// get is n's member tok, nil when n or the member is missing.
func (n *srcNode) get(tok string) *srcNode {
	if n == nil {
		return nil
	}
	return n.children[tok]
}

// maxTreeLevels is how many levels of a node's pillar the console's tree shows; an object
// below them is one row holding its compact JSON. Every row carries its path, so a tree
// unfolded all the way down would repeat a deep value's path on each of its levels: a value
// nested n levels deep would make a page of O(n²) bytes.
const maxTreeLevels = 16

// pillarAPIPath is the API path of a target's pillar rows (category "": the list).
func pillarAPIPath(target, category string) string {
	parts := strings.Split(target, "/")
	var base string
	switch {
	case target == "global":
		base = "/v1/pillars/global"
	case len(parts) == 2 && parts[0] == "org":
		base = "/v1/orgs/" + url.PathEscape(parts[1]) + "/pillars"
	case len(parts) == 3 && parts[0] == "group":
		base = "/v1/orgs/" + url.PathEscape(parts[1]) + "/groups/" + url.PathEscape(parts[2]) + "/pillars"
	case len(parts) == 2 && parts[0] == "node":
		base = "/v1/nodes/" + url.PathEscape(parts[1]) + "/pillars"
	default:
		return ""
	}
	if category != "" {
		base += "/" + url.PathEscape(category)
	}
	return base
}

type pillarRowView struct {
	Target, Category, Data, ETag string
	Revision                     int64
	CanWrite                     bool
	// Secret: the category is secret; Masked: this session sees "(secret)" in place of its
	// values (saving them back is refused by the API, so the page says why).
	Secret, Masked bool
	History        []historyView
}

type historyView struct {
	ID        int64
	Revision  int64
	Actor, At string
	// ImportedBy and ImportedAt mark an entry a sync import added: Actor and At are then
	// what the imported stream claimed, and the page says so.
	ImportedBy, ImportedAt string
	Old, New               string
	Deleted                bool
	Rows                   []diffLine
	CanRestore             bool
}

type diffLine struct {
	Old, New string
	Changed  bool
}

func (a *API) pillarRow(r *http.Request, s auth.Session, target, category string) (pillarRowView, error) {
	v := pillarRowView{Target: target, Category: category}
	path := pillarAPIPath(target, category)
	if path == "" || category == "" {
		return v, fault.NotFound("no such pillar row")
	}
	var row struct {
		Data     json.RawMessage `json:"data"`
		Revision int64           `json:"revision"`
		Secret   bool            `json:"secret"`
	}
	hdr, err := a.consoleCall(r, s, "GET", path, nil, &row)
	if err != nil {
		return v, err
	}
	v.Data, v.Revision, v.ETag = prettyJSON(row.Data), row.Revision, hdr.Get("ETag")
	v.Secret = row.Secret
	v.Masked = row.Secret && !s.Principal.Allows("pillars", "read-secrets", target)
	v.CanWrite = a.mayCall(r, s, "PUT", path)
	var hist struct {
		Items []struct {
			ID         int64           `json:"id"`
			Revision   int64           `json:"revision"`
			Old        json.RawMessage `json:"old"`
			New        json.RawMessage `json:"new"`
			Actor      string          `json:"actor"`
			At         time.Time       `json:"at"`
			ImportedBy string          `json:"importedBy"`
			ImportedAt *time.Time      `json:"importedAt"`
		} `json:"items"`
	}
	if _, err := a.consoleCall(r, s, "GET", path+"/history?limit=20", nil, &hist); err != nil {
		return v, err
	}
	for _, h := range hist.Items {
		hv := historyView{ID: h.ID, Revision: h.Revision, Actor: h.Actor, At: h.At.UTC().Format("2006-01-02 15:04:05 UTC"),
			Old: prettyJSON(h.Old), New: prettyJSON(h.New), Deleted: string(h.New) == "null" || len(h.New) == 0, CanRestore: v.CanWrite}
		if h.ImportedBy != "" {
			hv.ImportedBy = h.ImportedBy
			if h.ImportedAt != nil {
				hv.ImportedAt = h.ImportedAt.UTC().Format("2006-01-02 15:04:05 UTC")
			}
		}
		hv.Rows = sideBySide(hv.Old, hv.New)
		v.History = append(v.History, hv)
	}
	return v, nil
}

func (a *API) uiPillar(w http.ResponseWriter, r *http.Request, s auth.Session) error {
	q := r.URL.Query()
	v, err := a.pillarRow(r, s, q.Get("target"), q.Get("category"))
	if err != nil {
		return err
	}
	notice := ""
	if q.Get("saved") != "" {
		notice = "Saved."
	}
	return a.uiShow(w, s, "pillar", "nodes", "Pillar "+v.Target+" · "+v.Category, v, notice)
}

// uiPillarSave writes a category's JSON with the ETag the page showed (If-Match: 412 when the
// row changed meanwhile), or restores a history entry.
func (a *API) uiPillarSave(w http.ResponseWriter, r *http.Request, s auth.Session) error {
	target, category := r.PostFormValue("target"), r.PostFormValue("category")
	path := pillarAPIPath(target, category)
	if path == "" || category == "" {
		return fault.NotFound("no such pillar row")
	}
	var err error
	if id := r.PostFormValue("restore"); id != "" {
		n, perr := strconv.ParseInt(id, 10, 64)
		if perr != nil {
			return fault.Invalid("restore", "not a history entry")
		}
		_, err = a.consoleCall(r, s, "POST", fmt.Sprintf("%s/history/%d/restore", path, n), nil, nil)
	} else {
		_, err = a.consoleCall(r, s, "PUT", path, []byte(r.PostFormValue("data")), nil, "If-Match", r.PostFormValue("etag"))
	}
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.status != http.StatusNotFound && ae.status != http.StatusForbidden && ae.status < 500 {
			v, verr := a.pillarRow(r, s, target, category)
			if verr != nil {
				return verr
			}
			msg := ae.problem.Detail
			if ae.status == http.StatusPreconditionFailed {
				msg = "Changed meanwhile: this category was changed after you loaded the page, so nothing was saved. Reload, then make your change again."
			} else {
				v.Data = r.PostFormValue("data")
			}
			return a.render(w, ae.status, "pillar", uiPage{Title: "Pillar " + target + " · " + category, User: s.Principal.Name, CSRF: s.CSRF, Section: "nodes", Data: v, Error: msg, Fields: ae.problem.Errors})
		}
		return err
	}
	http.Redirect(w, r, "/ui/pillar?"+url.Values{"target": {target}, "category": {category}, "saved": {"1"}}.Encode(), http.StatusSeeOther)
	return nil
}

// --- audit ---

func (a *API) uiAudit(w http.ResponseWriter, r *http.Request, s auth.Session) error {
	q := r.URL.Query()
	apiQ := url.Values{"limit": {"50"}}
	if act := q.Get("action"); act != "" {
		apiQ.Set("action", act)
	}
	if c := q.Get("continue"); c != "" {
		apiQ.Set("continue", c)
	}
	var page struct {
		Items    []auth.AuditRecord `json:"items"`
		Continue string             `json:"continue"`
	}
	if _, err := a.consoleCall(r, s, "GET", "/v1/audit?"+apiQ.Encode(), nil, &page); err != nil {
		return err
	}
	next := ""
	if page.Continue != "" {
		nq := url.Values{"continue": {page.Continue}}
		if act := q.Get("action"); act != "" {
			nq.Set("action", act)
		}
		next = "/ui/audit?" + nq.Encode()
	}
	return a.uiShow(w, s, "audit", "audit", "Audit log", map[string]any{"Items": page.Items, "Action": q.Get("action"), "Next": next}, "")
}

// --- helpers ---

func prettyJSON(v any) string {
	var raw []byte
	switch t := v.(type) {
	case json.RawMessage:
		raw = t
	case []byte:
		raw = t
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		raw = b
	}
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if !json.Valid(raw) {
		return string(raw)
	}
	return indentJSON(raw)
}

// maxIndentLevels is how many levels the console indents; deeper values are written compact.
const maxIndentLevels = 32

// indentJSON is json.Indent with two spaces per level down to maxIndentLevels and compact
// JSON below: json.Indent puts every level on a line of its own indented by its depth, so a
// value nested n levels deep became O(n²) bytes (a 60 KB row stored 9,990 levels deep, before
// the depth limit, made an 803 MB page). Here each byte of the value costs at most
// 2·maxIndentLevels+2 bytes of output, whatever its depth. raw must be valid JSON.
func indentJSON(raw []byte) string {
	var b strings.Builder
	b.Grow(len(raw) + len(raw)/2)
	level := 0
	newline := func() {
		b.WriteByte('\n')
		for range min(level, maxIndentLevels) {
			b.WriteString("  ")
		}
	}
	inString, escaped := false, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if inString {
			b.WriteByte(c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
		case '"':
			inString = true
			b.WriteByte(c)
		case '{', '[':
			b.WriteByte(c)
			j := i + 1
			for j < len(raw) && (raw[j] == ' ' || raw[j] == '\t' || raw[j] == '\n' || raw[j] == '\r') {
				j++
			}
			if j < len(raw) && (raw[j] == '}' || raw[j] == ']') {
				b.WriteByte(raw[j]) // empty: {} or []
				i = j
				continue
			}
			level++
			if level <= maxIndentLevels {
				newline()
			}
		case '}', ']':
			if level <= maxIndentLevels {
				level--
				newline()
			} else {
				level--
			}
			b.WriteByte(c)
		case ',':
			b.WriteByte(c)
			if level <= maxIndentLevels {
				newline()
			}
		case ':':
			b.WriteByte(c)
			if level <= maxIndentLevels {
				b.WriteByte(' ')
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func labelText(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ", ")
}

// labelLines is a map as the edit form shows it: key=value per line.
func labelLines(m map[string]string) string {
	return strings.ReplaceAll(labelText(m), ", ", "\n")
}

// parseLabelLines reads the edit form's key=value lines.
func parseLabelLines(field, text string) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s, line %d: write key=value", field, i+1)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

func sinceText(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// sideBySide pairs the lines of two texts for a two-column diff: unchanged lines side by side,
// the rest marked. Any pillar:write holder can store two revisions a reader then opens, so it
// works in space linear in the texts and time linear up to a log factor — a longest common
// subsequence table is n×m (80 GB for two revisions of a 100,000-item list). It aligns like
// patience diff: common leading and trailing lines, then the longest increasing run of lines
// that occur exactly once on each side as anchors, recursing a few levels between them; a
// stretch left over is aligned exactly when it is small (an LCS table of at most
// diffExactCells cells per line), else shown as changed, its old and new lines paired.
func sideBySide(a, b string) []diffLine {
	x, y := splitLines(a), splitLines(b)
	d := differ{x: x, y: y, out: make([]diffLine, 0, max(len(x), len(y)))}
	if len(x)*len(y) <= diffSmallCells {
		d.exact(0, len(x), 0, len(y)) // as before: small revisions are aligned exactly
	} else {
		d.align(0, len(x), 0, len(y), diffDepth)
	}
	return d.out
}

// diffSmallCells is the largest LCS table sideBySide builds for two whole revisions (128 KB):
// up to it they are aligned exactly, as they always were.
const diffSmallCells = 1 << 14

// diffDepth is how many times sideBySide looks for anchors inside a stretch between anchors;
// each level costs one pass over the lines, so the whole diff stays O(n log n).
const diffDepth = 4

// diffExactCells bounds, per line of a stretch, the LCS table aligning it exactly, so every
// table together is linear in the texts.
const diffExactCells = 16

// differ appends the aligned rows of x and y to out.
type differ struct {
	x, y []string
	out  []diffLine
}

// align appends the rows of x[i0:i1] against y[j0:j1].
func (d *differ) align(i0, i1, j0, j1, depth int) {
	for i0 < i1 && j0 < j1 && d.x[i0] == d.y[j0] {
		d.out = append(d.out, diffLine{Old: d.x[i0], New: d.y[j0]})
		i0, j0 = i0+1, j0+1
	}
	tail := 0
	for i0 < i1-tail && j0 < j1-tail && d.x[i1-1-tail] == d.y[j1-1-tail] {
		tail++
	}
	d.middle(i0, i1-tail, j0, j1-tail, depth)
	for k := 0; k < tail; k++ {
		d.out = append(d.out, diffLine{Old: d.x[i1-tail+k], New: d.y[j1-tail+k]})
	}
}

// middle appends the rows of a stretch whose first and last lines differ.
func (d *differ) middle(i0, i1, j0, j1, depth int) {
	n, m := i1-i0, j1-j0
	switch {
	case n == 0 || m == 0:
		d.changed(i0, i1, j0, j1)
	case n*m <= diffExactCells*(n+m):
		d.exact(i0, i1, j0, j1)
	default:
		anchors := d.anchors(i0, i1, j0, j1)
		if depth == 0 || len(anchors) == 0 {
			d.changed(i0, i1, j0, j1)
			return
		}
		for _, a := range anchors {
			d.align(i0, a[0], j0, a[1], depth-1)
			d.out = append(d.out, diffLine{Old: d.x[a[0]], New: d.y[a[1]]})
			i0, j0 = a[0]+1, a[1]+1
		}
		d.align(i0, i1, j0, j1, depth-1)
	}
}

// changed appends a stretch with nothing in common: old and new lines paired row by row.
func (d *differ) changed(i0, i1, j0, j1 int) {
	for i0 < i1 || j0 < j1 {
		var l diffLine
		l.Changed = true
		if i0 < i1 {
			l.Old, i0 = d.x[i0], i0+1
		}
		if j0 < j1 {
			l.New, j0 = d.y[j0], j0+1
		}
		d.out = append(d.out, l)
	}
}

// exact appends a small stretch aligned by a longest common subsequence.
func (d *differ) exact(i0, i1, j0, j1 int) {
	x, y := d.x[i0:i1], d.y[j0:j1]
	n, m := len(x), len(y)
	lcs := make([]int, (n+1)*(m+1)) // lcs[i*(m+1)+j]: of x[i:] and y[j:]
	at := func(i, j int) int { return lcs[i*(m+1)+j] }
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i*(m+1)+j] = at(i+1, j+1) + 1
			} else {
				lcs[i*(m+1)+j] = max(at(i+1, j), at(i, j+1))
			}
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && x[i] == y[j]:
			d.out = append(d.out, diffLine{Old: x[i], New: y[j]})
			i, j = i+1, j+1
		case j < m && (i == n || at(i, j+1) >= at(i+1, j)):
			d.out = append(d.out, diffLine{New: y[j], Changed: true})
			j++
		default:
			d.out = append(d.out, diffLine{Old: x[i], Changed: true})
			i++
		}
	}
}

// anchors are the pairs (i, j) of lines occurring exactly once in x[i0:i1] and once in
// y[j0:j1], equal, the longest run of them increasing on both sides (patience sorting).
func (d *differ) anchors(i0, i1, j0, j1 int) [][2]int {
	type seen struct{ inX, inY, atX, atY int }
	count := make(map[string]*seen, i1-i0)
	for i := i0; i < i1; i++ {
		c := count[d.x[i]]
		if c == nil {
			c = &seen{}
			count[d.x[i]] = c
		}
		c.inX, c.atX = c.inX+1, i
	}
	for j := j0; j < j1; j++ {
		if c := count[d.y[j]]; c != nil {
			c.inY, c.atY = c.inY+1, j
		}
	}
	var pairs [][2]int // by i
	for i := i0; i < i1; i++ {
		if c := count[d.x[i]]; c.inX == 1 && c.inY == 1 {
			pairs = append(pairs, [2]int{i, c.atY})
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	// Longest increasing run of j: tops[k] is the pair ending the best run of length k+1
	// found so far, back[p] the pair before p in its run.
	tops := make([]int, 0, len(pairs))
	back := make([]int, len(pairs))
	for p, pr := range pairs {
		k, _ := slices.BinarySearchFunc(tops, pr[1], func(t, j int) int { return pairs[t][1] - j })
		back[p] = -1
		if k > 0 {
			back[p] = tops[k-1]
		}
		if k == len(tops) {
			tops = append(tops, p)
		} else {
			tops[k] = p
		}
	}
	run := make([][2]int, len(tops))
	for k, p := len(tops)-1, tops[len(tops)-1]; p >= 0; k, p = k-1, back[p] {
		run[k] = pairs[p]
	}
	return run
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
