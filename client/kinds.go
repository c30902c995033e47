package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// KindApply registers req as the next revision of kind; dryRun only reports. A rejected or
// unacknowledged change is an *Error with status 409 whose Problem carries the report
// (KindReportOf).
func (c *Client) KindApply(ctx context.Context, kind string, req KindRequest, dryRun bool) (KindResult, error) {
	var out KindResult
	var q url.Values
	if dryRun {
		q = url.Values{"dryRun": {"true"}}
	}
	_, err := c.Do(ctx, Request{Method: http.MethodPut, Path: "/v1/kinds/" + pathEscape(kind), Query: q, Body: req}, &out)
	return out, err
}

// Kinds lists the registered kinds.
func (c *Client) Kinds(ctx context.Context) ([]KindInfo, error) {
	var out struct {
		Items []KindInfo `json:"items"`
	}
	_, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/v1/kinds"}, &out)
	return out.Items, err
}

// Kind returns a kind with its current schema.
func (c *Client) Kind(ctx context.Context, kind string) (KindInfo, error) {
	var out KindInfo
	_, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/v1/kinds/" + pathEscape(kind)}, &out)
	return out, err
}

// KindRevisions lists a kind's revisions, oldest first.
func (c *Client) KindRevisions(ctx context.Context, kind string) ([]KindRevision, error) {
	var out struct {
		Items []KindRevision `json:"items"`
	}
	_, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/v1/kinds/" + pathEscape(kind) + "/revisions"}, &out)
	return out.Items, err
}

// KindRevision returns one revision of a kind.
func (c *Client) KindRevision(ctx context.Context, kind string, n int) (KindRevision, error) {
	var out KindRevision
	_, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/v1/kinds/" + pathEscape(kind) + "/revisions/" + strconv.Itoa(n)}, &out)
	return out, err
}

// Objects returns the objects of a user-defined kind: in org for kinds of scope "org",
// global ones when org is "".
func (c *Client) Objects(kind, org string) *Resources {
	if org == "" {
		return &Resources{c: c, base: "/v1/resources/" + pathEscape(kind)}
	}
	return &Resources{c: c, base: "/v1/orgs/" + pathEscape(org) + "/resources/" + pathEscape(kind)}
}

// Put creates obj, or replaces it when it exists (PUT), and returns it with the warnings
// the kind's schema gave (deprecated or removed fields sent, grandfathered violations).
func (r *Resources) Put(ctx context.Context, obj Object) (Object, []string, error) {
	var out Object
	h, err := r.c.Do(ctx, Request{Method: http.MethodPut, Path: r.path(obj.Metadata.Name), Body: obj}, &out)
	return out, Warnings(h), err
}

// Warnings returns the texts of a response's Warning headers (RFC 9111: code, agent, quoted text).
func Warnings(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Warning") {
		parts := strings.SplitN(v, " ", 3)
		if len(parts) == 3 {
			if s, err := strconv.Unquote(parts[2]); err == nil {
				out = append(out, s)
				continue
			}
		}
		out = append(out, v)
	}
	return out
}
