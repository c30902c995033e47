package httpapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/resource"
)

// kindRegistryRoutes are the schema registry's routes (package kind).
func (a *API) kindRegistryRoutes() []route {
	return []route{
		{pattern: "GET /v1/kinds", family: "kinds", verb: "read", source: byHandler, handler: a.kindList},
		{pattern: "PUT /v1/kinds/{kind}", family: "kinds", verb: "write", param: "kind", handler: a.kindPut},
		{pattern: "GET /v1/kinds/{kind}", family: "kinds", verb: "read", param: "kind", handler: a.kindGet},
		{pattern: "GET /v1/kinds/{kind}/revisions", family: "kinds", verb: "read", param: "kind", handler: a.kindRevisions},
		{pattern: "GET /v1/kinds/{kind}/revisions/{n}", family: "kinds", verb: "read", param: "kind", handler: a.kindRevision},
	}
}

// userKindRoutes serve the objects of every user-defined kind, whatever its name, through
// the same generic handlers as the built-in kinds: the {kind} path segment is resolved to
// the kind's descriptor per request (kinds are registered at run time, on any replica).
// Objects of kinds inside an org are authorized by the org's name, objects of global kinds
// by their own, both in the "resources" family.
func (a *API) userKindRoutes() []route {
	const (
		orgColl  = "/v1/orgs/{org}/resources/{kind}"
		orgItem  = orgColl + "/{name}"
		globColl = "/v1/resources/{kind}"
		globItem = globColl + "/{name}"
		fam      = resource.FamilyResources
	)
	org, glob := resource.ScopeOrg, resource.ScopeGlobal
	return []route{
		{pattern: "GET " + orgColl, family: fam, verb: "read", param: "org", target: "org", handler: a.userKind(org, a.objList)},
		{pattern: "POST " + orgColl, family: fam, verb: "write", param: "org", target: "org", handler: withWarnings(a.userKind(org, a.objCreate))},
		{pattern: "GET " + orgItem, family: fam, verb: "read", param: "org", target: "org", handler: a.userKind(org, a.objGet)},
		{pattern: "PUT " + orgItem, family: fam, verb: "write", param: "org", target: "org", handler: withWarnings(a.userKind(org, a.objPut))},
		{pattern: "PATCH " + orgItem, family: fam, verb: "write", param: "org", target: "org", handler: withWarnings(a.userKind(org, a.objPatch))},
		{pattern: "DELETE " + orgItem, family: fam, verb: "delete", param: "org", target: "org", handler: a.userKind(org, a.objDelete)},
		{pattern: "GET " + globColl, family: fam, verb: "read", source: listed, target: "global", handler: a.userKind(glob, a.objList)},
		{pattern: "POST " + globColl, family: fam, verb: "write", source: fromBody, target: "global", handler: withWarnings(a.userKind(glob, a.objCreate))},
		{pattern: "GET " + globItem, family: fam, verb: "read", param: "name", target: "global", handler: a.userKind(glob, a.objGet)},
		{pattern: "PUT " + globItem, family: fam, verb: "write", param: "name", target: "global", handler: withWarnings(a.userKind(glob, a.objPut))},
		{pattern: "PATCH " + globItem, family: fam, verb: "write", param: "name", target: "global", handler: withWarnings(a.userKind(glob, a.objPatch))},
		{pattern: "DELETE " + globItem, family: fam, verb: "delete", param: "name", target: "global", handler: a.userKind(glob, a.objDelete)},
	}
}

// userKind resolves the {kind} of the request to its descriptor and runs the generic
// handler h builds for it; a kind of the other scope is a 404 that names the right path.
func (a *API) userKind(scope resource.Scope, h func(k *resource.Kind) authedHandler) authedHandler {
	return func(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
		name := r.PathValue("kind")
		if f, ok := r.Context().Value(filterSlot{}).(auth.Filter); ok && f.Empty() {
			// A list for a token with no scope of the family: refused before the kind is
			// looked up, so which kinds exist is not revealed.
			return fault.Forbidden("token %q has no scope of the resources family", p.Name)
		}
		k, err := a.resources.Kind(r.Context(), name)
		if err != nil {
			return err
		}
		if k.Family != resource.FamilyResources {
			return fault.NotFound("%s is a built-in kind: its objects are under /v1/%ss", name, strings.ToLower(name))
		}
		if k.Scope != scope {
			if k.Scope == resource.ScopeOrg {
				return fault.NotFound("kind %s lives in orgs: its objects are under /v1/orgs/{org}/resources/%s", name, name)
			}
			return fault.NotFound("kind %s is global: its objects are under /v1/resources/%s", name, name)
		}
		return h(k)(w, r, p)
	}
}

// withWarnings collects the warnings of the writes h makes (deprecated or tombstoned fields
// sent, grandfathered violations kept) and sends each as an RFC 9111 Warning header (code
// 299, as Kubernetes does), set before the status line is written.
func withWarnings(h authedHandler) authedHandler {
	return func(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
		ctx, warnings := resource.CollectWarnings(r.Context())
		return h(&warningWriter{ResponseWriter: w, warnings: warnings}, r.WithContext(ctx), p)
	}
}

type warningWriter struct {
	http.ResponseWriter
	warnings func() []string
	wrote    bool
}

func (w *warningWriter) WriteHeader(status int) {
	if !w.wrote {
		w.wrote = true
		for _, msg := range w.warnings() {
			w.Header().Add("Warning", "299 strata "+strconv.Quote(msg))
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *warningWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *warningWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// kindList lists every kind. It is all or nothing (kinds:read:*), as the audit log is: the
// registry describes the whole installation's data model.
func (a *API) kindList(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if !p.ListFilter("kinds", "read").All {
		return fault.Forbidden("token %q lacks scope kinds:read:*, which listing kinds needs", p.Name)
	}
	items, err := a.kinds.List(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

// kindPut registers a revision: 201 with the report when registered, 200 when the schema is
// unchanged or on ?dryRun=true, 409 with the report when a change is rejected or needs an
// acknowledgement the request does not carry.
func (a *API) kindPut(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	dryRun := false
	if s := r.URL.Query().Get("dryRun"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fault.Invalid("dryRun", "dryRun must be true or false, not %q", truncateParam(s))
		}
		dryRun = b
	}
	var req api.KindRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	res, err := a.kinds.Register(r.Context(), auditActor(r, p), r.PathValue("kind"), req, dryRun)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if dryRun || res.Unchanged {
		status = http.StatusOK
	} else {
		w.Header().Set("Location", "/v1/kinds/"+res.Kind+"/revisions/"+strconv.Itoa(res.Revision))
	}
	return writeJSON(w, status, res)
}

func (a *API) kindGet(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	k, err := a.kinds.Get(r.Context(), r.PathValue("kind"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, k)
}

func (a *API) kindRevisions(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	revs, err := a.kinds.Revisions(r.Context(), r.PathValue("kind"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"items": revs})
}

func (a *API) kindRevision(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	n, err := strconv.ParseInt(r.PathValue("n"), 10, 32) // revisions are int4 in the registry
	if err != nil || n < 1 {
		return fault.Invalid("n", "a revision is a positive integer, not %q", truncateParam(r.PathValue("n")))
	}
	rev, err := a.kinds.Revision(r.Context(), r.PathValue("kind"), int(n))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, rev)
}
