package pillar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/kind"
	"github.com/stratahq/strata/internal/secret"
)

// Typed categories (formulas). A category's properties apply at every target; its kind binds
// it to a registered kind (package kind), whose current revision then validates every write of
// the category — with the ratcheting objects get, so a row stored before a narrowing can still
// be updated elsewhere — and whose registrations check the category's stored rows like the
// kind's own objects (Service implements kind.Holder).
//
// Defaults are filled into the stored rows, not at read time: renders read rows from SQL
// (node_pillars, pillar_render) as well as through strata, and both must see the same values.
// So a write stores the kind's presentation of what was sent, and a binding or a new revision
// of the kind rewrites the rows whose presentation it changes (each a change with a history
// entry). Readers of every path see the defaults of the revision the category was last
// presented under.
//
// Locks, in the order every path takes them (so none waits in a cycle): the category's key
// (shared by writers, exclusive by a binding), then the kind's key (shared by writers and
// bindings through kind.Service.Hold, exclusive by a registration), then the rows.

// Category is a category's properties and row count (the wire type of the public client).
type Category = api.PillarCategory

// CategoryViolation is a stored row a binding found invalid under the kind's schema.
type CategoryViolation struct {
	Target  string `json:"target"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

// UseKinds gives the service the registry typed categories validate with (the server does
// this at start, beside kinds.SetHolder(s)).
func (s *Service) UseKinds(k *kind.Service) { s.kinds = k }

// lockForWrite prepares a write of a row of category at t, in one round trip: it takes the
// category's key shared, reads the kind the category is bound to ("": untyped) and locks the
// target's row (nil: global). With a kind, it also takes the kind's key shared, so neither the
// binding nor the kind's revision can change before tx ends. The category's key also keeps
// its secret property as read until tx ends.
func (s *Service) lockForWrite(ctx context.Context, tx *db.Tx, t Target, category string) (categoryProps, *int64, error) {
	var (
		bound *string
		props categoryProps
	)
	steps := []db.Step{
		{Query: q.Get("CategoryLockShared"), Args: []any{s.db.Schema(), category}, Scan: func(r db.Row) error { var v any; return r.Scan(&v) }},
		{Query: q.Get("CategoryKind"), Args: []any{category}, Scan: func(r db.Row) error { return r.Scan(&bound, &props.secret) }},
	}
	target, rid, err := targetLockStep(t)
	if err != nil {
		return props, nil, err
	}
	if target != nil {
		steps = append(steps, *target)
	}
	if err := targetFound(t, tx.Pipeline(ctx, steps...)); err != nil {
		return props, nil, err
	}
	if props.secret {
		if err := s.keys.Require(); err != nil {
			return props, nil, secret.Fault(err)
		}
	}
	if bound == nil {
		return props, rid, nil
	}
	if s.kinds == nil {
		return props, nil, fmt.Errorf("pillar category %s is bound to kind %s, but this service has no kind registry", category, *bound)
	}
	if err := s.kinds.Hold(ctx, tx, *bound); err != nil {
		return props, nil, err
	}
	props.kind = *bound
	return props, rid, nil
}

// categoryProps are the properties of a category a write obeys.
type categoryProps struct {
	kind   string // the bound kind; "": untyped
	secret bool   // rows are stored sealed
}

// admit runs the bound kind's write pipeline on a row's new value (old: the stored value, nil
// on create): unknown fields, aliases, defaults, validation with ratcheting. It returns the
// value to store, the revision it was admitted under and warnings. Field pointers name the
// pillar's own members (/servers/0), not an object's /spec.
func (s *Service) admit(ctx context.Context, tx *db.Tx, kindName, category string, body, old []byte) ([]byte, int, []string, error) {
	out, rev, warnings, err := s.kinds.Admit(ctx, tx, kindName, body, old)
	if err != nil {
		return nil, 0, nil, rerootSpec(err, fmt.Sprintf("pillar category %s is bound to kind %s", category, kindName))
	}
	return out, rev, warnings, nil
}

// rerootSpec rewrites a kind's validation error for a pillar body: its pointers lose the
// /spec prefix, and the detail says which binding judged it.
func rerootSpec(err error, why string) error {
	var fe *fault.Error
	if !errors.As(err, &fe) {
		return err
	}
	out := *fe
	out.Detail = why + ": " + strings.Replace(fe.Detail, "spec ", "the data ", 1)
	out.Fields = make([]fault.FieldError, len(fe.Fields))
	for i, f := range fe.Fields {
		field := strings.TrimPrefix(f.Field, "/spec")
		out.Fields[i] = fault.FieldError{Field: field, Message: strings.ReplaceAll(f.Message, "/spec", "")}
	}
	return &out
}

// sameJSON reports whether two JSON documents are equal as values (object key order and
// number spelling aside: 1.0 and 1 are equal).
func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	x, errA := decodeExact(a)
	y, errB := decodeExact(b)
	return errA == nil && errB == nil && reflect.DeepEqual(x, y)
}

// decodeExact decodes JSON keeping every digit of numbers.
func decodeExact(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// heldRow is a row of CategoryRows or HeldRows.
type heldRow struct {
	id       int64
	target   Target
	rid      *int64
	category string
	data     []byte // the plaintext (opened by the caller when sealed is set)
	sealed   []byte
}

func scanHeldRows(rows db.Rows, err error) ([]heldRow, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []heldRow
	for rows.Next() {
		var (
			r                 heldRow
			tkind, org, named string
		)
		if err := rows.Scan(&r.id, &tkind, &org, &named, &r.rid, &r.category, &r.data, &r.sealed); err != nil {
			return nil, err
		}
		r.target = targetOf(tkind, org, named)
		out = append(out, r)
	}
	return out, rows.Err()
}

// openHeld replaces the masked data of sealed rows by their plaintext.
func (s *Service) openHeld(rows []heldRow) error {
	for i, r := range rows {
		if r.sealed == nil {
			continue
		}
		plain, err := s.open(r.target, r.category, r.data, r.sealed)
		if err != nil {
			return err
		}
		rows[i].data = plain
	}
	return nil
}

// rewrite stores a row's new value as a change of its own (revision, history, audit): what a
// binding or a registration does to present a row under a kind.
func (s *Service) rewrite(ctx context.Context, tx *db.Tx, r heldRow, data []byte, rev int, actor, why string) error {
	sv, err := s.store(r.target, r.category, data, r.sealed != nil)
	if err != nil {
		return err
	}
	old, err := s.store(r.target, r.category, r.data, false)
	if err != nil {
		return err
	}
	if r.sealed != nil {
		if old.data, err = maskJSON(r.data); err != nil {
			return err
		}
		old.sealed = r.sealed
	}
	var revision int64
	err = tx.QueryRow(ctx, q.Get("PillarRepresent"), r.id, sv.data, rev, actor, sv.sealedArg()).Scan(&revision)
	if errors.Is(err, db.ErrNotFound) {
		return nil // deleted meanwhile
	}
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, q.Get("PillarHistoryAdd"), r.target.String(), r.rid, r.category, revision, old.data, sv.data, actor, old.sealedArg(), sv.sealedArg()); err != nil {
		return err
	}
	return auth.RecordAudit(ctx, tx, auth.AuditEntry{Actor: actor, Action: "pillar.set", Target: r.target.String() + "/" + r.category,
		Detail: map[string]any{"revision": revision, "presented": why}})
}

// SetCategory sets a category's properties (all of them: an empty Kind unbinds). Binding to
// a kind validates every stored row of the category at every target against the kind's
// current revision, as if each were created now: a row that does not validate refuses the
// binding (409 listing the rows the caller may read, counting the others); rows whose
// presentation differs (defaults, aliases) are rewritten. created reports a new properties
// row.
func (s *Service) SetCategory(ctx context.Context, category string, req api.PillarCategoryRequest, actor string) (Category, bool, error) {
	return s.SetCategoryIf(ctx, category, req, "", actor)
}

// CategoryETag identifies a category's properties: their last change's time ("none" before
// they were ever set), so a read-then-replace can tell whether they changed meanwhile.
func CategoryETag(c Category) string {
	if c.UpdatedAt == nil {
		return `"none"`
	}
	return `"` + strconv.FormatInt(c.UpdatedAt.UnixMicro(), 36) + `"`
}

// SetCategoryIf is SetCategory if the properties' ETag (CategoryETag) is still ifMatch: a
// 412 otherwise, nothing changed. "" sets them unconditionally.
func (s *Service) SetCategoryIf(ctx context.Context, category string, req api.PillarCategoryRequest, ifMatch, actor string) (Category, bool, error) {
	if err := ValidateCategory(category); err != nil {
		return Category{}, false, err
	}
	if req.Kind != "" {
		if s.kinds == nil {
			return Category{}, false, fmt.Errorf("pillar categories: no kind registry")
		}
		if _, err := s.kinds.UserKind(ctx, req.Kind); err != nil {
			if fault.KindOf(err) == fault.KindNotFound {
				return Category{}, false, fault.UnprocessableFields("invalid category properties", []fault.FieldError{{Field: "/kind", Message: "kind " + fault.Truncate(req.Kind, 80) + " is not a registered user kind (a category is bound to a user kind: `strata kind apply` it first)"}})
			}
			return Category{}, false, err
		}
	}
	p, _ := auth.FromContext(ctx)
	var (
		out         Category
		created     bool
		represented int
		converted   int
	)
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		represented = 0
		if _, err := tx.Exec(ctx, q.Get("CategoryLockExclusive"), s.db.Schema(), category); err != nil {
			return err
		}
		if ifMatch != "" {
			cur := Category{}
			if cats, err := s.categories(ctx, tx, &category); err != nil {
				return err
			} else if len(cats) > 0 {
				cur = cats[0]
			}
			if tag := CategoryETag(cur); tag != ifMatch {
				return fault.New(fault.KindPreconditionFailed, "pillar category %s has changed: its ETag is %s, If-Match asked for %s", category, tag, ifMatch)
			}
		}
		var (
			prev       *string
			prevSecret bool
		)
		if err := tx.QueryRow(ctx, q.Get("CategoryKind"), category).Scan(&prev, &prevSecret); err != nil {
			return err
		}
		// Binding a secret category to a kind (or changing its kind) answers, row by row,
		// whether its values pass the kind's schema: an oracle of the values, one schema per
		// guess. It needs what reading them needs.
		if (prevSecret || req.Secret) && req.Kind != "" && (prev == nil || *prev != req.Kind) && p != nil && !p.Allows("pillars", "read-secrets", "*") {
			return fault.New(fault.KindForbidden, "pillar category %s is secret: binding it to a kind tells which rows the kind's schema accepts, so it needs the scope pillars:read-secrets:*", category)
		}
		converted = 0
		if req.Secret != prevSecret {
			n, err := s.convertSecret(ctx, tx, category, req.Secret, p)
			if err != nil {
				return err
			}
			converted = n
		}
		switch {
		case req.Kind != "" && (prev == nil || *prev != req.Kind):
			if err := s.kinds.Hold(ctx, tx, req.Kind); err != nil {
				return err
			}
			rows, err := scanHeldRows(tx.Query(ctx, q.Get("CategoryRows"), category))
			if err != nil {
				return err
			}
			if err := s.openHeld(rows); err != nil {
				return err
			}
			var bad []CategoryViolation
			hidden := 0
			for _, r := range rows {
				data, rev, _, err := s.kinds.Admit(ctx, tx, req.Kind, r.data, nil)
				if err != nil {
					var fe *fault.Error
					if !errors.As(err, &fe) {
						return err
					}
					if p != nil && !p.Allows("pillars", "read", r.target.ScopeName()) {
						hidden++
						continue
					}
					for _, f := range fe.Fields {
						msg := f.Message
						if r.sealed != nil && (p == nil || !p.Allows("pillars", "read-secrets", r.target.ScopeName())) {
							msg = "does not validate (the message is withheld: the row is secret)" // a schema's message may quote the value
						}
						bad = append(bad, CategoryViolation{Target: r.target.String(), Field: strings.TrimPrefix(f.Field, "/spec"), Message: msg})
					}
					continue
				}
				if len(bad) > 0 || hidden > 0 {
					continue // refused anyway: nothing to store
				}
				if sameJSON(data, r.data) {
					if _, err := tx.Exec(ctx, q.Get("PillarSetKindRevision"), r.id, rev); err != nil {
						return err
					}
					continue
				}
				if err := s.rewrite(ctx, tx, r, data, rev, actor, "kind "+req.Kind); err != nil {
					return err
				}
				represented++
			}
			if len(bad) > 0 || hidden > 0 {
				detail := fmt.Sprintf("pillar category %s has stored rows that do not validate against kind %s; fix them (or the schema) and bind again", category, req.Kind)
				if hidden > 0 {
					detail += fmt.Sprintf(" (%d of them at targets this token may not read)", hidden)
				}
				if bad == nil {
					bad = []CategoryViolation{}
				}
				// The rows are listed twice: as violations (target, field, message) for programs,
				// and as the problem's errors ("node/web02:/servers") so every client prints them.
				fields := make([]fault.FieldError, 0, len(bad))
				for _, v := range bad {
					fields = append(fields, fault.FieldError{Field: v.Target + ":" + v.Field, Message: v.Message})
				}
				return &fault.Error{Kind: fault.KindConflict, Detail: detail, Fields: fields, Extensions: map[string]any{"violations": bad, "hidden": hidden}}
			}
		case req.Kind == "" && prev != nil:
			if _, err := tx.Exec(ctx, q.Get("CategoryUntype"), category); err != nil {
				return err
			}
		}
		var kindArg any
		if req.Kind != "" {
			kindArg = req.Kind
		}
		var at time.Time
		if err := tx.QueryRow(ctx, q.Get("CategoryUpsert"), category, kindArg, actor, req.Secret).Scan(&at, &created); err != nil {
			return err
		}
		if err := auth.RecordAudit(ctx, tx, auth.AuditEntry{Actor: actor, Action: "pillar.category.set", Target: category,
			Detail: map[string]any{"kind": req.Kind, "secret": req.Secret, "represented": represented, "converted": converted}}); err != nil {
			return err
		}
		cats, err := s.categories(ctx, tx, &category)
		if err != nil {
			return err
		}
		out = cats[0]
		out.Represented = represented
		out.Converted = converted
		return nil
	})
	if represented > 0 || converted > 0 {
		s.wrote()
	}
	return out, created, err
}

// DeleteCategory removes a category's properties (its rows stay, untyped from now on).
func (s *Service) DeleteCategory(ctx context.Context, category, actor string) error {
	if err := ValidateCategory(category); err != nil {
		return err
	}
	return s.db.InTx(ctx, func(tx *db.Tx) error {
		if _, err := tx.Exec(ctx, q.Get("CategoryLockExclusive"), s.db.Schema(), category); err != nil {
			return err
		}
		var (
			kindName *string
			isSecret bool
		)
		if err := tx.QueryRow(ctx, q.Get("CategoryKind"), category).Scan(&kindName, &isSecret); err != nil {
			return err
		}
		if isSecret {
			return fault.Conflict("pillar category %s is secret: its rows are stored encrypted, and removing its properties would leave them so; make it plain first (PUT {\"secret\": false}, which needs pillars:read-secrets:*), then delete", category)
		}
		err := tx.QueryRow(ctx, q.Get("CategoryDelete"), category).Scan(&kindName)
		if errors.Is(err, db.ErrNotFound) {
			return fault.NotFound("pillar category %s has no properties", category)
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, q.Get("CategoryUntype"), category); err != nil {
			return err
		}
		k := ""
		if kindName != nil {
			k = *kindName
		}
		return auth.RecordAudit(ctx, tx, auth.AuditEntry{Actor: actor, Action: "pillar.category.delete", Target: category, Detail: map[string]any{"kind": k}})
	})
}

// GetCategory reads a category's properties; 404 when it has neither properties nor rows.
func (s *Service) GetCategory(ctx context.Context, category string) (Category, error) {
	if err := ValidateCategory(category); err != nil {
		return Category{}, err
	}
	cats, err := s.categories(ctx, s.db, &category)
	if err != nil {
		return Category{}, err
	}
	if len(cats) == 0 {
		return Category{}, fault.NotFound("pillar category %s has no properties and no rows", category)
	}
	return cats[0], nil
}

// ListCategories lists every category that has properties or rows, in byte order.
func (s *Service) ListCategories(ctx context.Context) ([]Category, error) {
	return s.categories(ctx, s.db, nil)
}

func (s *Service) categories(ctx context.Context, qr db.Querier, one *string) ([]Category, error) {
	var arg any
	if one != nil {
		arg = *one
	}
	rows, err := qr.Query(ctx, q.Get("CategoryList"), arg)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Category{}
	for rows.Next() {
		var (
			c        Category
			kindName *string
			at       *time.Time
		)
		if err := rows.Scan(&c.Category, &kindName, &at, &c.UpdatedBy, &c.Rows, &c.Secret); err != nil {
			return nil, err
		}
		if kindName != nil {
			c.Kind = *kindName
		}
		if at != nil {
			u := at.UTC()
			c.UpdatedAt = &u
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// The kind.Holder side: the registry checks and presents the rows of bound categories.
var _ kind.Holder = (*Service)(nil)

// HeldRevisions returns the revisions of kindName the rows of its bound categories were
// admitted or presented under.
func (s *Service) HeldRevisions(ctx context.Context, tx *db.Tx, kindName string) ([]int, error) {
	rows, err := tx.Query(ctx, q.Get("HeldRevisions"), kindName)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var r int
		if err := rows.Scan(&r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ScanHeld calls fn for every row of the categories bound to kindName, labelled
// <target>/<category>.
func (s *Service) ScanHeld(ctx context.Context, tx *db.Tx, kindName string, fn func(label string, raw []byte) error) error {
	rows, err := scanHeldRows(tx.Query(ctx, q.Get("HeldRowsUnlocked"), kindName))
	if err != nil {
		return err
	}
	if err := s.openHeld(rows); err != nil {
		return err
	}
	for _, r := range rows {
		if err := fn(kind.HeldLabel(r.target.String()+"/"+r.category), r.data); err != nil {
			return err
		}
	}
	return nil
}

// MayReadAllHeld reports whether the caller may read pillars at every target.
func (s *Service) MayReadAllHeld(ctx context.Context) (bool, string) {
	p, ok := auth.FromContext(ctx)
	if !ok || p == nil {
		return true, ""
	}
	if !p.ListFilter("pillars", "read").All {
		return false, "pillars:read:*"
	}
	// A registration that reads bound rows answers which rows a schema accepts: asked of a
	// secret category's rows, that is an oracle of their values (a narrowing per guess). So
	// while any bound category is secret, it needs the secrets' verb too.
	var anySecret bool
	if err := s.db.QueryRow(ctx, q.Get("BoundSecretExists")).Scan(&anySecret); err != nil || anySecret {
		return p.Allows("pillars", "read-secrets", "*"), "pillars:read-secrets:*"
	}
	return true, ""
}

// MayReadHeld reports whether p may read the row named <target>/<category>: pillars:read on
// its target, and for a row of a category that is secret now pillars:read-secrets too — a
// report naming a secret row says whether its value passes a constraint, which is an answer
// about the value. (A category made plain since was made so by a caller who may read every
// secret, and its values are now for every reader.)
func (s *Service) MayReadHeld(ctx context.Context, p *auth.Principal, name string) bool {
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return false
	}
	target, category := name[:i], name[i+1:]
	if !p.Allows("pillars", "read", target) {
		return false
	}
	var (
		kindName *string
		isSecret bool
	)
	if err := s.db.QueryRow(ctx, q.Get("CategoryKind"), category).Scan(&kindName, &isSecret); err != nil {
		return false
	}
	return !isSecret || p.Allows("pillars", "read-secrets", target)
}

// Represent rewrites the rows of kindName's bound categories whose presentation under
// revision rev differs from what is stored (a new default, an alias); with dryRun it only
// counts them. Each such row is a write at its target, of every org: the caller in ctx needs
// pillars:write there (a context without a principal is strata's own call), else the
// registration is a 403 naming the first row's scope it lacks, rows in category and id order.
func (s *Service) Represent(ctx context.Context, tx *db.Tx, kindName string, rev int, present func([]byte) ([]byte, error), dryRun bool) (int, error) {
	query := "HeldRows"
	if dryRun {
		query = "HeldRowsUnlocked" // no lock, so a dry run may run in a read-only snapshot
	}
	rows, err := scanHeldRows(tx.Query(ctx, q.Get(query), kindName))
	if err != nil {
		return 0, err
	}
	if err := s.openHeld(rows); err != nil {
		return 0, err
	}
	p, _ := auth.FromContext(ctx)
	actor := auth.AuditActorFrom(ctx).Actor
	n := 0
	for _, r := range rows {
		data, err := present(r.data)
		if err != nil {
			return n, fmt.Errorf("presenting %s/%s: %w", r.target, r.category, err)
		}
		if sameJSON(data, r.data) {
			continue
		}
		if p != nil && !p.Allows("pillars", "write", r.target.ScopeName()) {
			return n, fault.Forbidden("revision %d of kind %s changes how pillar row %s/%s is stored (a default or an alias is written into it), and token %q may not write that row: registering it needs scope pillars:write:%s, besides kinds:write",
				rev, kindName, r.target, r.category, p.Name, r.target.ScopeName())
		}
		if dryRun {
			n++
			continue
		}
		if err := s.rewrite(ctx, tx, r, data, rev, actor, fmt.Sprintf("kind %s revision %d", kindName, rev)); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Represented drops this replica's renders after a registration rewrote rows (others hear
// of it through the pillars notification).
func (s *Service) Represented() { s.wrote() }
