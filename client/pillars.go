package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// PillarTarget names what a pillar row belongs to: exactly one of Global, an Org, a Group of
// an Org, or a Node.
type PillarTarget struct {
	Global bool
	Org    string
	Group  string // with Org
	Node   string
}

func (t PillarTarget) base() (string, error) {
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

// Pillar is one pillar row.
type Pillar struct {
	Target   string          `json:"target"`
	Category string          `json:"category"`
	Data     json.RawMessage `json:"data,omitempty"`
	// Secret says the row is a secret category's: Data is masked ("(secret)" leaves) unless
	// the token holds pillars:read-secrets on the target (docs/security.md).
	Secret    bool      `json:"secret,omitempty"`
	Revision  int64     `json:"revision"`
	UpdatedAt time.Time `json:"updatedAt"`
	UpdatedBy string    `json:"updatedBy"`
	// ETag is the row version's ETag (from the response header), for If-Match.
	ETag string `json:"-"`
	// Warnings are the write's Warning headers (a typed category's deprecated fields, kept
	// violations).
	Warnings []string `json:"-"`
}

// PillarChange is one entry of a category's history.
type PillarChange struct {
	ID       int64           `json:"id"`
	Revision int64           `json:"revision"`
	Old      json.RawMessage `json:"old"`
	New      json.RawMessage `json:"new"`
	Actor    string          `json:"actor"`
	At       time.Time       `json:"at"`
	// Secret says the entry's values are a secret category's (masked unless the reader
	// holds pillars:read-secrets on the target).
	Secret bool `json:"secret,omitempty"`
	// ImportedBy and ImportedAt mark an entry a sync import added (strata pillar import
	// --format ndjson): who imported it and when. Actor and At are then what the imported
	// stream claimed, which this installation did not witness.
	ImportedBy string     `json:"importedBy,omitempty"`
	ImportedAt *time.Time `json:"importedAt,omitempty"`
}

// PillarSet stores data (a JSON object) as the target's category; ifMatch, when set, is the
// ETag the caller read (412 when the row changed since).
func (c *Client) PillarSet(ctx context.Context, t PillarTarget, category string, data json.RawMessage, ifMatch string) (Pillar, error) {
	base, err := t.base()
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
	base, err := t.base()
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
	base, err := t.base()
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
	base, err := t.base()
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
	base, err := t.base()
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

// PillarImportRequest is a file-based pillar tree for PillarImport: file contents by path
// relative to the tree's root (top.sls, apache.sls, users/init.sls, …).
type PillarImportRequest struct {
	Files      map[string]string   `json:"files"`
	Env        string              `json:"env,omitempty"`
	Nodegroups map[string][]string `json:"nodegroups,omitempty"`
	// Decrypted maps the armored PGP messages in Files to their plaintext, decrypted on the
	// client's side (the server holds no private key); the values holding them are imported
	// as secrets, and messages it lacks are refused by file and line.
	Decrypted map[string]string `json:"decrypted,omitempty"`
}

// PillarImportOptions qualify an import.
type PillarImportOptions struct {
	Org             string
	DryRun          bool
	SkipUnsupported bool
}

// PillarImportRow is one pillar row of an import and what the import did with it (created,
// updated or unchanged).
type PillarImportRow struct {
	Target   string   `json:"target"`
	Category string   `json:"category"`
	Sources  []string `json:"sources"`
	Match    string   `json:"match"`
	Action   string   `json:"action"`
	Secret   bool     `json:"secret"`
}

// PillarImportReport is what an import did, or with DryRun would do.
type PillarImportReport struct {
	Org    string            `json:"org"`
	Rows   []PillarImportRow `json:"rows"`
	Groups []struct {
		Name     string   `json:"name"`
		Match    string   `json:"match"`
		Members  []string `json:"members"`
		Selector string   `json:"selector"`
		Snapshot bool     `json:"snapshot"`
		Created  bool     `json:"created"`
	} `json:"groups"`
	CreatedNodes []string `json:"createdNodes"`
	Unsupported  []struct {
		File   string `json:"file"`
		Line   int    `json:"line"`
		Reason string `json:"reason"`
	} `json:"unsupported"`
	DryRun  bool `json:"dryRun"`
	Applied bool `json:"applied"`
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

// SaltCredentials are what a Salt master needs to read pillars through strata.node_pillars.
type SaltCredentials struct {
	Role         string `json:"role"`
	Password     string `json:"password"`
	ConnString   string `json:"connString"`
	Host         string `json:"host"`
	Port         string `json:"port"`
	Database     string `json:"database"`
	MasterConfig string `json:"masterConfig"`
}

// SaltCredentials creates (or gives a new password to) the database role Salt's postgres
// ext_pillar logs in with; it may only execute strata.node_pillars.
func (c *Client) SaltCredentials(ctx context.Context) (SaltCredentials, error) {
	var out SaltCredentials
	_, err := c.Do(ctx, Request{Method: http.MethodPost, Path: "/v1/salt/credentials"}, &out)
	return out, err
}

// PillarSettings are the installation's pillar settings: whether lists merge (Salt's
// pillar_merge_lists) and what an unknown minion gets ("empty" or "error"). In a PUT, an
// absent member is left as it is.
type PillarSettings struct {
	MergeLists    *bool   `json:"mergeLists,omitempty"`
	UnknownMinion *string `json:"unknownMinion,omitempty"`
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

// PillarCategory is a category's properties, which apply at every target: Kind binds it to a
// kind whose schema validates every row of the category (a typed category, a formula). Rows
// counts the category's rows at all targets.
type PillarCategory struct {
	Category  string     `json:"category"`
	Kind      string     `json:"kind,omitempty"`
	Rows      int64      `json:"rows"`
	UpdatedAt *time.Time `json:"updatedAt,omitempty"`
	UpdatedBy string     `json:"updatedBy,omitempty"`
	// Represented counts the rows a binding rewrote to fill the kind's defaults in.
	Represented int `json:"represented,omitempty"`
	// Secret says every row of the category is stored encrypted and shown masked
	// ("(secret)" leaves) to readers without pillars:read-secrets on its target.
	Secret bool `json:"secret"`
	// Converted counts the rows and history entries a change of Secret re-stored.
	Converted int `json:"converted,omitempty"`
	// ETag identifies these properties (the answer's ETag header): PillarCategorySetIf with
	// it changes them only if nobody has meanwhile.
	ETag string `json:"-"`
}

// PillarCategoryRequest sets a category's properties (PUT replaces them all): Kind, when not
// empty, binds the category to that kind.
type PillarCategoryRequest struct {
	Kind string `json:"kind,omitempty"`
	// Secret stores the category's rows encrypted at every target (existing rows are
	// converted in the same request) and masks them for readers without
	// pillars:read-secrets; false stores them in plaintext again.
	Secret bool `json:"secret,omitempty"`
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

// PillarExport is a Salt pillar tree strata wrote from its rows: files by path.
type PillarExport struct {
	Files      map[string]string   `json:"files"`
	Rows       int                 `json:"rows"`
	Nodegroups map[string][]string `json:"nodegroups"`
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

// PillarSyncAction is what a sync import did with one record.
type PillarSyncAction struct {
	Type    string `json:"type"`
	Name    string `json:"name"`
	Action  string `json:"action"`
	History int    `json:"history,omitempty"`
}

// PillarSyncReport is a sync import's plan.
type PillarSyncReport struct {
	Items   []PillarSyncAction `json:"items"`
	DryRun  bool               `json:"dryRun"`
	Applied bool               `json:"applied"`
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

// KeyStatus is what GET /v1/keys reports: the keys the answering replica holds (the primary
// first, which encrypts new values), how many stored values each key wraps (every key any
// value references, held or not), and which held keys may be retired (no value references
// them) or are missing (values reference them, this replica cannot open them).
type KeyStatus struct {
	Primary   string           `json:"primary"`
	Keys      []string         `json:"keys"`
	Sealed    map[string]int64 `json:"sealed"`
	Retirable []string         `json:"retirable"`
	// Missing are the keys values need that the answering replica lacks: it is not ready,
	// and `strata keys rotate` cannot re-wrap them; start it with the key files holding them.
	Missing []string `json:"missing"`
	// Referenced are the key ids the database records its sealed values under (issue 28):
	// a replica must hold every one of them to be ready.
	Referenced []string `json:"referenced"`
	// Remaining counts the values not yet wrapped by the primary key (what a rotation has
	// left to do).
	Remaining int64 `json:"remaining"`
}

// KeyRotation is one batch of a rotation (POST /v1/keys:rotate).
type KeyRotation struct {
	Rewrapped int   `json:"rewrapped"`
	Remaining int64 `json:"remaining"`
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
