package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/metadata"
	"github.com/stratahq/strata/internal/resource"
)

func truncateParam(s string) string { return fault.Truncate(s, 40) }

// filterSlot carries the list filter serveRoute computed for a listed route.
type filterSlot struct{}

// listFilter returns the filter serveRoute put in the context of a listed route; a route
// that is not listed sees everything its path check allowed.
func listFilter(r *http.Request) auth.Filter {
	if f, ok := r.Context().Value(filterSlot{}).(auth.Filter); ok {
		return f
	}
	return auth.Filter{All: true, Names: []string{}, Prefixes: []string{}}
}

// serveRoute authenticates, authorizes as rt says and then runs rt's handler.
func (a *API) serveRoute(rt route) http.Handler {
	limit := a.maxBody
	switch {
	case rt.stateBody:
		limit = a.maxState
	case rt.stream:
		limit = 0 // NDJSON streams are read line by line, each line bounded (see nodeApply)
	}
	return a.authedLimit(limit, func(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
		r, err := rt.authorize(r, p)
		if err != nil {
			return err
		}
		return rt.handler(w, r, p)
	})
}

// authorize checks the route's row for p before its handler runs: the name the row says —
// from the path, the body's metadata.name, or fixed — and for lists puts the filter pages are
// read with into the request's context. byHandler routes pass: their handler decides. The
// console asks the same question without running the handler (mayCall).
func (rt route) authorize(r *http.Request, p *auth.Principal) (*http.Request, error) {
	switch rt.source {
	case fromPath:
		return r, p.Check(rt.family, rt.verb, rt.scopeName(pathName(r, rt.param)))
	case fromBody:
		name, err := peekName(r)
		if err != nil {
			return r, err
		}
		return r, p.Check(rt.family, rt.verb, rt.scopeName(name))
	case fixedName:
		return r, p.Check(rt.family, rt.verb, rt.name)
	case listed:
		f := p.ListFilter(rt.family, rt.verb)
		if rt.target != "" {
			f = p.ListFilterTarget(rt.family, rt.verb, rt.target)
		}
		return r.WithContext(context.WithValue(r.Context(), filterSlot{}, f)), nil
	}
	return r, nil
}

// pathName is the value of the path parameters params names, joined with "/".
func pathName(r *http.Request, params string) string {
	names := strings.Split(params, "/")
	for i, n := range names {
		names[i] = r.PathValue(n)
	}
	return strings.Join(names, "/")
}

// scopeName is the name the route's scopes check for name: target/name for the families
// whose scopes name a target kind.
func (rt route) scopeName(name string) string {
	if rt.target == "" {
		return name
	}
	return auth.TargetName(rt.target, name)
}

// peekName decodes the (size-limited) JSON body as an object, as the create handler will,
// returns its metadata.name and leaves the body readable again for the handler.
func peekName(r *http.Request) (string, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return "", err
		}
		return "", fault.Invalid("", "reading the body: %v", err)
	}
	peek := r.Clone(r.Context())
	peek.Body = io.NopCloser(bytes.NewReader(body))
	r.Body = io.NopCloser(bytes.NewReader(body))
	var obj api.Object
	if err := decodeJSON(peek, &obj); err != nil {
		return "", err
	}
	if obj.Metadata.Name == "" {
		return "", fault.Invalid("/metadata/name", "metadata.name is required")
	}
	return obj.Metadata.Name, nil
}

// kindRoutes derives the routes of one kind from its descriptor: collection and item routes
// under /v1/<plural> for global kinds, /v1/orgs/{org}/<plural> for kinds inside an org.
// Global kinds are authorized by the object's name (lists filter by it in SQL); kinds inside
// an org by the org's name.
func (a *API) kindRoutes(k *resource.Kind) []route {
	coll := "/v1/" + k.Plural
	item := coll + "/{" + k.Param + "}"
	list := route{pattern: "GET " + coll, family: k.Family, verb: "read", source: listed, handler: a.objList(k)}
	create := route{pattern: "POST " + coll, family: k.Family, verb: "write", source: fromBody, handler: withWarnings(a.objCreate(k))}
	param := k.Param
	if k.Scope == resource.ScopeOrg {
		coll = "/v1/orgs/{org}/" + k.Plural
		item = coll + "/{" + k.Param + "}"
		list = route{pattern: "GET " + coll, family: k.Family, verb: "read", param: "org", handler: a.objList(k)}
		create = route{pattern: "POST " + coll, family: k.Family, verb: "write", param: "org", handler: withWarnings(a.objCreate(k))}
		param = "org"
	}
	rs := []route{
		list,
		create,
		{pattern: "GET " + item, family: k.Family, verb: "read", param: param, handler: a.objGet(k)},
		{pattern: "PUT " + item, family: k.Family, verb: "write", param: param, handler: withWarnings(a.objPut(k))},
		{pattern: "PATCH " + item, family: k.Family, verb: "write", param: param, handler: withWarnings(a.objPatch(k))},
		{pattern: "DELETE " + item, family: k.Family, verb: "delete", param: param, handler: a.objDelete(k)},
	}
	if k.Renamable && k.Scope != resource.ScopeOrg {
		rs = append(rs, route{pattern: "POST " + item + "/rename", family: k.Family, verb: "write", param: param, handler: a.objRename(k)})
	}
	return rs
}

// objRename renames an object in place ({"name": "<new name>"}): the path's name is
// authorized by the route; the new name and the references the object holds (a node's org)
// by the generic path (resource.Service.Rename), as for every renamable kind.
func (a *API) objRename(k *resource.Kind) authedHandler {
	return func(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
		var req struct {
			Name string `json:"name"`
		}
		if err := decodeJSON(r, &req); err != nil {
			return err
		}
		if req.Name == "" {
			return fault.Invalid("/name", "the new name is required")
		}
		obj, err := a.resources.Rename(r.Context(), kindRef(k, r, r.PathValue(k.Param)), req.Name)
		if err != nil {
			return err
		}
		w.Header().Set("Location", objectPath(k, obj))
		return writeJSON(w, http.StatusOK, obj)
	}
}

type authedHandler = func(w http.ResponseWriter, r *http.Request, p *auth.Principal) error

// ref names the object of kind k a request addresses.
func kindRef(k *resource.Kind, r *http.Request, name string) resource.Ref {
	ref := resource.Ref{Kind: k.Name, Name: name}
	if k.Scope == resource.ScopeOrg {
		ref.Org = r.PathValue("org")
	}
	return ref
}

// objectPath is the URL of one object, for Location headers.
func objectPath(k *resource.Kind, obj api.Object) string {
	if k.Scope == resource.ScopeOrg {
		return "/v1/orgs/" + obj.Metadata.Org + "/" + k.Plural + "/" + obj.Metadata.Name
	}
	return "/v1/" + k.Plural + "/" + obj.Metadata.Name
}

// parseSelector reads ?labelSelector=; a bad one is a 400 naming the parameter, the position
// and the problem.
func parseSelector(r *http.Request) (metadata.Selector, string, error) {
	raw := r.URL.Query().Get("labelSelector")
	sel, err := metadata.ParseSelector(raw)
	if err != nil {
		return sel, raw, fault.Invalid("labelSelector", "invalid label selector %q: %v", truncateParam(raw), err)
	}
	return sel, raw, nil
}

// objList lists one page, or serves a watch (?watch=true, watchList). The scope filter and the selector are bound in the query, so pages
// hold only what the token may see and what matches, and the continue token is sealed to the
// list's identity (kind, org and selector).
func (a *API) objList(k *resource.Kind) authedHandler {
	return func(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
		sel, _, err := parseSelector(r)
		if err != nil {
			return err
		}
		ref := kindRef(k, r, "")
		inOrg, err := a.listOrg(r, p, k)
		if err != nil {
			return err
		}
		watch, err := isWatch(r)
		if err != nil {
			return err
		}
		if watch {
			if k.Scope == resource.ScopeOrg {
				if err := a.orgExists(r.Context(), ref.Org); err != nil {
					return err
				}
			}
			return a.watchList(w, r, p, k, ref.Org, listFilter(r), sel, inOrg)
		}
		pg, err := a.page(r, k.Plural+"\x00"+ref.Org+"\x00"+sel.String()+"\x00"+inOrg, resource.MaxListLimit, resource.MaxListLimit)
		if err != nil {
			return err
		}
		var after string
		if err := pg.open(&after); err != nil {
			return err
		}
		if k.Scope == resource.ScopeOrg {
			if err := a.orgExists(r.Context(), ref.Org); err != nil {
				return err
			}
		}
		out, last, err := a.resources.List(r.Context(), k.Name, ref.Org, resource.ListOptions{
			Limit: pg.limit, After: after, Filter: listFilter(r), Selector: sel, InOrg: inOrg})
		if err != nil {
			return err
		}
		if out.Continue, err = pg.next(last != "", last); err != nil {
			return err
		}
		return writeObjectList(w, http.StatusOK, out)
	}
}

// listOrg reads ?org=ORG of a list or watch: the org whose objects a global kind with an org
// reference (Kind.OrgMember, a node's spec.org) keeps. A kind without one, or a kind inside an
// org (its org is in the path), refuses the parameter rather than ignore it. An org the token
// may not read answers exactly as a missing org (404), so the answer does not tell which orgs
// exist; the rows are still filtered by the list's own scopes (nodes:read).
func (a *API) listOrg(r *http.Request, p *auth.Principal, k *resource.Kind) (string, error) {
	org := r.URL.Query().Get("org")
	switch {
	case org == "":
		return "", nil
	case k.Scope == resource.ScopeOrg:
		return "", fault.Invalid("org", "%s objects live inside an org: name it in the path (/v1/orgs/{org}/%s), not in ?org=", k.Name, k.Plural)
	case k.OrgMember == "":
		return "", fault.Invalid("org", "%s objects belong to no org: list them without ?org=", k.Name)
	}
	if !p.Allows("orgs", "read", org) {
		return "", fault.NotFound("%s %q not found", resource.KindOrg, fault.Truncate(org, 80))
	}
	return org, a.orgExists(r.Context(), org)
}

// orgExists makes a list inside a missing org a 404 rather than an empty page.
func (a *API) orgExists(ctx context.Context, org string) error {
	_, err := a.resources.Get(ctx, resource.Ref{Kind: resource.KindOrg, Name: org})
	return err
}

func (a *API) objCreate(k *resource.Kind) authedHandler {
	return func(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
		var obj api.Object
		if err := decodeJSON(r, &obj); err != nil {
			return err
		}
		if obj.Metadata.Name == "" {
			return fault.Invalid("/metadata/name", "metadata.name is required")
		}
		created, err := a.resources.Create(r.Context(), kindRef(k, r, obj.Metadata.Name), obj)
		if err != nil {
			return err
		}
		w.Header().Set("Location", objectPath(k, created))
		return writeJSON(w, http.StatusCreated, created)
	}
}

func (a *API) objGet(k *resource.Kind) authedHandler {
	return func(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
		obj, err := a.resources.Get(r.Context(), kindRef(k, r, r.PathValue(k.Param)))
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, obj)
	}
}

// putAttempts bounds a blind PUT's replace-then-create rounds against writers that keep
// creating and deleting the object.
const putAttempts = 50

// objPut replaces an object, or creates it when it does not exist and the request carries
// no resourceVersion (so declarative tools can PUT blindly). Two concurrent creating PUTs
// end with one create and one replace, never an error. A blind PUT has no 404 to give: when
// the object is created and deleted again by others between its replace and its create, it
// tries again (the robustness harness found a 404 after one retry, issue 30) — at most
// putAttempts times, then the create's 409 says the object kept changing.
func (a *API) objPut(k *resource.Kind) authedHandler {
	return func(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
		ref := kindRef(k, r, r.PathValue(k.Param))
		var obj api.Object
		if err := decodeJSON(r, &obj); err != nil {
			return err
		}
		for attempt := 1; ; attempt++ {
			out, err := a.resources.Replace(r.Context(), ref, obj)
			if fault.KindOf(err) != fault.KindNotFound || obj.Metadata.ResourceVersion != "" {
				if err != nil {
					return err
				}
				return writeJSON(w, http.StatusOK, out)
			}
			out, err = a.resources.Create(r.Context(), ref, obj)
			if fault.KindOf(err) == fault.KindConflict && attempt < putAttempts && r.Context().Err() == nil {
				continue // created concurrently: replace it
			}
			if err != nil {
				return err
			}
			w.Header().Set("Location", objectPath(k, out))
			return writeJSON(w, http.StatusCreated, out)
		}
	}
}

func (a *API) objPatch(k *resource.Kind) authedHandler {
	return func(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
		if ct := r.Header.Get("Content-Type"); ct != "" && !isJSONContentType(ct) {
			return fault.Invalid("", "Content-Type must be application/merge-patch+json, not %q", ct)
		}
		patch, err := io.ReadAll(r.Body)
		if err != nil {
			var maxErr *http.MaxBytesError
			if errors.As(err, &maxErr) {
				return err
			}
			return fault.Invalid("", "reading the body: %v", err)
		}
		obj, err := a.resources.Patch(r.Context(), kindRef(k, r, r.PathValue(k.Param)), patch)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, obj)
	}
}

func (a *API) objDelete(k *resource.Kind) authedHandler {
	return func(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
		cascade := false
		if s := r.URL.Query().Get("cascade"); s != "" {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return fault.Invalid("cascade", "cascade must be true or false, not %q", truncateParam(s))
			}
			cascade = b
		}
		if err := a.resources.Delete(r.Context(), kindRef(k, r, r.PathValue(k.Param)), r.URL.Query().Get("resourceVersion"), cascade); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

// memberList lists a group's members (static ∪ selected), paged by node name.
func (a *API) memberList(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	org, group := r.PathValue("org"), r.PathValue("group")
	pg, err := a.page(r, "members\x00"+org+"\x00"+group, resource.MaxListLimit, resource.MaxListLimit)
	if err != nil {
		return err
	}
	var after string
	if err := pg.open(&after); err != nil {
		return err
	}
	out, last, err := a.resources.Members(r.Context(), org, group, after, pg.limit)
	if err != nil {
		return err
	}
	if out.Continue, err = pg.next(last != "", last); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

// memberPut makes a node a static member: 201 when new, 204 when it already was.
func (a *API) memberPut(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	added, err := a.resources.AddMember(r.Context(), r.PathValue("org"), r.PathValue("group"), r.PathValue("node"))
	if err != nil {
		return err
	}
	if added {
		w.WriteHeader(http.StatusCreated)
	} else {
		w.WriteHeader(http.StatusNoContent)
	}
	return nil
}

// memberDelete ends a static membership; idempotent (204 either way).
func (a *API) memberDelete(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if _, err := a.resources.RemoveMember(r.Context(), r.PathValue("org"), r.PathValue("group"), r.PathValue("node")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
