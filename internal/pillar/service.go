package pillar

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/jsondepth"
	"github.com/stratahq/strata/internal/kind"
	"github.com/stratahq/strata/internal/metadata"
	"github.com/stratahq/strata/internal/pillar/merge"
	"github.com/stratahq/strata/internal/resource"
	"github.com/stratahq/strata/internal/sabotage"
	"github.com/stratahq/strata/internal/secret"
)

//go:embed queries.sql
var queryFS embed.FS

var q = db.MustParseQueries(queryFS, "queries.sql")

// The merge's types, named here because the service's API speaks them.
type (
	Layer       = merge.Layer
	Options     = merge.Options
	Explanation = merge.Explanation
	Source      = merge.Source
)

// Target is what a pillar row belongs to: global, an org, a group of an org, or a node.
type Target struct {
	// Kind is "global", "org", "group" or "node".
	Kind  string
	Org   string // org and group targets
	Group string // group targets
	Node  string // node targets
}

// Global is the global target.
var Global = Target{Kind: "global"}

// String names the target in history and explanations: global, org/acme, group/acme/web,
// node/web01.
func (t Target) String() string {
	switch t.Kind {
	case "org":
		return "org/" + t.Org
	case "group":
		return "group/" + t.Org + "/" + t.Group
	case "node":
		return "node/" + t.Node
	}
	return "global"
}

// ScopeName is the name pillar scopes check for the target, its target kind first (the
// grammar of internal/auth): "global", org/<org>, group/<org>/<group> or node/<node>, so a
// grant for nodes web* never reaches an org called webshop.
func (t Target) ScopeName() string { return t.String() }

var categoryRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)

// ValidateCategory checks a category name: [a-z0-9][a-z0-9_.-]*, at most 100 characters.
func ValidateCategory(c string) error {
	if len(c) > 100 || !categoryRE.MatchString(c) {
		return fault.Invalid("category", "category %q must be 1-100 characters of a-z, 0-9, '_', '.' and '-', starting with a letter or digit", fault.Truncate(c, 120))
	}
	return nil
}

// Pillar is one stored row.
type Pillar struct {
	Target   string         `json:"target"`
	Category string         `json:"category"`
	Data     map[string]any `json:"data"`
	// Secret says the category is secret: Data is masked ("(secret)" leaves) unless the
	// reader holds pillars:read-secrets on the target.
	Secret    bool      `json:"secret,omitempty"`
	Revision  int64     `json:"revision"`
	UpdatedAt time.Time `json:"updatedAt"`
	UpdatedBy string    `json:"updatedBy"`
	// ETag identifies this version of the row (row id and revision: a row deleted and created
	// again never repeats an earlier ETag).
	ETag string `json:"-"`
	// Warnings of a write of a typed category (deprecated fields, ratcheted errors), for
	// HTTP Warning headers.
	Warnings []string `json:"-"`
}

// Service stores pillars and renders the merged pillar of a node.
type Service struct {
	db *db.DB
	// ClientURL is how clients outside strata (a Salt master) reach its database; the pool's
	// own URL when empty.
	ClientURL string
	// cache, when set (UseCache), serves renders until an invalidation.
	cache *Cache
	// memo remembers rows' canonical text across renders (merge.Memo; never secret rows'
	// plaintext).
	memo *merge.Memo
	// kinds validates the rows of typed categories (UseKinds).
	kinds *kind.Service
	// keys seals the rows of secret categories (UseKeys; nil: none, and secret categories
	// are refused naming the flag).
	keys *secret.Keyring
}

// UseKeys gives the service the key-encryption keys secret categories are sealed with.
func (s *Service) UseKeys(k *secret.Keyring) { s.keys = k }

// UseCache makes Render serve from c (which must be kept subscribed by c.Listen).
func (s *Service) UseCache(c *Cache) { s.cache = c }

// wrote drops this replica's cached renders after one of its own writes has ended, before
// the write answers: NOTIFY reaches this replica only after that, and a render served in
// between would predate a write the replica acknowledged (read-your-writes). Writes of
// objects, labels and memberships reach it through resource.Service.OnWrite.
func (s *Service) wrote(scopes ...string) {
	if s.cache != nil && !sabotage.Active("cachedrop") {
		s.cache.InvalidateScopes(strings.Join(scopes, " "))
	}
}

// InvalidateCache drops this replica's cached renders the scopes name (node:<name>,
// org:<name>, *; none: all) — see wrote; the server connects it to resource.Service.OnWrite.
func (s *Service) InvalidateCache(scopes ...string) { s.wrote(scopes...) }

// scope is the cache scope of the renders a row of target t can change.
func (t Target) scope() string {
	switch t.Kind {
	case "node":
		return "node:" + t.Node
	case "org", "group":
		return "org:" + t.Org
	}
	return "*"
}

// NewService returns a Service over d.
func NewService(d *db.DB) *Service { return &Service{db: d, memo: merge.NewMemo(RowMemoBytes)} }

// RowMemo is the replica's memo of shared rows' canonical text (tests check what it keeps).
func (s *Service) RowMemo() *merge.Memo { return s.memo }

// RowMemoBytes bounds the memo of rows' canonical text that plain renders share
// (merge.Memo): the rows many nodes' renders read (global, org and group rows) are split and
// rewritten once, not on every render the cache does not answer. 32 MiB holds about 16,000
// rows of the benchmark's 1 KB.
const RowMemoBytes = 32 << 20

// lockTarget returns the resources row the target is stored under, locked FOR SHARE (nil: global).
func lockTarget(ctx context.Context, tx *db.Tx, t Target) (*int64, error) {
	step, id, err := targetLockStep(t)
	if err != nil || step == nil {
		return nil, err
	}
	return id, targetFound(t, tx.Pipeline(ctx, *step))
}

// targetLockStep is lockTarget's statement, for a pipeline; nil for the global target. The
// row id lands in the returned pointer.
func targetLockStep(t Target) (*db.Step, *int64, error) {
	var kind, org, name string
	switch t.Kind {
	case "global":
		return nil, nil, nil
	case "org":
		kind, name = resource.KindOrg, t.Org
	case "group":
		kind, org, name = resource.KindGroup, t.Org, t.Group
	case "node":
		kind, name = resource.KindNode, t.Node
	default:
		return nil, nil, fmt.Errorf("pillar: unknown target kind %q", t.Kind)
	}
	id := new(int64)
	return &db.Step{Query: q.Get("TargetLock"), Args: []any{kind, org, name}, Scan: func(r db.Row) error { return r.Scan(id) }}, id, nil
}

// targetFound turns a missing target row into the 404 naming the target.
func targetFound(t Target, err error) error {
	if errors.Is(err, db.ErrNotFound) {
		return fault.NotFound("%s not found", t)
	}
	return err
}

func targetKind(t Target) string {
	return map[string]string{"global": "global", "org": resource.KindOrg, "group": resource.KindGroup, "node": resource.KindNode}[t.Kind]
}

func etag(id, revision int64) string {
	return `"` + strconv.FormatInt(id, 36) + "." + strconv.FormatInt(revision, 10) + `"`
}

// DecodeValue decodes one JSON value, numbers kept exact.
func DecodeValue(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// DecodeObject decodes a pillar body: a JSON object (numbers kept exact). Anything else is a 422.
func DecodeObject(body []byte) (map[string]any, error) {
	if !utf8.Valid(body) {
		return nil, fault.UnprocessableFields("a pillar must be valid UTF-8 JSON", []fault.FieldError{{Field: "", Message: "invalid UTF-8"}})
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fault.Invalid("", "the body is not JSON: %v", err)
	}
	if dec.More() {
		return nil, fault.Invalid("", "the body holds more than one JSON value")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fault.UnprocessableFields("a pillar must be a JSON object", []fault.FieldError{{Field: "", Message: "must be a JSON object (Salt needs a mapping at the top of a pillar)"}})
	}
	if bytes.Contains(body, []byte(`\u0000`)) {
		return nil, fault.UnprocessableFields("a pillar cannot hold the NUL character", []fault.FieldError{{Field: "", Message: "must not contain \\u0000, which PostgreSQL cannot store"}})
	}
	return m, nil
}

// Put stores data as the target's category, creating or replacing it. ifMatch, when not
// empty, is the ETag the caller read ("*": the row must exist); a mismatch is a 412, so two
// tools editing one category cannot silently overwrite each other. It returns the stored row
// and whether it was created.
func (s *Service) Put(ctx context.Context, t Target, category string, data map[string]any, ifMatch, actor string) (Pillar, bool, error) {
	if err := ValidateCategory(category); err != nil {
		return Pillar{}, false, err
	}
	// Every pillar write (PUT, restore, sync and Salt-tree imports) comes through here.
	if err := jsondepth.Check(data, ""); err != nil {
		return Pillar{}, false, err
	}
	body, err := json.Marshal(data)
	if err != nil {
		return Pillar{}, false, fault.Invalid("", "%v", err)
	}
	var out Pillar
	var created bool
	defer s.wrote(t.scope())
	err = s.db.InTx(ctx, func(tx *db.Tx) error {
		props, rid, err := s.lockForWrite(ctx, tx, t, category)
		if err != nil {
			return err
		}
		kindName := props.kind
		if props.secret {
			if at := maskedLeaf(data, ""); at != "" {
				return fault.UnprocessableFields("a secret category's value cannot hold the mask", []fault.FieldError{{Field: at,
					Message: `is "` + secret.Masked + `", what strata shows in place of a secret to readers without pillars:read-secrets: write the real value (a reader with that scope sees it)`}})
			}
		}
		for attempt := 0; attempt < 2; attempt++ {
			var (
				id, rev   int64
				old       []byte
				oldSealed []byte
			)
			getErr := tx.QueryRow(ctx, q.Get("PillarGetForUpdate"), rid, category).Scan(&id, &old, &oldSealed, &rev)
			missing := errors.Is(getErr, db.ErrNotFound)
			if getErr != nil && !missing {
				return getErr
			}
			if missing && ifMatch != "" {
				return fault.New(fault.KindPreconditionFailed, "%s has no pillar %q, but If-Match asked for %s", t, category, ifMatch)
			}
			if !missing && ifMatch != "" && ifMatch != "*" && ifMatch != etag(id, rev) {
				return fault.New(fault.KindPreconditionFailed, "pillar %q of %s has changed: its ETag is %s, If-Match asked for %s", category, t, etag(id, rev), ifMatch)
			}
			stored, stored2 := body, data
			var (
				kindRev  any
				warnings []string
			)
			// A secret row's writer who may not read it learns nothing of it from the kind's
			// answer: no ratcheting or alias comparison against the stored value (either says
			// whether a guess equals it), and no message quoting a value (a restore or a sync
			// writes a value the writer never saw).
			blind := props.secret && !MayReadSecrets(ctx, t.ScopeName())
			oldPlain := old
			switch {
			case blind:
				oldPlain = nil
			case oldSealed != nil && kindName != "":
				// Ratcheting compares with the stored value itself.
				if oldPlain, err = s.open(t, category, old, oldSealed); err != nil {
					return err
				}
			}
			if kindName != "" {
				raw, r, w, err := s.admit(ctx, tx, kindName, category, body, oldPlain)
				if err != nil {
					if blind {
						err = withholdValues(err)
					}
					return err
				}
				if blind {
					w = nil // warnings name kept violations of values the writer may not see
				}
				if stored2, err = DecodeObject(raw); err != nil {
					return err
				}
				if err := jsondepth.Check(stored2, ""); err != nil {
					return err // the kind's defaults made it deeper
				}
				stored, kindRev, warnings = raw, r, w
			}
			sv, err := s.store(t, category, stored, props.secret)
			if err != nil {
				return err
			}
			if missing {
				err := tx.QueryRow(ctx, q.Get("PillarInsert"), targetKind(t), rid, category, sv.data, actor, kindRev, sv.sealedArg()).Scan(&id, &rev, &out.UpdatedAt)
				if errors.Is(err, db.ErrNotFound) {
					continue // created concurrently: lock it and update it
				}
				if err != nil {
					return err
				}
				created = true
			} else if err := tx.QueryRow(ctx, q.Get("PillarUpdate"), id, sv.data, actor, kindRev, sv.sealedArg()).Scan(&rev, &out.UpdatedAt); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, q.Get("PillarHistoryAdd"), t.String(), rid, category, rev, nullable(old), sv.data, actor, nullBytes(oldSealed), sv.sealedArg()); err != nil {
				return err
			}
			if sv.sealed != nil && !MayReadSecrets(ctx, t.ScopeName()) {
				// The writer sent the value, but answers mask secrets for whoever may not read them.
				if stored2, err = DecodeObject(sv.data); err != nil {
					return err
				}
			}
			if err := auth.RecordAudit(ctx, tx, auth.AuditEntry{Actor: actor, Action: "pillar.set", Target: t.String() + "/" + category,
				Detail: map[string]any{"revision": rev, "created": old == nil}}); err != nil {
				return err
			}
			out = Pillar{Target: t.String(), Category: category, Data: stored2, Secret: props.secret, Revision: rev, UpdatedAt: out.UpdatedAt.UTC(), UpdatedBy: actor, ETag: etag(id, rev), Warnings: warnings}
			return nil
		}
		return fmt.Errorf("pillar %q of %s: created and deleted concurrently twice", category, t)
	})
	return out, created, err
}

// Get reads one category of a target; a secret row's values are masked unless the caller in
// ctx may read the target's secrets.
func (s *Service) Get(ctx context.Context, t Target, category string) (Pillar, error) {
	return s.get(ctx, t, category, false)
}

// get is Get; with plain it returns the plaintext whoever asks, for the service's own
// comparisons (an import or a sync deciding whether a row changed), never for an answer.
func (s *Service) get(ctx context.Context, t Target, category string, plain bool) (Pillar, error) {
	if err := ValidateCategory(category); err != nil {
		return Pillar{}, err
	}
	var out Pillar
	// A read: a connection lost at its COMMIT is a plain 503, not "outcome unknown".
	err := s.db.LockingReadTx(ctx, func(tx *db.Tx) error {
		rid, err := lockTarget(ctx, tx, t)
		if err != nil {
			return err
		}
		var (
			id           int64
			data, sealed []byte
		)
		err = tx.QueryRow(ctx, q.Get("PillarGet"), rid, category).Scan(&id, &data, &sealed, &out.Revision, &out.UpdatedAt, &out.UpdatedBy)
		if errors.Is(err, db.ErrNotFound) {
			return fault.NotFound("%s has no pillar %q", t, category)
		}
		if err != nil {
			return err
		}
		out.Secret = sealed != nil
		if plain {
			data, err = s.open(t, category, data, sealed)
		} else {
			data, err = s.reveal(ctx, t, category, data, sealed)
		}
		if err != nil {
			return err
		}
		if out.Data, err = DecodeObject(data); err != nil {
			return err
		}
		out.Target, out.Category, out.ETag, out.UpdatedAt = t.String(), category, etag(id, out.Revision), out.UpdatedAt.UTC()
		return nil
	})
	return out, err
}

// Delete removes one category of a target (recorded in the history); ifMatch as for Put.
func (s *Service) Delete(ctx context.Context, t Target, category, ifMatch, actor string) error {
	if err := ValidateCategory(category); err != nil {
		return err
	}
	defer s.wrote(t.scope())
	return s.db.InTx(ctx, func(tx *db.Tx) error {
		rid, err := lockTarget(ctx, tx, t)
		if err != nil {
			return err
		}
		var (
			id, rev   int64
			old       []byte
			oldSealed []byte
		)
		err = tx.QueryRow(ctx, q.Get("PillarGetForUpdate"), rid, category).Scan(&id, &old, &oldSealed, &rev)
		if errors.Is(err, db.ErrNotFound) {
			return fault.NotFound("%s has no pillar %q", t, category)
		}
		if err != nil {
			return err
		}
		if ifMatch != "" && ifMatch != "*" && ifMatch != etag(id, rev) {
			return fault.New(fault.KindPreconditionFailed, "pillar %q of %s has changed: its ETag is %s, If-Match asked for %s", category, t, etag(id, rev), ifMatch)
		}
		if _, err := tx.Exec(ctx, q.Get("PillarDelete"), id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, q.Get("PillarHistoryAdd"), t.String(), rid, category, rev+1, old, nil, actor, nullBytes(oldSealed), nil); err != nil {
			return err
		}
		return auth.RecordAudit(ctx, tx, auth.AuditEntry{Actor: actor, Action: "pillar.delete", Target: t.String() + "/" + category,
			Detail: map[string]any{"revision": rev + 1}})
	})
}

// Categories lists a target's categories (without their data), in byte order.
func (s *Service) Categories(ctx context.Context, t Target) ([]Pillar, error) {
	out := []Pillar{}
	err := s.db.LockingReadTx(ctx, func(tx *db.Tx) error {
		rid, err := lockTarget(ctx, tx, t)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, q.Get("PillarCategories"), rid)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			p := Pillar{Target: t.String()}
			if err := rows.Scan(&p.Category, &p.Revision, &p.UpdatedAt, &p.UpdatedBy); err != nil {
				return err
			}
			p.UpdatedAt = p.UpdatedAt.UTC()
			out = append(out, p)
		}
		return rows.Err()
	})
	return out, err
}

// Change is one entry of a category's history.
type Change struct {
	ID       int64          `json:"id"`
	Revision int64          `json:"revision"`
	Old      map[string]any `json:"old"` // null: the category did not exist before
	New      map[string]any `json:"new"` // null: the change deleted it
	Actor    string         `json:"actor"`
	At       time.Time      `json:"at"`
	// Secret says the entry's values are a secret category's: masked unless the reader
	// holds pillars:read-secrets on the target.
	Secret bool `json:"secret,omitempty"`
	// ImportedBy and ImportedAt mark an entry a sync import added (SyncImport): who
	// imported it and when. Actor and At are then what the imported stream claimed, which
	// this installation did not witness, so a reader must be able to tell them apart.
	ImportedBy string     `json:"importedBy,omitempty"`
	ImportedAt *time.Time `json:"importedAt,omitempty"`
}

// scanChange reads a history entry; open, when set, turns a sealed value into what the
// entry shows (the plaintext, or nil to keep the masked shape).
func scanChange(row db.Row, open func(sealed []byte) ([]byte, error)) (Change, error) {
	var (
		c                  Change
		old, new           []byte
		oldSealed, newSeal []byte
		importedBy         *string
	)
	if err := row.Scan(&c.ID, &c.Revision, &old, &new, &c.Actor, &c.At, &oldSealed, &newSeal, &importedBy, &c.ImportedAt); err != nil {
		return c, err
	}
	c.At = c.At.UTC()
	if importedBy != nil {
		c.ImportedBy = *importedBy
	}
	if c.ImportedAt != nil {
		at := c.ImportedAt.UTC()
		c.ImportedAt = &at
	}
	c.Secret = oldSealed != nil || newSeal != nil
	for _, v := range []struct {
		sealed []byte
		dst    *[]byte
	}{{oldSealed, &old}, {newSeal, &new}} {
		if v.sealed == nil || open == nil {
			continue
		}
		plain, err := open(v.sealed)
		if err != nil {
			return c, err
		}
		if plain != nil {
			*v.dst = plain
		}
	}
	for _, p := range []struct {
		raw []byte
		dst *map[string]any
	}{{old, &c.Old}, {new, &c.New}} {
		if p.raw == nil {
			continue
		}
		m, err := DecodeObject(p.raw)
		if err != nil {
			return c, err
		}
		*p.dst = m
	}
	return c, nil
}

// History returns a category's changes, newest first, starting below before (0: newest). It
// does not need the target to exist any more.
func (s *Service) History(ctx context.Context, t Target, category string, before int64, limit int) ([]Change, error) {
	if err := ValidateCategory(category); err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, q.Get("PillarHistory"), t.String(), category, before, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var open func([]byte) ([]byte, error)
	if MayReadSecrets(ctx, t.ScopeName()) {
		open = func(sealed []byte) ([]byte, error) { return s.open(t, category, nil, sealed) }
	}
	out := []Change{}
	for rows.Next() {
		c, err := scanChange(rows, open)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Restore writes the value a history entry recorded (its new value; a deletion entry restores
// nothing and is a 422) back as a new change.
func (s *Service) Restore(ctx context.Context, t Target, category string, change int64, ifMatch, actor string) (Pillar, error) {
	if err := ValidateCategory(category); err != nil {
		return Pillar{}, err
	}
	c, err := scanChange(s.db.QueryRow(ctx, q.Get("PillarHistoryEntry"), t.String(), category, change),
		func(sealed []byte) ([]byte, error) { return s.open(t, category, nil, sealed) })
	if errors.Is(err, db.ErrNotFound) {
		return Pillar{}, fault.NotFound("pillar %q of %s has no history entry %d", category, t, change)
	}
	if err != nil {
		return Pillar{}, err
	}
	if c.New == nil {
		return Pillar{}, fault.New(fault.KindUnprocessable, "history entry %d deleted pillar %q; restore the entry before it", change, category)
	}
	p, _, err := s.Put(ctx, t, category, c.New, ifMatch, actor)
	return p, err
}

// SettingMergeLists is the settings key of Salt's pillar_merge_lists for renders.
const SettingMergeLists = "pillar_merge_lists"

// Options reads the merge options every replica shares.
func (s *Service) Options(ctx context.Context) (Options, error) {
	var raw []byte
	err := s.db.QueryRow(ctx, q.Get("SettingGet"), SettingMergeLists).Scan(&raw)
	if errors.Is(err, db.ErrNotFound) {
		return Options{}, nil
	}
	if err != nil {
		return Options{}, err
	}
	var on bool
	if err := json.Unmarshal(raw, &on); err != nil {
		return Options{}, fmt.Errorf("setting %s: %w", SettingMergeLists, err)
	}
	return Options{MergeLists: on}, nil
}

// SetOptions stores the merge options for every replica.
func (s *Service) SetOptions(ctx context.Context, o Options, actor string) error {
	v, _ := json.Marshal(o.MergeLists)
	defer s.wrote()
	_, err := s.db.Exec(ctx, q.Get("SettingPut"), SettingMergeLists, v, actor)
	return err
}

// layerRow is one row of PillarLayers.
type layerRow struct {
	layer    int
	target   string
	priority int
	selector string
	static   bool
	category string
	raw      []byte // decoded only for the rows that apply
	sealed   []byte // a secret row's sealed value (raw is then its masked shape)
}

// Layers returns the pillar rows that apply to node, in merge order: global rows, the node's
// org's, the rows of the groups of its org it is a member of (static or by selector; lower
// spec.priority first so a higher one merges later and wins, ties by group name), then its
// own; inside one target, categories in byte order. 404 when the node does not exist.
func (s *Service) Layers(ctx context.Context, node NodeInfo) ([]Layer, error) {
	all, err := s.layerRows(ctx, "PillarLayers", node.Name)
	if err != nil {
		return nil, err
	}
	return layersFrom(all, node)
}

// layerRows runs a PillarLayers-shaped query for node.
func (s *Service) layerRows(ctx context.Context, query, node string, more ...any) ([]layerRow, error) {
	return s.scanLayerRows(s.db.Query(ctx, q.Get(query), append([]any{node, resource.KindNode, resource.KindOrg, resource.KindGroup}, more...)...))
}

// scanRenderRows reads the rows of PillarRender (PillarLayers' columns and sealed).
func (s *Service) scanRenderRows(rows db.Rows, err error) ([]layerRow, error) {
	return scanRows(rows, err, true)
}

// scanLayerRows reads the rows of PillarLayers.
func (s *Service) scanLayerRows(rows db.Rows, err error) ([]layerRow, error) {
	return scanRows(rows, err, false)
}

// scanRows reads layer rows, with the sealed column when withSealed.
func scanRows(rows db.Rows, err error, withSealed bool) ([]layerRow, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	all := make([]layerRow, 0, 16)
	dst := make([]any, 0, 8)
	for rows.Next() {
		all = append(all, layerRow{})
		r := &all[len(all)-1] // scanned in place: one allocation for the rows, not one each
		dst = append(dst[:0], &r.layer, &r.target, &r.priority, &r.selector, &r.static, &r.category, &r.raw)
		if withSealed {
			dst = append(dst, &r.sealed)
		}
		if err := rows.Scan(dst...); err != nil {
			return nil, err
		}
	}
	return all, rows.Err()
}

// layersFrom keeps the rows that apply to node (selector groups evaluated against its
// labels) and orders them for the merge. Secret rows are in their masked shape.
func layersFrom(all []layerRow, node NodeInfo) ([]Layer, error) {
	layers, _, err := layersOpened(all, node, nil)
	return layers, err
}

// layersOpened is layersFrom; with open, it also returns the layers with secret rows opened
// (nil when no applying row is secret).
func layersOpened(all []layerRow, node NodeInfo, open func(t Target, category string, sealed []byte) ([]byte, error)) ([]Layer, []Layer, error) {
	raw, rawOpened, err := rawLayersOpened(all, node, open)
	if err != nil {
		return nil, nil, err
	}
	decoded := func(rls []merge.RawLayer) ([]Layer, error) {
		if rls == nil {
			return nil, nil
		}
		out := make([]Layer, len(rls))
		for i, rl := range rls {
			data, err := DecodeObject(rl.Data)
			if err != nil {
				return nil, err
			}
			out[i] = Layer{Target: rl.Target, Category: rl.Category, Data: data}
		}
		return out, nil
	}
	layers, err := decoded(raw)
	if err != nil {
		return nil, nil, err
	}
	opened, err := decoded(rawOpened)
	return layers, opened, err
}

// rawLayersOpened keeps the rows that apply to node (selector groups evaluated against its
// labels) and orders them for the merge, their data as stored (text, not decoded: MergeJSON
// decodes only what it must); with open, it also returns the layers with secret rows opened
// (nil when no applying row is secret).
func rawLayersOpened(all []layerRow, node NodeInfo, open func(t Target, category string, sealed []byte) ([]byte, error)) ([]merge.RawLayer, []merge.RawLayer, error) {
	kept := all[:0]
	for _, r := range all {
		if r.layer == 2 && !r.static {
			sel, err := metadata.ParseSelector(r.selector)
			if err != nil || r.selector == "" || !sel.Matches(node.Labels) {
				continue // not a member (a stored selector always parses; an empty one selects no one)
			}
		}
		kept = append(kept, r)
	}
	slices.SortStableFunc(kept, func(a, b layerRow) int {
		if a.layer != b.layer {
			return a.layer - b.layer
		}
		if a.priority != b.priority {
			return a.priority - b.priority
		}
		if c := strings.Compare(a.target, b.target); c != 0 {
			return c
		}
		return strings.Compare(a.category, b.category)
	})
	out := make([]merge.RawLayer, 0, len(kept))
	var opened []merge.RawLayer
	for i, r := range kept {
		t := Global
		switch r.layer {
		case 1:
			t = Target{Kind: "org", Org: r.target}
		case 2:
			t = Target{Kind: "group", Org: node.Org, Group: r.target}
		case 3:
			t = Target{Kind: "node", Node: r.target}
		}
		// The rows of global, org and group targets are read by many nodes' renders: the
		// replica's memo keeps their canonical text (a secret row's raw is its masked shape).
		out = append(out, merge.RawLayer{Target: t.String(), Category: r.category, Data: r.raw, Shared: r.layer != 3})
		if r.sealed == nil || open == nil {
			continue
		}
		if opened == nil {
			opened = make([]merge.RawLayer, len(kept))
		}
		plain, err := open(t, r.category, r.sealed)
		if err != nil {
			return nil, nil, err
		}
		opened[i] = merge.RawLayer{Target: t.String(), Category: r.category, Data: plain}
	}
	for i := range opened {
		if opened[i].Data == nil {
			opened[i] = out[i] // a plain row: the same layer in both
		}
	}
	return out, opened, nil
}

// NodeInfo is the node a render is for.
type NodeInfo struct {
	Name   string
	Org    string
	Labels map[string]string
}

// Rendered is a node's merged pillar.
type Rendered struct {
	// Pillar is the merged pillar decoded, set only by an explained render (a plain render
	// merges text and keeps JSON only; Decoded decodes it).
	Pillar      map[string]any `json:"pillar"`
	Explanation []Explanation  `json:"explain,omitempty"`
	// ETag is a digest of the merged pillar: equal pillars have equal ETags on every replica.
	ETag string `json:"-"`
	// JSON is the merged pillar encoded (the bytes the ETag digests), so an answer sends it
	// without encoding the map again.
	JSON []byte `json:"-"`
	// Secrets lists the secret categories whose rows the pillar holds. When there are any,
	// everything above is the masked render ("(secret)" leaves, so its ETag says nothing of
	// the values) and Reveal gives the plaintext one.
	Secrets []string `json:"-"`
	// revealed is the render with secret rows opened (nil without secrets); revealErr why it
	// could not be made (a missing key), which only a caller asking for it sees.
	revealed  *Rendered
	revealErr error
	// size is the pillar's JSON size, what the cache's bound counts.
	size int64
	// org is the node's org when it was rendered, for invalidations of a whole org.
	org string
}

// ExplainPathBudget is the least an explained answer may spend on whole paths: its
// explanations give every leaf its full JSON pointer while those add up to at most this or
// four times the merged pillar's JSON, whichever is more, and are front-coded beyond
// (merge.FrontCoded). Whole paths repeat every key once per leaf below it, so a row holding
// one long key over many short leaves would otherwise make an answer of (key length × leaves)
// bytes: terabytes for an 8 MiB body. Real pillars stay far below either bound.
const ExplainPathBudget = 1 << 20

// MarshalJSON writes {"pillar", "explain"}, the explanations with whole paths within the
// path budget (ExplainPathBudget) and front-coded beyond it, so an explained answer is linear
// in the pillar it explains.
func (r Rendered) MarshalJSON() ([]byte, error) {
	type answer struct {
		Pillar  any `json:"pillar"`
		Explain any `json:"explain,omitempty"`
	}
	a := answer{Pillar: r.Pillar}
	if r.Pillar == nil {
		a.Pillar = json.RawMessage(r.JSON)
	}
	if len(r.Explanation) > 0 {
		if merge.PathBytes(r.Explanation) <= max(ExplainPathBudget, 4*len(r.JSON)) {
			a.Explain = r.Explanation
		} else {
			a.Explain = merge.FrontCoded(r.Explanation)
		}
	}
	return json.Marshal(a)
}

// Decoded returns the merged pillar decoded (numbers as json.Number): Pillar when the render
// kept it, else its JSON decoded, a fresh map the caller may change.
func (r Rendered) Decoded() map[string]any {
	if r.Pillar != nil {
		return r.Pillar
	}
	m, err := DecodeObject(r.JSON)
	if err != nil {
		return nil // JSON is always an object MergeJSON or json.Marshal wrote
	}
	return m
}

// Reveal returns the render a caller allowed to read the node's secrets gets: the plaintext
// render when the pillar holds secrets, else r itself.
func (r Rendered) Reveal() (Rendered, error) {
	if len(r.Secrets) == 0 {
		return r, nil
	}
	if r.revealErr != nil {
		return Rendered{}, r.revealErr
	}
	return *r.revealed, nil
}

// For returns what a caller sees: Reveal when it may read secrets, else the masked render.
func (r Rendered) For(mayReadSecrets bool) (Rendered, error) {
	if mayReadSecrets {
		return r.Reveal()
	}
	return r, nil
}

// Render merges the pillar of a node; with explain, it also says where every leaf came from.
func (s *Service) Render(ctx context.Context, res *resource.Service, node string, explain bool) (Rendered, error) {
	if s.cache == nil || explain {
		return s.render(ctx, res, node, explain)
	}
	r, ok, gen := s.cache.get(node) // gen: read before the render starts
	if ok {
		s.cache.hits.Add(1)
		return r, nil
	}
	s.cache.misses.Add(1)
	r, err := s.render(ctx, res, node, false)
	if err != nil {
		return r, err
	}
	s.cache.put(node, gen, r)
	return r, nil
}

// RenderFresh computes node's pillar from the database, bypassing (and refreshing) this
// replica's cache: for callers that must see every write committed anywhere before their
// request, including another replica's write whose notification has not arrived yet (the
// bound on that is in docs/benchmarks.md). The API serves it for Cache-Control: no-cache.
func (s *Service) RenderFresh(ctx context.Context, res *resource.Service, node string) (Rendered, error) {
	if s.cache == nil {
		return s.render(ctx, res, node, false)
	}
	_, _, gen := s.cache.get(node)
	s.cache.misses.Add(1)
	r, err := s.render(ctx, res, node, false)
	if err == nil {
		s.cache.put(node, gen, r)
	}
	return r, err
}

// render computes node's pillar from one statement (PillarRender: the node's org and labels,
// the merge setting and every row that may apply, in one snapshot; renderDirect, the same
// query without the function around it, when the pool keeps plans), then merges.
func (s *Service) render(ctx context.Context, _ *resource.Service, node string, explain bool) (Rendered, error) {
	query := q.Get("PillarRender")
	if s.db.KeepsPlans() {
		query = renderDirect
	}
	all, err := s.scanRenderRows(s.db.Query(ctx, query, node))
	if err != nil {
		return Rendered{}, err
	}
	// The node's row (layer -1) is found wherever it is: UNION ALL promises no order (a
	// parallel plan may interleave the branches); layersFrom orders the rest.
	metaAt := slices.IndexFunc(all, func(r layerRow) bool { return r.layer == -1 })
	if metaAt < 0 {
		return Rendered{}, fault.NotFound("%s %q not found", resource.KindNode, fault.Truncate(node, 80))
	}
	metaRow := all[metaAt]
	all = slices.Delete(all, metaAt, metaAt+1)
	var meta struct {
		Labels     map[string]string `json:"labels"`
		MergeLists json.RawMessage   `json:"mergeLists"`
	}
	if err := json.Unmarshal(metaRow.raw, &meta); err != nil {
		return Rendered{}, fmt.Errorf("render %s: %w", node, err)
	}
	var opts Options
	if len(meta.MergeLists) > 0 && string(meta.MergeLists) != "null" {
		if err := json.Unmarshal(meta.MergeLists, &opts.MergeLists); err != nil {
			return Rendered{}, fmt.Errorf("setting %s: %w", SettingMergeLists, err)
		}
	}
	info := NodeInfo{Name: node, Org: metaRow.target, Labels: meta.Labels}
	var (
		secrets   []string
		revealErr error
	)
	open := func(t Target, category string, sealed []byte) ([]byte, error) {
		if !slices.Contains(secrets, category) {
			secrets = append(secrets, category)
		}
		if revealErr != nil {
			return []byte("{}"), nil
		}
		plain, err := s.open(t, category, nil, sealed)
		if err != nil {
			// Masked readers are served anyway; only a reveal fails.
			revealErr = err
			return []byte("{}"), nil
		}
		return plain, nil
	}
	layers, opened, err := rawLayersOpened(all, info, open)
	if err != nil {
		return Rendered{}, err
	}
	out, err := merged(ctx, layers, opts, explain, info.Org, s.memo)
	if err != nil {
		return Rendered{}, err
	}
	if len(secrets) > 0 {
		slices.Sort(secrets)
		out.Secrets = secrets
		if revealErr != nil {
			out.revealErr = revealErr
		} else {
			r, err := merged(ctx, opened, opts, explain, info.Org, s.memo)
			if err != nil {
				return Rendered{}, err
			}
			r.Secrets = secrets
			out.revealed = &r
			out.size += r.size
		}
	}
	return out, nil
}

// merged merges layers into a Rendered (with explanations when asked) and its ETag. The merge
// stops with ctx: a render is cancelled with its request. Without explanations the layers'
// text is merged as text (merge.MergeJSON: only what several layers set is decoded) and the
// answer's bytes come straight out of it; Pillar stays nil (Decoded decodes it on demand).
// Explanations need the decoded merge, which gives the same bytes.
func merged(ctx context.Context, layers []merge.RawLayer, opts Options, explain bool, org string, memo *merge.Memo) (Rendered, error) {
	var out Rendered
	var (
		b   []byte
		err error
	)
	if explain {
		decoded := make([]Layer, len(layers))
		for i, l := range layers {
			data, err := DecodeObject(l.Data)
			if err != nil {
				return Rendered{}, err
			}
			decoded[i] = Layer{Target: l.Target, Category: l.Category, Data: data}
		}
		if out.Pillar, out.Explanation, err = merge.ExplainContext(ctx, decoded, opts); err != nil {
			return Rendered{}, err
		}
		b, err = json.Marshal(out.Pillar)
	} else {
		b, err = merge.MergeJSONMemo(ctx, layers, opts, memo)
	}
	if err != nil {
		return Rendered{}, err
	}
	sum := sha256.Sum256(b)
	out.ETag = `"` + hex.EncodeToString(sum[:12]) + `"`
	out.size = int64(len(b))
	out.org = org
	out.JSON = b
	return out, nil
}

// What an unknown minion gets from the Salt-facing render and node_pillars (setting
// salt_unknown_minion): UnknownEmpty, an empty pillar (the default: a minion strata does not
// know yet has no pillar), or UnknownError, an error Salt records in _errors.
const (
	SettingUnknownMinion = "salt_unknown_minion"
	UnknownEmpty         = "empty"
	UnknownError         = "error"
)

// UnknownMinion reads the salt_unknown_minion setting.
func (s *Service) UnknownMinion(ctx context.Context) (string, error) {
	var raw []byte
	err := s.db.QueryRow(ctx, q.Get("SettingGet"), SettingUnknownMinion).Scan(&raw)
	if errors.Is(err, db.ErrNotFound) {
		return UnknownEmpty, nil
	}
	if err != nil {
		return "", err
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil || (v != UnknownEmpty && v != UnknownError) {
		return "", fmt.Errorf("setting %s: %s is neither %q nor %q", SettingUnknownMinion, raw, UnknownEmpty, UnknownError)
	}
	return v, nil
}

// SetUnknownMinion stores the salt_unknown_minion setting (UnknownEmpty or UnknownError).
func (s *Service) SetUnknownMinion(ctx context.Context, v, actor string) error {
	if v != UnknownEmpty && v != UnknownError {
		return fault.Invalid("/unknownMinion", "unknownMinion must be %q or %q, not %q", UnknownEmpty, UnknownError, fault.Truncate(v, 40))
	}
	defer s.wrote()
	raw, _ := json.Marshal(v)
	_, err := s.db.Exec(ctx, q.Get("SettingPut"), SettingUnknownMinion, raw, actor)
	return err
}

// SaltRole is the login role `strata salt credentials` creates for Salt's postgres
// ext_pillar.
const SaltRole = "strata_salt"

// SaltCredentials are what a Salt master needs to read pillars through node_pillars (the
// wire type of the public client, so server and client cannot drift apart).
type SaltCredentials = api.SaltCredentials

// SaltCredentials creates (or gives a new password to) the role that may only execute
// node_pillars, and returns how a Salt master connects with it. base is the connection
// string clients use to reach strata's database (the server's client URL).
func (s *Service) SaltCredentials(ctx context.Context, base string, mergeLists bool, actor, remoteAddr string) (SaltCredentials, error) {
	password := db.RandomPassword()
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		var created bool
		if err := tx.QueryRow(ctx, q.Get("SaltRoleApply"), SaltRole, db.SCRAMVerifier(password), s.db.Schema()).Scan(&created); err != nil {
			return err
		}
		return auth.RecordAudit(ctx, tx, auth.AuditEntry{Actor: actor, Action: "salt.credentials", Target: SaltRole, RemoteAddr: remoteAddr,
			Detail: map[string]any{"created": created}})
	})
	if err != nil {
		return SaltCredentials{}, db.LoginRoleFault(SaltRole, err)
	}
	if base == "" {
		base = s.ClientURL
	}
	if base == "" {
		base = s.db.URL()
	}
	c := SaltCredentials{Role: SaltRole, Password: password, ConnString: db.ClientConnString(base, SaltRole, password)}
	c.Host, c.Port, c.Database = db.ConnTarget(base)
	asList := ""
	if mergeLists {
		asList = "\n        as_list: True"
	}
	c.MasterConfig = fmt.Sprintf(`postgres:
  host: %q
  port: %s
  db: %q
  user: %q
  pass: %q
ext_pillar:
  - postgres:
      - query: "SELECT pillar FROM %s.node_pillars(%%s)"
        as_json: True%s
`, c.Host, c.Port, c.Database, SaltRole, password, s.db.Schema(), asList)
	return c, nil
}

// Renamed re-keys the pillar history of a renamed node (resource.Service.OnRename): its
// pillar rows hang off the node's row id and follow it by themselves; the history is kept by
// target name.
func (s *Service) Renamed(ctx context.Context, tx *db.Tx, kind string, id int64, old, new string) error {
	if kind != resource.KindNode {
		return nil
	}
	if err := s.resealRenamed(ctx, tx, id, old, new); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, q.Get("PillarHistoryRekey"), id, Target{Kind: "node", Node: old}.String(), Target{Kind: "node", Node: new}.String())
	return err
}
