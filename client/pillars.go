package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// targetBase is the URL path of a pillar target's rows.
func targetBase(t PillarTarget) (string, error) {
	switch {
	case t.Global && t.Org == "" && t.Group == "" && t.Node == "":
		return "/v1/pillars/global", nil
	case t.Node != "" && !t.Global && t.Org == "" && t.Group == "":
		return "/v1/nodes/" + pathEscape(t.Node) + "/pillars", nil
	case t.Org != "" && t.Group != "" && !t.Global && t.Node == "":
		return "/v1/orgs/" + pathEscape(t.Org) + "/groups/" + pathEscape(t.Group) + "/pillars", nil
	case t.Org != "" && !t.Global && t.Node == "":
		return "/v1/orgs/" + pathEscape(t.Org) + "/pillars", nil
	}
	return "", fmt.Errorf("a pillar target is exactly one of: global, an org, a group of an org, a node")
}

// PillarSet stores data (a JSON object) as the target's category; ifMatch, when set, is the
// ETag the caller read (412 when the row changed since).
func (c *Client) PillarSet(ctx context.Context, t PillarTarget, category string, data json.RawMessage, ifMatch string) (Pillar, error) {
	base, err := targetBase(t)
	if err != nil {
		return Pillar{}, err
	}
	h := http.Header{}
	if ifMatch != "" {
		h.Set("If-Match", ifMatch)
	}
	var out Pillar
	hdr, err := c.Do(ctx, Request{Method: http.MethodPut, Path: base + "/" + pathEscape(category), RawBody: data, ContentType: "application/json", Header: h}, &out)
	if hdr != nil {
		out.ETag = hdr.Get("ETag")
		out.Warnings = Warnings(hdr)
	}
	return out, err
}

// PillarGet reads one category of a target.
func (c *Client) PillarGet(ctx context.Context, t PillarTarget, category string) (Pillar, error) {
	base, err := targetBase(t)
	if err != nil {
		return Pillar{}, err
	}
	var out Pillar
	hdr, err := c.Do(ctx, Request{Method: http.MethodGet, Path: base + "/" + pathEscape(category)}, &out)
	if hdr != nil {
		out.ETag = hdr.Get("ETag")
	}
	return out, err
}

// PillarDelete deletes one category of a target.
func (c *Client) PillarDelete(ctx context.Context, t PillarTarget, category, ifMatch string) error {
	base, err := targetBase(t)
	if err != nil {
		return err
	}
	h := http.Header{}
	if ifMatch != "" {
		h.Set("If-Match", ifMatch)
	}
	_, err = c.Do(ctx, Request{Method: http.MethodDelete, Path: base + "/" + pathEscape(category), Header: h}, nil)
	return err
}

// PillarList lists a target's categories (without data).
func (c *Client) PillarList(ctx context.Context, t PillarTarget) ([]Pillar, error) {
	base, err := targetBase(t)
	if err != nil {
		return nil, err
	}
	var out struct {
		Items []Pillar `json:"items"`
	}
	_, err = c.Do(ctx, Request{Method: http.MethodGet, Path: base}, &out)
	return out.Items, err
}

// PillarHistory reads a category's history, newest first (before: 0 or the id to continue below).
func (c *Client) PillarHistory(ctx context.Context, t PillarTarget, category string, before int64, limit int) ([]PillarChange, error) {
	base, err := targetBase(t)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if before > 0 {
		q.Set("before", fmt.Sprint(before))
	}
	if limit > 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	var out struct {
		Items []PillarChange `json:"items"`
	}
	_, err = c.Do(ctx, Request{Method: http.MethodGet, Path: base + "/" + pathEscape(category) + "/history", Query: q}, &out)
	return out.Items, err
}

// PillarRender reads a node's merged pillar; with explain, the answer is {"pillar", "explain"}.
func (c *Client) PillarRender(ctx context.Context, node string, explain bool) (json.RawMessage, error) {
	q := url.Values{}
	if explain {
		q.Set("explain", "true")
	}
	body, _, err := c.DoRaw(ctx, Request{Method: http.MethodGet, Path: "/v1/nodes/" + pathEscape(node) + "/pillar", Query: q})
	return body, err
}

// PillarImportOptions qualify an import.
type PillarImportOptions struct {
	Org             string
	DryRun          bool
	SkipUnsupported bool
}

// PillarImport sends a pillar tree to import in one transaction (or check, with DryRun).
func (c *Client) PillarImport(ctx context.Context, req PillarImportRequest, opts PillarImportOptions) (PillarImportReport, error) {
	q := url.Values{}
	if opts.Org != "" {
		q.Set("org", opts.Org)
	}
	if opts.DryRun {
		q.Set("dryRun", "true")
	}
	if opts.SkipUnsupported {
		q.Set("skipUnsupported", "true")
	}
	var out PillarImportReport
	_, err := c.Do(ctx, Request{Method: http.MethodPost, Path: "/v1/pillars:import", Query: q, Body: req}, &out)
	return out, err
}

// PillarImportStream is PillarImport with the server's NDJSON result stream: onRow is called
// for each row as the import's transaction writes it (item of the rows' count), and the report
// (with those rows) is returned once the transaction committed, or rolled back for DryRun.
// The rows are committed only then: an error after some rows means nothing was imported.
func (c *Client) PillarImportStream(ctx context.Context, req PillarImportRequest, opts PillarImportOptions, onRow func(row PillarImportRow, item, of int)) (PillarImportReport, error) {
	q := url.Values{}
	if opts.Org != "" {
		q.Set("org", opts.Org)
	}
	if opts.DryRun {
		q.Set("dryRun", "true")
	}
	if opts.SkipUnsupported {
		q.Set("skipUnsupported", "true")
	}
	b, err := json.Marshal(req)
	if err != nil {
		return PillarImportReport{}, fmt.Errorf("encode request: %w", err)
	}
	resp, err := c.stream(ctx, Request{Method: http.MethodPost, Path: "/v1/pillars:import", Query: q, ContentType: "application/json",
		Header: http.Header{"Accept": {"application/x-ndjson"}}}, bytes.NewReader(b))
	if err != nil {
		return PillarImportReport{}, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	var rows []PillarImportRow
	for {
		var line struct {
			PillarImportRow
			Item    int                 `json:"item"`
			Of      int                 `json:"of"`
			Summary *PillarImportReport `json:"summary"`
			Error   *Problem            `json:"error"`
		}
		if err := dec.Decode(&line); err != nil {
			return PillarImportReport{}, fmt.Errorf("reading the import results: %w", err)
		}
		switch {
		case line.Summary != nil:
			line.Summary.Rows = rows
			if line.Summary.Rows == nil {
				line.Summary.Rows = []PillarImportRow{}
			}
			return *line.Summary, nil
		case line.Error != nil:
			return PillarImportReport{}, &Error{Status: line.Error.Status, Problem: *line.Error}
		}
		rows = append(rows, line.PillarImportRow)
		if onRow != nil {
			onRow(line.PillarImportRow, line.Item, line.Of)
		}
	}
}

// SaltCredentials creates (or gives a new password to) the database role Salt's postgres
// ext_pillar logs in with; it may only execute strata.node_pillars.
func (c *Client) SaltCredentials(ctx context.Context) (SaltCredentials, error) {
	var out SaltCredentials
	_, err := c.Do(ctx, Request{Method: http.MethodPost, Path: "/v1/salt/credentials"}, &out)
	return out, err
}

// PillarSettingsGet reads the pillar settings.
func (c *Client) PillarSettingsGet(ctx context.Context) (PillarSettings, error) {
	var out PillarSettings
	_, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/v1/pillar-settings"}, &out)
	return out, err
}

// PillarSettingsSet changes the settings s names and answers all of them.
func (c *Client) PillarSettingsSet(ctx context.Context, s PillarSettings) (PillarSettings, error) {
	var out PillarSettings
	_, err := c.Do(ctx, Request{Method: http.MethodPut, Path: "/v1/pillar-settings", Body: s}, &out)
	return out, err
}

// PillarCategorySet sets a category's properties.
func (c *Client) PillarCategorySet(ctx context.Context, category string, req PillarCategoryRequest) (PillarCategory, error) {
	return c.PillarCategorySetIf(ctx, category, req, "")
}

// PillarCategorySetIf sets a category's properties if their ETag is still ifMatch (412
// otherwise; "" sets them unconditionally).
func (c *Client) PillarCategorySetIf(ctx context.Context, category string, req PillarCategoryRequest, ifMatch string) (PillarCategory, error) {
	var out PillarCategory
	r := Request{Method: http.MethodPut, Path: "/v1/pillar-categories/" + pathEscape(category), Body: req}
	if ifMatch != "" {
		r.Header = http.Header{"If-Match": {ifMatch}}
	}
	hdr, err := c.Do(ctx, r, &out)
	out.ETag = hdr.Get("ETag")
	return out, err
}

// PillarCategoryGet reads a category's properties.
func (c *Client) PillarCategoryGet(ctx context.Context, category string) (PillarCategory, error) {
	var out PillarCategory
	hdr, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/v1/pillar-categories/" + pathEscape(category)}, &out)
	out.ETag = hdr.Get("ETag")
	return out, err
}

// PillarCategoryDelete removes a category's properties (its rows stay).
func (c *Client) PillarCategoryDelete(ctx context.Context, category string) error {
	_, err := c.Do(ctx, Request{Method: http.MethodDelete, Path: "/v1/pillar-categories/" + pathEscape(category)}, nil)
	return err
}

// PillarCategories lists every category that has properties or rows.
func (c *Client) PillarCategories(ctx context.Context) ([]PillarCategory, error) {
	var out struct {
		Items []PillarCategory `json:"items"`
	}
	_, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/v1/pillar-categories"}, &out)
	return out.Items, err
}

// PillarExport exports the pillar rows of every org (org "") or of one org, with the global
// rows, as a Salt pillar tree.
func (c *Client) PillarExport(ctx context.Context, org string) (PillarExport, error) {
	var out PillarExport
	var q url.Values
	if org != "" {
		q = url.Values{"org": {org}} // in Query: a "?" in Path would be escaped into the path
	}
	_, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/v1/pillars:export", Query: q}, &out)
	return out, err
}

// PillarSyncExport returns the ndjson sync stream of every org (org "") or one org: kinds of
// bound categories, bindings, orgs, nodes with labels, groups and rows with their history.
func (c *Client) PillarSyncExport(ctx context.Context, org string) ([]byte, error) {
	q := url.Values{"format": {"ndjson"}}
	if org != "" {
		q.Set("org", org)
	}
	b, _, err := c.DoRaw(ctx, Request{Method: http.MethodGet, Path: "/v1/pillars:export", Query: q})
	return b, err
}

// PillarSyncImport applies an ndjson sync stream (PillarSyncExport's) idempotently; with
// dryRun it answers the plan and changes nothing.
func (c *Client) PillarSyncImport(ctx context.Context, stream []byte, dryRun bool) (PillarSyncReport, error) {
	var out PillarSyncReport
	q := url.Values{"format": {"ndjson"}}
	if dryRun {
		q.Set("dryRun", "true")
	}
	_, err := c.Do(ctx, Request{Method: http.MethodPost, Path: "/v1/pillars:import", Query: q, RawBody: stream, ContentType: "application/x-ndjson"}, &out)
	return out, err
}

// Keys reports the encryption keys and what references them.
func (c *Client) Keys(ctx context.Context) (KeyStatus, error) {
	var out KeyStatus
	_, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/v1/keys"}, &out)
	return out, err
}

// KeysRotate re-wraps up to limit values with the primary key.
func (c *Client) KeysRotate(ctx context.Context, limit int) (KeyRotation, error) {
	var out KeyRotation
	_, err := c.Do(ctx, Request{Method: http.MethodPost, Path: "/v1/keys:rotate", Body: map[string]int{"limit": limit}}, &out)
	return out, err
}
