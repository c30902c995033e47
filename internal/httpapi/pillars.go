package httpapi

import (
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/pillar"
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
	{"/v1/orgs/{org}/groups/{group}/pillars", "org", func(r *http.Request) pillar.Target {
		return pillar.Target{Kind: "group", Org: r.PathValue("org"), Group: r.PathValue("group")}
	}},
	{"/v1/nodes/{node}/pillars", "node", func(r *http.Request) pillar.Target {
		return pillar.Target{Kind: "node", Node: r.PathValue("node")}
	}},
}

// pillarRoutes are the routes of pillar rows (four targets alike), the merged render and the
// shared merge setting.
func (a *API) pillarRoutes() []route {
	var rs []route
	for _, pt := range pillarTargets {
		pt := pt
		rt := func(method, suffix, verb string, h func(w http.ResponseWriter, r *http.Request, t pillar.Target, p *auth.Principal) error) route {
			x := route{pattern: method + " " + pt.prefix + suffix, family: "pillars", verb: verb, param: pt.param,
				handler: func(w http.ResponseWriter, r *http.Request, p *auth.Principal) error { return h(w, r, pt.target(r), p) }}
			if pt.param == "" {
				x.source, x.name = fixedName, "global"
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
		route{pattern: "GET /v1/nodes/{node}/pillar", family: "pillars", verb: "render", param: "node", handler: a.pillarRender},
		route{pattern: "GET /v1/pillar-settings", family: "pillars", verb: "read", source: fixedName, name: "*", handler: a.pillarSettingsGet},
		route{pattern: "PUT /v1/pillar-settings", family: "pillars", verb: "write", source: fixedName, name: "*", handler: a.pillarSettingsPut},
	)
}

func (a *API) pillarList(w http.ResponseWriter, r *http.Request, t pillar.Target, p *auth.Principal) error {
	items, err := a.pillars.Categories(r.Context(), t)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (a *API) pillarGet(w http.ResponseWriter, r *http.Request, t pillar.Target, p *auth.Principal) error {
	pl, err := a.pillars.Get(r.Context(), t, r.PathValue("category"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", pl.ETag)
	return writeJSON(w, http.StatusOK, pl)
}

// pillarPut stores the body (a JSON object) as the category: 201 when created, 200 when
// replaced; If-Match makes it conditional (412).
func (a *API) pillarPut(w http.ResponseWriter, r *http.Request, t pillar.Target, p *auth.Principal) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !isJSONContentType(ct) {
		return fault.Invalid("", "Content-Type must be application/json, not %q", ct)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return err
		}
		return fault.Invalid("", "reading the body: %v", err)
	}
	data, err := pillar.DecodeObject(body)
	if err != nil {
		return err
	}
	pl, created, err := a.pillars.Put(r.Context(), t, r.PathValue("category"), data, r.Header.Get("If-Match"), p.Actor())
	if err != nil {
		return err
	}
	w.Header().Set("ETag", pl.ETag)
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
	out, err := a.pillars.Render(r.Context(), a.resources, r.PathValue("node"), explain)
	if err != nil {
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
	return writeJSON(w, http.StatusOK, out.Pillar)
}

type pillarSettings struct {
	MergeLists bool `json:"mergeLists"`
	// SaltUnknownMinion is what strata.node_pillars gives an unknown minion: "empty" (no
	// rows) or "error" (one NULL row). Omitted in a PUT: unchanged.
	SaltUnknownMinion string `json:"saltUnknownMinion,omitempty"`
}

func (a *API) pillarSettingsGet(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	o, err := a.pillars.Options(r.Context())
	if err != nil {
		return err
	}
	u, err := a.pillars.SaltUnknownMinion(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, pillarSettings{MergeLists: o.MergeLists, SaltUnknownMinion: u})
}

func (a *API) pillarSettingsPut(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	var s pillarSettings
	if err := decodeJSON(r, &s); err != nil {
		return err
	}
	if s.SaltUnknownMinion != "" {
		if err := a.pillars.SetSaltUnknownMinion(r.Context(), s.SaltUnknownMinion, p.Actor()); err != nil {
			return err
		}
	}
	if err := a.pillars.SetOptions(r.Context(), pillar.Options{MergeLists: s.MergeLists}, p.Actor()); err != nil {
		return err
	}
	u, err := a.pillars.SaltUnknownMinion(r.Context())
	if err != nil {
		return err
	}
	s.SaltUnknownMinion = u
	return writeJSON(w, http.StatusOK, s)
}
