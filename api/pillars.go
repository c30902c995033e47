package api

import (
	"encoding/json"
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

// PillarSettings are the installation's pillar settings: whether lists merge (Salt's
// pillar_merge_lists) and what an unknown minion gets ("empty" or "error"). In a PUT, an
// absent member is left as it is.
type PillarSettings struct {
	MergeLists    *bool   `json:"mergeLists,omitempty"`
	UnknownMinion *string `json:"unknownMinion,omitempty"`
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

// PillarExport is a Salt pillar tree strata wrote from its rows: files by path.
type PillarExport struct {
	Files      map[string]string   `json:"files"`
	Rows       int                 `json:"rows"`
	Nodegroups map[string][]string `json:"nodegroups"`
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

// String is the target as the server names it in a row's "target" (global, org/ORG,
// group/ORG/GROUP, node/NODE): what `pillar get -o json` prints and `pillar set -f` compares.
func (t PillarTarget) String() string {
	switch {
	case t.Node != "":
		return "node/" + t.Node
	case t.Group != "":
		return "group/" + t.Org + "/" + t.Group
	case t.Org != "":
		return "org/" + t.Org
	}
	return "global"
}

// PillarRow is one pillar row as GET …/pillars/{category} answers it: the row, and whether
// its category is secret (then a reader without pillars:read-secrets on the target sees every
// value of Data as "(secret)").
type PillarRow struct {
	Pillar
	Secret bool `json:"secret"`
}
