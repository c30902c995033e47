package httpapi

import (
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/resource"
)

func orgRef(r *http.Request) resource.Ref {
	return resource.Ref{Kind: resource.KindOrg, Name: r.PathValue("org")}
}

// listOptions reads ?limit= and ?continue=.
func listOptions(r *http.Request) (resource.ListOptions, error) {
	var opts resource.ListOptions
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > resource.MaxListLimit {
			return opts, fault.Invalid("limit", "limit must be an integer from 1 to %d, not %q", resource.MaxListLimit, truncateParam(s))
		}
		opts.Limit = n
	}
	opts.Continue = r.URL.Query().Get("continue")
	return opts, nil
}

func truncateParam(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func (a *API) orgList(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	opts, err := listOptions(r)
	if err != nil {
		return err
	}
	list, err := a.resources.List(r.Context(), resource.KindOrg, "", opts)
	if err != nil {
		return err
	}
	// A token scoped to some orgs sees only those.
	visible := list.Items[:0]
	for _, o := range list.Items {
		if p.Allows("orgs", "read", o.Metadata.Name) {
			visible = append(visible, o)
		}
	}
	list.Items = visible
	return writeJSON(w, http.StatusOK, list)
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
