package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/pillar/sls"
	"github.com/stratahq/strata/internal/resource"
)

// pillarTargets are the four kinds of pillar target: the path prefix of their routes, the
// path parameter their scopes name (none: the fixed name "global"), and how a request names
// the target.
var pillarTargets = []struct {
	prefix string
	param  string
	target func(r *http.Request) pillar.Target
}{
	{"/v1/pillars/global", "", func(*http.Request) pillar.Target { return pillar.Global }},
	{"/v1/orgs/{org}/pillars", "org", func(r *http.Request) pillar.Target {
		return pillar.Target{Kind: "org", Org: r.PathValue("org")}
	}},
	{"/v1/orgs/{org}/groups/{group}/pillars", "org/group", func(r *http.Request) pillar.Target {
		return pillar.Target{Kind: "group", Org: r.PathValue("org"), Group: r.PathValue("group")}
	}},
	{"/v1/nodes/{node}/pillars", "node", func(r *http.Request) pillar.Target {
		return pillar.Target{Kind: "node", Node: r.PathValue("node")}
	}},
}

// pillarRoutes are the routes of pillar rows (four targets alike), the merged render and the
// shared merge setting. Their scopes name the target kind: pillars:write:node/web01,
// pillars:read:org/acme, pillars:write:group/acme/web, pillars:read:global.
func (a *API) pillarRoutes() []route {
	r0 := &http.Request{} // the target kind of a row's routes does not depend on the request
	var rs []route
	for _, pt := range pillarTargets {
		pt := pt
		rt := func(method, suffix, verb string, h func(w http.ResponseWriter, r *http.Request, t pillar.Target, p *auth.Principal) error) route {
			x := route{pattern: method + " " + pt.prefix + suffix, family: "pillars", verb: verb, param: pt.param,
				handler: func(w http.ResponseWriter, r *http.Request, p *auth.Principal) error { return h(w, r, pt.target(r), p) }}
			if pt.param == "" {
				x.source, x.name = fixedName, pillar.Global.ScopeName()
			} else {
				x.target = pt.target(r0).Kind
			}
			return x
		}
		rs = append(rs,
			rt("GET", "", "read", a.pillarList),
			rt("GET", "/{category}", "read", a.pillarGet),
			rt("PUT", "/{category}", "write", a.pillarPut),
			rt("DELETE", "/{category}", "delete", a.pillarDelete),
			rt("GET", "/{category}/history", "read", a.pillarHistory),
			rt("POST", "/{category}/history/{change}/restore", "write", a.pillarRestore),
		)
	}
	return append(rs,
		route{pattern: "GET /v1/nodes/{node}/pillar", family: "pillars", verb: "render", param: "node", target: "node", handler: a.pillarRender},
		route{pattern: "GET /v1/salt/pillar/{minion}", family: "pillars", verb: "render", source: byHandler, salt: true, target: "node"},
		route{pattern: "POST /v1/salt/credentials", family: "pillars", verb: "credentials", source: fixedName, name: "*", handler: a.saltCredentials},
		route{pattern: "POST /v1/pillars:import", family: "pillars", verb: "write", source: byHandler, handler: a.pillarImport, stateBody: true},
		// An export reads every target's rows (an org's nodes and groups, and global rows).
		route{pattern: "GET /v1/pillars:export", family: "pillars", verb: "read", source: fixedName, name: "*", handler: a.pillarExport},
		route{pattern: "GET /v1/pillar-settings", family: "pillars", verb: "read", source: fixedName, name: "*", handler: a.pillarSettingsGet},
		route{pattern: "PUT /v1/pillar-settings", family: "pillars", verb: "write", source: fixedName, name: "*", handler: a.pillarSettingsPut},
		// A category's properties apply at every target: reading them needs read on all
		// targets, changing them write on all.
		route{pattern: "GET /v1/pillar-categories", family: "pillars", verb: "read", source: fixedName, name: "*", handler: a.pillarCategoryList},
		route{pattern: "GET /v1/pillar-categories/{category}", family: "pillars", verb: "read", source: fixedName, name: "*", handler: a.pillarCategoryGet},
		route{pattern: "PUT /v1/pillar-categories/{category}", family: "pillars", verb: "write", source: fixedName, name: "*", handler: a.pillarCategoryPut},
		route{pattern: "DELETE /v1/pillar-categories/{category}", family: "pillars", verb: "write", source: fixedName, name: "*", handler: a.pillarCategoryDelete},
	)
}

func (a *API) pillarList(w http.ResponseWriter, r *http.Request, t pillar.Target, p *auth.Principal) error {
	items, err := a.pillars.Categories(r.Context(), t)
	if err != nil {
		return err
	}
	// A list names the categories; their data is read one by one (a "data": null here
	// would say a category with data has none).
	type category struct {
		Target    string    `json:"target"`
		Category  string    `json:"category"`
		Revision  int64     `json:"revision"`
		UpdatedAt time.Time `json:"updatedAt"`
		UpdatedBy string    `json:"updatedBy"`
	}
	out := make([]category, len(items))
	for i, p := range items {
		out[i] = category{p.Target, p.Category, p.Revision, p.UpdatedAt, p.UpdatedBy}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"items": out})
}

func (a *API) pillarGet(w http.ResponseWriter, r *http.Request, t pillar.Target, p *auth.Principal) error {
	pl, err := a.pillars.Get(r.Context(), t, r.PathValue("category"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", pl.ETag)
	return writeJSON(w, http.StatusOK, pl)
}

// pillarPut stores the body as the category: 201 when created, 200 when replaced; If-Match
// makes it conditional (412). The body is a JSON object (application/json) or an SLS file
// (application/yaml), read by the SLS loader exactly as `pillar import` reads a tree's files
// (pillarYAML).
func (a *API) pillarPut(w http.ResponseWriter, r *http.Request, t pillar.Target, p *auth.Principal) error {
	ct := r.Header.Get("Content-Type")
	yamlBody := isYAMLContentType(ct)
	if ct != "" && !yamlBody && !isJSONContentType(ct) {
		return fault.Invalid("", "Content-Type must be application/json or application/yaml, not %q", ct)
	}
	file, err := bodyFileName(r)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return err
		}
		return fault.Invalid("", "reading the body: %v", err)
	}
	var data map[string]any
	if yamlBody {
		data, err = a.pillarYAML(file, body)
	} else {
		data, err = decodePillarJSON(file, body)
	}
	if err != nil {
		return err
	}
	pl, created, err := a.pillars.Put(r.Context(), t, r.PathValue("category"), data, r.Header.Get("If-Match"), p.Actor())
	if err != nil {
		return err
	}
	w.Header().Set("ETag", pl.ETag)
	for _, msg := range pl.Warnings {
		w.Header().Add("Warning", "299 strata "+strconv.Quote(msg))
	}
	if created {
		return writeJSON(w, http.StatusCreated, pl)
	}
	return writeJSON(w, http.StatusOK, pl)
}

func (a *API) pillarDelete(w http.ResponseWriter, r *http.Request, t pillar.Target, p *auth.Principal) error {
	if err := a.pillars.Delete(r.Context(), t, r.PathValue("category"), r.Header.Get("If-Match"), p.Actor()); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) pillarHistory(w http.ResponseWriter, r *http.Request, t pillar.Target, p *auth.Principal) error {
	limit := 100
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return fault.Invalid("limit", "limit must be an integer from 1 to 1000, not %q", truncateParam(s))
		}
		limit = n
	}
	var before int64
	if s := r.URL.Query().Get("before"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			return fault.Invalid("before", "before must be a history entry id, not %q", truncateParam(s))
		}
		before = n
	}
	items, err := a.pillars.History(r.Context(), t, r.PathValue("category"), before, limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (a *API) pillarRestore(w http.ResponseWriter, r *http.Request, t pillar.Target, p *auth.Principal) error {
	id, err := strconv.ParseInt(r.PathValue("change"), 10, 64)
	if err != nil || id < 1 {
		return fault.Invalid("change", "change must be a history entry id, not %q", truncateParam(r.PathValue("change")))
	}
	pl, err := a.pillars.Restore(r.Context(), t, r.PathValue("category"), id, r.Header.Get("If-Match"), p.Actor())
	if err != nil {
		return err
	}
	w.Header().Set("ETag", pl.ETag)
	return writeJSON(w, http.StatusOK, pl)
}

// fresh reports whether the request asks for a render that is not served from this replica's
// cache (Cache-Control: no-cache, as HTTP caches read it): a strict read after a write made
// through another replica.
func fresh(r *http.Request) bool {
	for _, v := range r.Header.Values("Cache-Control") {
		for _, d := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(d), "no-cache") {
				return true
			}
		}
	}
	return false
}

// pillarRender answers a node's merged pillar, or with ?explain=true also where each leaf came
// from. The ETag is a digest of the merged pillar; If-None-Match answers 304, so pollers are
// cheap.
func (a *API) pillarRender(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	explain := false
	if s := r.URL.Query().Get("explain"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fault.Invalid("explain", "explain must be true or false, not %q", truncateParam(s))
		}
		explain = b
	}
	render := a.pillars.Render
	if fresh(r) {
		render = func(ctx context.Context, res *resource.Service, node string, explain bool) (pillar.Rendered, error) {
			if explain {
				return a.pillars.Render(ctx, res, node, true) // explanations are never cached
			}
			return a.pillars.RenderFresh(ctx, res, node)
		}
	}
	node := r.PathValue("node")
	out, err := render(r.Context(), a.resources, node, explain)
	if err == nil {
		// Secret categories are masked (with the masked render's own ETag, so an ETag says
		// nothing of a value) unless the token may read the node's secrets.
		out, err = out.For(pillar.MayReadSecrets(r.Context(), pillar.Target{Kind: "node", Node: node}.ScopeName()))
	}
	if err != nil {
		if k := classify(err).Kind; k == fault.KindInternal || k == fault.KindUnavailable {
			a.metrics.renderFailures.WithLabelValues("api", "database").Inc()
		}
		return err
	}
	w.Header().Set("ETag", out.ETag)
	if inm := r.Header.Get("If-None-Match"); inm != "" && inm == out.ETag && !explain {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	if explain {
		return writeJSON(w, http.StatusOK, out)
	}
	return writeRawJSON(w, http.StatusOK, out.JSON)
}

// pillarSettings are the settings every replica shares: Salt's pillar_merge_lists for
// renders, and what an unknown minion gets from Salt-facing renders ("empty" or "error"). A
// PUT changes the fields it names.
type pillarSettings struct {
	MergeLists    *bool   `json:"mergeLists,omitempty"`
	UnknownMinion *string `json:"unknownMinion,omitempty"`
}

func (a *API) pillarSettingsGet(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	o, err := a.pillars.Options(r.Context())
	if err != nil {
		return err
	}
	u, err := a.pillars.UnknownMinion(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, pillarSettings{MergeLists: &o.MergeLists, UnknownMinion: &u})
}

func (a *API) pillarSettingsPut(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	var s pillarSettings
	if err := decodeJSON(r, &s); err != nil {
		return err
	}
	if s.UnknownMinion != nil {
		if err := a.pillars.SetUnknownMinion(r.Context(), *s.UnknownMinion, p.Actor()); err != nil {
			return err
		}
	}
	if s.MergeLists != nil {
		if err := a.pillars.SetOptions(r.Context(), pillar.Options{MergeLists: *s.MergeLists}, p.Actor()); err != nil {
			return err
		}
	}
	return a.pillarSettingsGet(w, r, p)
}

// importRequest is the body of POST /v1/pillars:import: the files of a Salt pillar tree by
// their path relative to its root (top.sls, apache.sls, users/init.sls, …), the environment
// to read (base by default), the master's nodegroups, and the plaintext of the tree's PGP
// messages by their armored text, which the CLI decrypted with the operator's keys
// (--gpg-homedir) so that the server never needs gpg or a private key.
type importRequest struct {
	Files      map[string]string   `json:"files"`
	Env        string              `json:"env"`
	Nodegroups map[string][]string `json:"nodegroups"`
	Decrypted  map[string]string   `json:"decrypted"`
}

// pillarImport reads a file-based pillar tree (sent as files, so the CLI needs no server
// code) and imports it in one transaction, or with ?dryRun=true checks it and answers the
// plan. It writes global rows, nodes and the groups of an org, so it needs pillars:write:*,
// nodes:write:* and groups:write:<org>.
func (a *API) pillarImport(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	q := r.URL.Query()
	org := q.Get("org")
	if q.Get("format") == "ndjson" {
		return a.pillarSyncImport(w, r, p)
	}
	for _, c := range [][3]string{{"pillars", "write", "*"}, {"nodes", "write", "*"}} {
		if err := p.Check(c[0], c[1], c[2]); err != nil {
			return err
		}
	}
	if org != "" {
		if err := p.Check("groups", "write", org); err != nil {
			return err
		}
	}
	flag := func(name string) (bool, error) {
		s := q.Get(name)
		if s == "" {
			return false, nil
		}
		b, err := strconv.ParseBool(s)
		if err != nil {
			return false, fault.Invalid(name, "%s must be true or false, not %q", name, truncateParam(s))
		}
		return b, nil
	}
	dry, err := flag("dryRun")
	if err != nil {
		return err
	}
	skip, err := flag("skipUnsupported")
	if err != nil {
		return err
	}
	var req importRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "strata-import-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for name, content := range req.Files {
		clean := filepath.Clean(filepath.FromSlash(name))
		if name == "" || filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
			return fault.Invalid("/files", "file name %q must be a relative path inside the tree", truncateParam(name))
		}
		path := filepath.Join(dir, clean)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return err
		}
	}
	// Glob targets become groups of the nodes strata knows now that match them (a snapshot).
	known := []string{}
	for after := ""; ; {
		page, last, err := a.resources.List(r.Context(), resource.KindNode, "", resource.ListOptions{After: after, Filter: auth.Filter{All: true, Names: []string{}, Prefixes: []string{}}})
		if err != nil {
			return err
		}
		for _, n := range page.Items {
			known = append(known, n.Metadata.Name)
		}
		if last == "" {
			break
		}
		after = last
	}
	// The tree's values may expand (YAML aliases) to no more than the body limit: the request
	// is refused as too large once they do, dry run or not, before any of it is stored.
	plan, err := sls.Read(dir, sls.Options{Env: req.Env, Nodegroups: req.Nodegroups, KnownNodes: known, Decrypted: req.Decrypted, MaxBytes: a.maxBody})
	var tooLarge *sls.TooLargeError
	if errors.As(err, &tooLarge) {
		msg := fmt.Sprintf("line %d: the values expand past the body limit of %d bytes", tooLarge.Line, tooLarge.Limit)
		if tooLarge.Copies {
			msg = fmt.Sprintf("line %d: the rows and included copies add up to more than %d bytes", tooLarge.Line, tooLarge.Limit)
		}
		return &fault.Error{Kind: fault.KindTooLarge, Detail: tooLarge.Error(), Fields: []fault.FieldError{{
			Field: "/files/" + strings.ReplaceAll(strings.ReplaceAll(tooLarge.File, "~", "~0"), "/", "~1"), Message: msg}}}
	}
	if err != nil {
		return fault.UnprocessableFields("the pillar tree cannot be read", []fault.FieldError{{Field: "/files", Message: err.Error()}})
	}
	if err := authorizeImport(p, plan, org); err != nil {
		return err
	}
	opts := pillar.ImportOptions{Org: org, DryRun: dry, SkipUnsupported: skip}
	if !acceptsNDJSON(r) {
		rep, err := a.pillars.Import(r.Context(), a.resources, plan, opts, p.Actor())
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, rep)
	}
	out := &importStream{w: w}
	opts.OnRow = out.row
	rep, err := a.pillars.Import(r.Context(), a.resources, plan, opts, p.Actor())
	if err != nil && !out.started {
		return err // nothing streamed yet: the usual problem answer, with its status
	}
	if err != nil {
		out.line(struct {
			Error *api.Problem `json:"error"`
		}{a.problemOf(r, err)})
		return nil
	}
	type summary struct {
		pillar.ImportReport
		Rows []pillar.ImportedRow `json:"rows,omitempty"` // streamed already, one line each
	}
	out.line(struct {
		Summary summary `json:"summary"`
	}{summary{ImportReport: rep}})
	return nil
}

// acceptsNDJSON reports whether the request asks for an NDJSON answer (Accept:
// application/x-ndjson), which long operations stream as results per item.
func acceptsNDJSON(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		switch mediaType(part) {
		case "application/x-ndjson", "application/ndjson":
			return true
		}
	}
	return false
}

// importStream writes a tree import's NDJSON answer: one line per row as the transaction
// writes it ({"item": i, "of": n, …the row}), then {"summary": …} once it committed (or rolled
// back, for a dry run), or {"error": problem} when it failed after the first row, which means
// nothing was imported. The status and headers go out with the first row, so an import that
// fails before writing any row still answers with its problem and status.
type importStream struct {
	w         http.ResponseWriter
	started   bool
	lastFlush time.Time
}

// importStreamFlushEvery bounds how often rows are flushed: often enough for a progress bar,
// without a packet per row of a large tree.
const importStreamFlushEvery = 100 * time.Millisecond

func (s *importStream) row(row pillar.ImportedRow, index, total int) {
	s.line(struct {
		Item int `json:"item"`
		Of   int `json:"of"`
		pillar.ImportedRow
	}{index, total, row})
}

func (s *importStream) line(v any) {
	if !s.started {
		s.started = true
		s.w.Header().Set("Content-Type", "application/x-ndjson")
		s.w.WriteHeader(http.StatusOK)
	}
	_ = json.NewEncoder(s.w).Encode(v)
	if f, ok := s.w.(http.Flusher); ok && time.Since(s.lastFlush) >= importStreamFlushEvery {
		f.Flush()
		s.lastFlush = time.Now()
	}
}

// pillarSyncImport applies an ndjson sync stream (pillar.SyncImport): ?dryRun=true answers
// the plan and changes nothing.
func (a *API) pillarSyncImport(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	dry := false
	if s := r.URL.Query().Get("dryRun"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fault.Invalid("dryRun", "dryRun must be true or false, not %q", truncateParam(s))
		}
		dry = b
	}
	recs, err := pillar.ReadSync(r.Body)
	if err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) || fault.KindOf(err) != fault.KindInternal {
			return err
		}
		return fault.Invalid("", "reading the body: %v", err)
	}
	if err := pillar.AuthorizeSync(p, recs); err != nil {
		return err
	}
	rep, err := a.pillars.SyncImport(r.Context(), a.resources, recs, dry, auditActor(r, p))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, rep)
}

// authorizeImport checks what an import's plan writes besides pillar rows and nodes (checked
// up front): the groups of every org it writes them in, the orgs it creates (an exported tree
// places rows in orgs of its own), and the orgs its nodes join (orgs:attach, as for a node
// written through its own route). The writes themselves run without the reference
// authorizer, so this is where they are authorized.
func authorizeImport(p *auth.Principal, plan sls.Plan, org string) error {
	checked := map[[3]string]bool{}
	check := func(family, verb, name string) error {
		k := [3]string{family, verb, name}
		if checked[k] || name == "" {
			return nil
		}
		checked[k] = true
		return p.Check(family, verb, name)
	}
	for _, row := range plan.Rows {
		t := row.Target
		rowOrg := org
		if t.Placed {
			rowOrg = t.Org
		}
		var err error
		switch t.Kind {
		case "org":
			if err = check("orgs", "write", t.Name); err == nil {
				err = check("orgs", "attach", t.Name)
			}
		case "group":
			if err = check("groups", "write", rowOrg); err == nil {
				err = check("orgs", "attach", rowOrg)
			}
		case "node":
			err = check("orgs", "attach", rowOrg)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (a *API) pillarCategoryList(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	items, err := a.pillars.ListCategories(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (a *API) pillarCategoryGet(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	c, err := a.pillars.GetCategory(r.Context(), r.PathValue("category"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", pillar.CategoryETag(c))
	return writeJSON(w, http.StatusOK, c)
}

// pillarCategoryPut sets a category's properties ({"kind": "NtpFormula"} binds it; {} unbinds):
// 201 when the category had no properties, else 200; 409 listing the stored rows a binding
// refuses; 403 without kinds:read on the kind named.
func (a *API) pillarCategoryPut(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	var req api.PillarCategoryRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	// The body names a kind: a binding reveals and applies its schema, so it needs what
	// reading the kind needs (kinds:read:<Kind>), as a path naming the kind would.
	if req.Kind != "" {
		if err := p.Check("kinds", "read", req.Kind); err != nil {
			return err
		}
	}
	// If-Match: the ETag GET answered (412 when the properties changed meanwhile): a client
	// changing one property keeps the others as they are, not as they were.
	c, created, err := a.pillars.SetCategoryIf(r.Context(), r.PathValue("category"), req, r.Header.Get("If-Match"), p.Actor())
	if err != nil {
		return err
	}
	w.Header().Set("ETag", pillar.CategoryETag(c))
	if created {
		return writeJSON(w, http.StatusCreated, c)
	}
	return writeJSON(w, http.StatusOK, c)
}

func (a *API) pillarCategoryDelete(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if err := a.pillars.DeleteCategory(r.Context(), r.PathValue("category"), p.Actor()); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// pillarExport answers the pillar rows (of every org, or ?org=) as a Salt pillar tree:
// {"files": {path: content}, "rows": n, "nodegroups": {...}}; the CLI writes the files.
//
// ?format=ndjson streams the sync records instead (pillar.SyncExport), which also carry node
// labels, groups and kinds: it needs nodes:read:*, groups:read:* and kinds:read:* besides.
func (a *API) pillarExport(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	opts := pillar.ExportOptions{Org: r.URL.Query().Get("org")}
	switch f := r.URL.Query().Get("format"); f {
	case "", "sls":
	case "ndjson":
		for _, c := range [][3]string{{"nodes", "read", "*"}, {"groups", "read", "*"}, {"kinds", "read", "*"}} {
			if err := p.Check(c[0], c[1], c[2]); err != nil {
				return err
			}
		}
		var buf bytes.Buffer // whole before the answer starts, so a failure is still a problem
		if err := a.pillars.SyncExport(r.Context(), opts, &buf); err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, err := buf.WriteTo(w)
		return err
	default:
		return fault.Invalid("format", "format must be sls or ndjson, not %q", truncateParam(f))
	}
	out, err := a.pillars.Export(r.Context(), opts)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

// isYAMLContentType reports whether ct names YAML: application/yaml (RFC 9512), or the
// application/x-yaml and text/yaml that tools still send.
func isYAMLContentType(ct string) bool {
	ct = strings.ToLower(strings.TrimSpace(strings.SplitN(ct, ";", 2)[0]))
	return ct == "application/yaml" || ct == "application/x-yaml" || ct == "text/yaml"
}

// bodyFileName is the ?file= a client names the body's file with (`strata pillar set -f
// apache.yaml` sends apache.yaml), so that a problem names file:line:column as the user's
// editor shows it; "body" without one. It is only ever echoed in messages.
func bodyFileName(r *http.Request) (string, error) {
	f := r.URL.Query().Get("file")
	if f == "" {
		return "body", nil
	}
	if len(f) > 255 || strings.ContainsFunc(f, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
		return "", fault.Invalid("file", "file must name the body's file in at most 255 printable characters, not %q", truncateParam(f))
	}
	return f, nil
}

// pillarYAML reads a YAML body with the SLS loader, as Salt reads an SLS file (YAML 1.1, the
// renderer line, Jinja and PGP refused) and as `pillar import` reads the same file, with the
// import's byte budget: the values may expand (YAML aliases) to no more than the body limit.
// Each problem is a field naming file:line:column; a syntax error makes it a 400, anything
// else that cannot be stored faithfully a 422.
func (a *API) pillarYAML(file string, body []byte) (map[string]any, error) {
	if !utf8.Valid(body) {
		return nil, fault.UnprocessableFields("a pillar must be valid UTF-8", []fault.FieldError{{Field: file, Message: "invalid UTF-8"}})
	}
	data, problems, err := sls.ReadDocument(file, body, sls.Options{MaxBytes: a.maxBody})
	var tooLarge *sls.TooLargeError
	if errors.As(err, &tooLarge) {
		return nil, &fault.Error{Kind: fault.KindTooLarge, Detail: tooLarge.Error(), Fields: []fault.FieldError{{
			Field: fmt.Sprintf("%s:%d", file, tooLarge.Line), Message: fmt.Sprintf("the values expand past the body limit of %d bytes", tooLarge.Limit)}}}
	}
	if err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		kind := fault.KindUnprocessable
		fields := make([]fault.FieldError, len(problems))
		for i, u := range problems {
			at := fmt.Sprintf("%s:%d:%d", u.File, u.Line, u.Column)
			if u.Column == 0 { // a syntax error in a body too large to search for its column
				at = fmt.Sprintf("%s:%d", u.File, u.Line)
			}
			fields[i] = fault.FieldError{Field: at, Message: u.Reason}
			if strings.HasPrefix(u.Reason, "YAML syntax error") {
				kind = fault.KindInvalid
			}
		}
		detail := fmt.Sprintf("%s cannot be stored as Salt would read it (%d problems)", file, len(problems))
		if len(problems) == 1 {
			// One problem is one line: its place and its reason (api.Problem.Lines folds
			// the field whose message ends the headline into it).
			detail = fields[0].Field + ": " + fields[0].Message
		}
		return nil, &fault.Error{Kind: kind, Detail: detail, Fields: fields, Extensions: map[string]any{"problems": problems}}
	}
	// The loader passes a NUL through (a "\0" escape); PostgreSQL's jsonb cannot hold it.
	if enc, err := json.Marshal(data); err == nil && bytes.Contains(enc, []byte(`\u0000`)) {
		return nil, fault.UnprocessableFields("a pillar cannot hold the NUL character", []fault.FieldError{{Field: file, Message: "must not contain the NUL character (\\0), which PostgreSQL cannot store"}})
	}
	return data, nil
}

// decodePillarJSON decodes a JSON body as pillar.DecodeObject does, naming a syntax error's
// file:line:column (of the byte where decoding stopped) rather than only its offset.
func decodePillarJSON(file string, body []byte) (map[string]any, error) {
	var syn *json.SyntaxError
	if err := json.Unmarshal(body, new(any)); errors.As(err, &syn) {
		at := min(max(int(syn.Offset)-1, 0), len(body))
		line := 1 + bytes.Count(body[:at], []byte("\n"))
		col := 1 + utf8.RuneCount(body[bytes.LastIndexByte(body[:at], '\n')+1:at])
		// The headline ends with the field's message, so a reader (api.Problem.Lines, the
		// console) shows one line: "<file>:<line>:<col>: not JSON: <reason>".
		msg := "not JSON: " + syn.Error()
		return nil, fault.InvalidFields(file+": "+msg, []fault.FieldError{{Field: fmt.Sprintf("%s:%d:%d", file, line, col), Message: msg}})
	}
	return pillar.DecodeObject(body)
}
