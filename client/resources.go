package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Resources reads and writes the objects of one kind (in one org, for kinds that live in
// orgs). Every kind goes through it, so orgs, nodes, groups and user kinds share one code
// path in the client as they do in the server.
type Resources struct {
	c    *Client
	base string // e.g. /v1/nodes or /v1/orgs/acme/groups
}

// Resources returns the client of the kind whose plural is plural; org is "" for global
// kinds (orgs, nodes) and the org's name for kinds inside an org (groups).
func (c *Client) Resources(plural, org string) *Resources {
	if org == "" {
		return &Resources{c: c, base: "/v1/" + pathEscape(plural)}
	}
	return &Resources{c: c, base: "/v1/orgs/" + pathEscape(org) + "/" + pathEscape(plural)}
}

// Orgs returns the client of orgs.
func (c *Client) Orgs() *Resources { return c.Resources("orgs", "") }

// Nodes returns the client of nodes.
func (c *Client) Nodes() *Resources { return c.Resources("nodes", "") }

// Groups returns the client of the groups of org.
func (c *Client) Groups(org string) *Resources { return c.Resources("groups", org) }

func (r *Resources) path(name string) string { return r.base + "/" + pathEscape(name) }

// Create creates obj (its Metadata.Name names it).
func (r *Resources) Create(ctx context.Context, obj Object) (Object, error) {
	var out Object
	_, err := r.c.Do(ctx, Request{Method: http.MethodPost, Path: r.base, Body: obj}, &out)
	return out, err
}

// Get reads one object.
func (r *Resources) Get(ctx context.Context, name string) (Object, error) {
	var out Object
	_, err := r.c.Do(ctx, Request{Method: http.MethodGet, Path: r.path(name)}, &out)
	return out, err
}

// List reads one page; opts.Continue is the previous page's Continue.
func (r *Resources) List(ctx context.Context, opts ListOptions) (ObjectList, error) {
	var out ObjectList
	_, err := r.c.Do(ctx, Request{Method: http.MethodGet, Path: r.base, Query: opts.values()}, &out)
	return out, err
}

// ListAll follows continue tokens to the end and returns every object, with the
// resourceVersion of the last page.
func (r *Resources) ListAll(ctx context.Context, opts ListOptions) (ObjectList, error) {
	all := ObjectList{Items: []Object{}}
	for {
		page, err := r.List(ctx, opts)
		if err != nil {
			return all, err
		}
		all.Items = append(all.Items, page.Items...)
		all.ResourceVersion = page.ResourceVersion
		if page.Continue == "" {
			return all, nil
		}
		opts.Continue = page.Continue
	}
}

// Replace replaces obj, or creates it when it does not exist and carries no
// resourceVersion; a set Metadata.ResourceVersion is a precondition (409 when stale).
func (r *Resources) Replace(ctx context.Context, obj Object) (Object, error) {
	var out Object
	_, err := r.c.Do(ctx, Request{Method: http.MethodPut, Path: r.path(obj.Metadata.Name), Body: obj}, &out)
	return out, err
}

// Patch applies a JSON merge patch (RFC 7396): a key set to null is deleted.
func (r *Resources) Patch(ctx context.Context, name string, patch []byte) (Object, error) {
	var out Object
	_, err := r.c.Do(ctx, Request{Method: http.MethodPatch, Path: r.path(name), RawBody: patch, ContentType: "application/merge-patch+json"}, &out)
	return out, err
}

// DeleteOptions qualify a deletion.
type DeleteOptions struct {
	// ResourceVersion, when set, deletes only if the object is still at it.
	ResourceVersion string
	// Cascade deletes what depends on the object (an org's nodes and groups) with it
	// instead of refusing with 409.
	Cascade bool
}

// Delete deletes one object.
func (r *Resources) Delete(ctx context.Context, name string, opts DeleteOptions) error {
	q := url.Values{}
	if opts.ResourceVersion != "" {
		q.Set("resourceVersion", opts.ResourceVersion)
	}
	if opts.Cascade {
		q.Set("cascade", "true")
	}
	_, err := r.c.Do(ctx, Request{Method: http.MethodDelete, Path: r.path(name), Query: q}, nil)
	return err
}

// Rename gives the object a new name in place (POST …/{name}/rename): its labels,
// annotations, memberships and pillars follow it. Only renamable kinds (nodes) accept it.
func (r *Resources) Rename(ctx context.Context, name, newName string) (Object, error) {
	var out Object
	_, err := r.c.Do(ctx, Request{Method: http.MethodPost, Path: r.path(name) + "/rename", Body: map[string]string{"name": newName}}, &out)
	return out, err
}

// AddMember makes node a static member of group (r must be Groups(org)).
func (r *Resources) AddMember(ctx context.Context, group, node string) error {
	_, err := r.c.Do(ctx, Request{Method: http.MethodPut, Path: r.path(group) + "/members/" + pathEscape(node)}, nil)
	return err
}

// RemoveMember ends node's static membership of group.
func (r *Resources) RemoveMember(ctx context.Context, group, node string) error {
	_, err := r.c.Do(ctx, Request{Method: http.MethodDelete, Path: r.path(group) + "/members/" + pathEscape(node)}, nil)
	return err
}

// Members lists every member of group (static and selected), following continue tokens.
func (r *Resources) Members(ctx context.Context, group string) ([]Member, error) {
	items := []Member{}
	q := url.Values{}
	for {
		var page MemberList
		if _, err := r.c.Do(ctx, Request{Method: http.MethodGet, Path: r.path(group) + "/members", Query: q}, &page); err != nil {
			return items, err
		}
		items = append(items, page.Items...)
		if page.Continue == "" {
			return items, nil
		}
		q = url.Values{"continue": {page.Continue}}
	}
}

func (o ListOptions) values() url.Values {
	v := url.Values{}
	if o.Limit > 0 {
		v.Set("limit", fmt.Sprint(o.Limit))
	}
	if o.Continue != "" {
		v.Set("continue", o.Continue)
	}
	if o.LabelSelector != "" {
		v.Set("labelSelector", o.LabelSelector)
	}
	if o.Org != "" {
		v.Set("org", o.Org)
	}
	return v
}

// NodeApply streams an NDJSON inventory (one node object per line, optionally with
// "groups": [...], its complete static memberships) to POST /v1/nodes:apply and calls
// onResult for every line's result as the server reports it. The error is for the request as
// a whole; per-line failures are results with Result "error" and a Problem.
func (c *Client) NodeApply(ctx context.Context, body io.Reader, onResult func(ApplyResult)) (ApplySummary, error) {
	resp, err := c.stream(ctx, Request{Method: http.MethodPost, Path: "/v1/nodes:apply", ContentType: "application/x-ndjson"}, body)
	if err != nil {
		return ApplySummary{}, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var line struct {
			ApplyResult
			Summary *ApplySummary `json:"summary"`
		}
		if err := dec.Decode(&line); err != nil {
			return ApplySummary{}, fmt.Errorf("reading the apply results: %w", err)
		}
		if line.Summary != nil {
			return *line.Summary, nil
		}
		if onResult != nil {
			onResult(line.ApplyResult)
		}
	}
}
