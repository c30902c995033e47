package httpapi

import (
	"errors"
	"io"
	"net/http"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/resource"
)

func orgRef(r *http.Request) resource.Ref {
	return resource.Ref{Kind: resource.KindOrg, Name: r.PathValue("org")}
}

func truncateParam(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// orgList lists the orgs the token may read. The scope filter is part of the query, so a
// page holds visible orgs only, and the continue token is sealed (see page).
func (a *API) orgList(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	const list = "orgs"
	pg, err := a.page(r, list, resource.MaxListLimit, resource.MaxListLimit)
	if err != nil {
		return err
	}
	var after string
	if err := pg.open(&after); err != nil {
		return err
	}
	out, last, err := a.resources.List(r.Context(), resource.KindOrg, "", resource.ListOptions{
		Limit: pg.limit, After: after, Filter: p.ListFilter("orgs", "read")})
	if err != nil {
		return err
	}
	if out.Continue, err = pg.next(last != "", last); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

func (a *API) orgCreate(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	var obj client.Object
	if err := decodeJSON(r, &obj); err != nil {
		return err
	}
	if obj.Metadata.Name == "" {
		return fault.Invalid("/metadata/name", "metadata.name is required")
	}
	if err := p.Check("orgs", "write", obj.Metadata.Name); err != nil {
		return err
	}
	ref := resource.Ref{Kind: resource.KindOrg, Name: obj.Metadata.Name}
	created, err := a.resources.Create(r.Context(), ref, obj)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/orgs/"+created.Metadata.Name)
	return writeJSON(w, http.StatusCreated, created)
}

func (a *API) orgGet(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	ref := orgRef(r)
	if err := p.Check("orgs", "read", ref.Name); err != nil {
		return err
	}
	obj, err := a.resources.Get(r.Context(), ref)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, obj)
}

// orgPut replaces an org, or creates it when it does not exist and the request carries no
// resourceVersion (so declarative tools can PUT blindly). Two concurrent creating PUTs end
// with one create and one replace, never an error.
func (a *API) orgPut(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	ref := orgRef(r)
	if err := p.Check("orgs", "write", ref.Name); err != nil {
		return err
	}
	var obj client.Object
	if err := decodeJSON(r, &obj); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		out, err := a.resources.Replace(r.Context(), ref, obj)
		if fault.KindOf(err) != fault.KindNotFound || obj.Metadata.ResourceVersion != "" || attempt > 0 {
			if err != nil {
				return err
			}
			return writeJSON(w, http.StatusOK, out)
		}
		out, err = a.resources.Create(r.Context(), ref, obj)
		if fault.KindOf(err) == fault.KindConflict {
			continue // created concurrently: replace it
		}
		if err != nil {
			return err
		}
		w.Header().Set("Location", "/v1/orgs/"+out.Metadata.Name)
		return writeJSON(w, http.StatusCreated, out)
	}
}

func (a *API) orgPatch(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	ref := orgRef(r)
	if err := p.Check("orgs", "write", ref.Name); err != nil {
		return err
	}
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
	obj, err := a.resources.Patch(r.Context(), ref, patch)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, obj)
}

func (a *API) orgDelete(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	ref := orgRef(r)
	if err := p.Check("orgs", "delete", ref.Name); err != nil {
		return err
	}
	if err := a.resources.Delete(r.Context(), ref, r.URL.Query().Get("resourceVersion")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
