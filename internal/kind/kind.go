// Package kind is strata's schema registry: kinds whose JSON schemas evolve in place, without
// API versions (seed 004, research/schema-evolution.md). A kind has a linear list of
// immutable revisions; registering the next one is checked against the latest revision and
// every older one stored objects still reference (package compat classifies each change by
// the rule table of research §5.2), and where safety depends on the data — narrowing a type,
// making a field required, tightening a constraint, tombstoning a field — against the objects
// actually stored, which this package scans in the registering transaction.
//
// The registry is also the seam the generic resource path (package resource) calls on every
// write and read of an object, of user kinds and of the built-in kinds (Org, Node, Group)
// alike: Admit runs the current revision's write pipeline (unknown fields, tombstones,
// aliases, defaults, ratcheting validation; package schema) inside the write's transaction,
// and Present runs the read pipeline, which never validates and never fails.
//
// Writes and registrations meet on one transaction-scoped advisory key per kind: a write
// takes it shared and only then reads the current revision; a registration takes it
// exclusively, scans and inserts the next revision in one transaction. So no object is
// written under the old revision while the scan runs, on any replica (invariant I1: every
// stored object conforms, at the type level, to every revision it may be read with).
package kind

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/kind/compat"
	"github.com/stratahq/strata/internal/kind/schema"
	"github.com/stratahq/strata/internal/resource"
)

//go:embed queries.sql
var queryFS embed.FS

var q = db.MustParseQueries(queryFS, "queries.sql")

//go:embed builtin/*.json
var builtinFS embed.FS

// Builtin are the built-in kinds, whose schemas ship with strata (builtin/*.json).
var Builtin = []string{"Group", "Node", "Org"}

// PresentTTL is how long a replica trusts its memory of a kind's current revision for reads.
// Writes always read it under the kind's key; a read on another replica may present an
// object with the previous revision's defaults for at most this long after a registration.
const PresentTTL = time.Second

// SampleSize is how many affected objects a report names per change.
const SampleSize = 10

var kindNameRE = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,62}$`)

// ValidateKindName checks a user kind's name: an upper-case letter, then letters and digits,
// at most 63 characters, as Kubernetes kinds are written ("Database", "DnsZone").
//
// Names that fold to a built-in kind's noun (org, orgs, node, nodes, group, groups) are
// refused too: the CLI and people read those as the built-in kinds.
func ValidateKindName(name string) error {
	if !kindNameRE.MatchString(name) {
		return fault.Invalid("kind", "kind %q must start with an upper-case letter and continue with letters and digits (at most 63), e.g. \"Database\"", fault.Truncate(name, 80))
	}
	switch strings.ToLower(name) {
	case "org", "orgs", "node", "nodes", "group", "groups":
		return fault.Invalid("kind", "kind %q is reserved: it names a built-in kind", name)
	}
	return nil
}

// Service is the registry over one database.
type Service struct {
	db  *db.DB
	now func() time.Time

	mu       sync.Mutex
	compiled map[revKey]*schema.Schema
	// inert revisions have nothing for the read pipeline to do (no default, alias or
	// tombstone anywhere): reads return the stored spec without decoding it.
	inert   map[revKey]bool
	current map[string]current
	// holder keeps values of kinds outside resources (SetHolder); nil: none.
	holder Holder

	// Test hooks (export_test.go): skipWriteLock drops the writes' shared key, afterScan
	// runs between a registration's locked check and its insert, afterUnlockedScan after its
	// unlocked scan, and skipRecheck leaves out the locked re-check of what was written
	// meanwhile.
	skipWriteLock     bool
	afterScan         func()
	afterUnlockedScan func()
	skipRecheck       bool
}

// admitKey memoizes, per transaction, the kind's revision read under its shared key.
type admitKey struct{ kind string }

type revKey struct {
	kind string
	rev  int
}

type current struct {
	scope   string
	builtin bool
	rev     int
	at      time.Time
}

// NewService returns the registry over d.
func NewService(d *db.DB) *Service {
	return &Service{db: d, now: time.Now, compiled: map[revKey]*schema.Schema{}, inert: map[revKey]bool{}, current: map[string]current{}}
}

// decode parses JSON keeping numbers exact (json.Number).
func decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// encode writes v as compact JSON without HTML escaping (what jsonb would store anyway).
func encode(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// lookup returns what the registry says of kind now, from memory when fresh enough.
func (s *Service) lookup(ctx context.Context, qr db.Querier, name string, fresh bool) (current, error) {
	s.mu.Lock()
	c, ok := s.current[name]
	s.mu.Unlock()
	if ok && !fresh && s.now().Sub(c.at) < PresentTTL {
		return c, nil
	}
	err := qr.QueryRow(ctx, q.Get("KindCurrent"), name).Scan(&c.scope, &c.builtin, &c.rev)
	if errors.Is(err, db.ErrNotFound) {
		return current{}, fault.NotFound("kind %q is not registered", fault.Truncate(name, 80))
	}
	if err != nil {
		return current{}, err
	}
	c.at = s.now()
	s.remember(name, c)
	return c, nil
}

// remember caches what the registry said of kind, unless a newer revision is known already:
// a read whose snapshot predates a registration must not put the old revision back.
func (s *Service) remember(name string, c current) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.current[name]; ok && old.rev > c.rev {
		return
	}
	s.current[name] = c
}

// revision returns the compiled schema of one revision; revisions are immutable, so they
// are cached for the life of the process.
func (s *Service) revision(ctx context.Context, qr db.Querier, kind string, rev int) (*schema.Schema, error) {
	k := revKey{kind, rev}
	s.mu.Lock()
	sch := s.compiled[k]
	s.mu.Unlock()
	if sch != nil {
		return sch, nil
	}
	var (
		doc, report []byte
		by          string
		at          time.Time
	)
	if err := qr.QueryRow(ctx, q.Get("KindRevisionGet"), kind, rev).Scan(&doc, &report, &by, &at); err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return nil, fault.NotFound("kind %q has no revision %d", fault.Truncate(kind, 80), rev)
		}
		return nil, err
	}
	sch, err := schema.Parse(doc)
	if err != nil {
		return nil, fmt.Errorf("stored revision %d of kind %s does not compile: %w", rev, kind, err)
	}
	s.mu.Lock()
	s.compiled[k] = sch
	s.inert[k] = !presents(sch.Doc())
	s.mu.Unlock()
	return sch, nil
}

// presents reports whether a schema document gives the read pipeline anything to do: a
// default, an alias or a tombstone anywhere in it.
func presents(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			if k == "default" || k == "x-aliases" || k == "x-removed" {
				return true
			}
			if presents(c) {
				return true
			}
		}
	case []any:
		for _, c := range t {
			if presents(c) {
				return true
			}
		}
	}
	return false
}

// UserKind returns the scope ("org" or "global") of a user-defined kind; 404 when no such
// kind is registered or when name is a built-in kind (those have their own routes).
func (s *Service) UserKind(ctx context.Context, name string) (string, error) {
	if err := ValidateKindName(name); err != nil {
		return "", fault.NotFound("kind %q is not registered", fault.Truncate(name, 80))
	}
	c, err := s.lookup(ctx, s.db, name, false)
	if err != nil {
		return "", err
	}
	if c.builtin {
		return "", fault.NotFound("%s is a built-in kind: its objects are under /v1/%ss", name, strings.ToLower(name))
	}
	return c.scope, nil
}

// Admit runs the write pipeline of kind's current revision on spec inside the write's
// transaction tx: it takes the kind's key shared (a registration of the kind waits for this
// transaction, and this one for a registration in progress), reads the current revision,
// and validates (prev, the stored spec, is nil on create; on update errors in unchanged
// parts ratchet). It returns the spec to store, the revision it conforms to and warnings
// for the client.
func (s *Service) Admit(ctx context.Context, tx *db.Tx, kind string, spec, prev json.RawMessage) (json.RawMessage, int, []string, error) {
	c, err := s.lockedCurrent(ctx, tx, kind)
	if err != nil {
		return nil, 0, nil, err
	}
	sch, err := s.revision(ctx, tx, kind, c.rev)
	if err != nil {
		return nil, 0, nil, err
	}
	in, err := decode(spec)
	if err != nil {
		return nil, 0, nil, fault.Invalid("/spec", "spec is not valid JSON: %v", err)
	}
	var old any
	if prev != nil {
		if v, err := decode(prev); err == nil {
			old = sch.Present(v)
		}
	}
	out, warnings, err := sch.Admit(in, old)
	if err != nil {
		return nil, 0, nil, err
	}
	raw, err := encode(out)
	if err != nil {
		return nil, 0, nil, err
	}
	return raw, c.rev, warnings, nil
}

// Hold takes kind's key shared in tx (once per transaction; Admit then reuses it): a holder
// of the kind's values takes it before it locks the rows it will write, so it never holds a
// row a registration (which holds the key exclusively) is waiting to present.
func (s *Service) Hold(ctx context.Context, tx *db.Tx, kind string) error {
	_, err := s.lockedCurrent(ctx, tx, kind)
	return err
}

// HoldSteps returns the statements that take kind's key shared in tx and read its current
// revision (Hold), for the caller to send in front of its own first statements in one
// round trip (db.Tx.Pipeline), and done, which the caller calls once that pipeline has run:
// it answers 404 for a kind that is not registered and keeps the revision for the rest of
// the transaction, as Hold would have. A write takes the key before it locks its row, so
// folding the two costs nothing in lock order and saves a round trip (issue 31). When tx
// holds the key already there is nothing to send.
func (s *Service) HoldSteps(tx *db.Tx, kind string) ([]db.Step, func() error) {
	if _, held := tx.Recall(admitKey{kind}); held {
		return nil, func() error { return nil }
	}
	var (
		c       current
		missing bool
	)
	steps := []db.Step{
		{Query: q.Get("KindLockShared"), Args: []any{s.db.Schema(), kind}, Scan: func(r db.Row) error { var v any; return r.Scan(&v) }},
		{Query: q.Get("KindCurrent"), Args: []any{kind}, Scan: func(r db.Row) error {
			err := r.Scan(&c.scope, &c.builtin, &c.rev)
			if errors.Is(err, db.ErrNotFound) {
				missing = true
				return nil
			}
			return err
		}},
	}
	if s.skipWriteLock {
		steps = steps[1:]
	}
	return steps, func() error {
		if missing {
			return fault.NotFound("kind %q is not registered", fault.Truncate(kind, 80))
		}
		c.at = s.now()
		s.remember(kind, c)
		_, err := tx.Memo(admitKey{kind}, func() (any, error) { return c, nil })
		return err
	}
}

// HoldCached is HoldSteps without the read: for a write that sends all its statements with
// its COMMIT (resource: a write from the list index's copy of the object), it admits under
// the revision this replica remembers for kind, keeps it for the rest of tx as HoldSteps'
// done would, and returns the statements that take the key shared and then fail the
// transaction (KindStillCurrent: db.ErrStale) unless that revision is still current, for
// the caller to send first. ok is false when nothing is remembered (the caller then takes
// the key with a read, HoldSteps) or tx holds the key already (nothing to send).
func (s *Service) HoldCached(tx *db.Tx, kind string) (steps []db.Step, ok bool) {
	if _, held := tx.Recall(admitKey{kind}); held {
		return nil, false
	}
	s.mu.Lock()
	c, known := s.current[kind]
	s.mu.Unlock()
	if !known {
		return nil, false
	}
	if _, err := tx.Memo(admitKey{kind}, func() (any, error) { return c, nil }); err != nil {
		return nil, false
	}
	steps = []db.Step{
		{Query: q.Get("KindLockShared"), Args: []any{s.db.Schema(), kind}, Scan: func(r db.Row) error { var v any; return r.Scan(&v) }},
		{Query: q.Get("KindStillCurrent"), Args: []any{kind, c.rev}, Scan: func(r db.Row) error { var v any; return r.Scan(&v) }},
	}
	if s.skipWriteLock {
		steps = steps[1:]
	}
	return steps, true
}

// lockedCurrent takes kind's key shared in tx and reads its current revision, once per
// transaction: the key stays held to the end of the transaction, so the revision read under
// it stays current, and a batch of writes of one kind locks and reads once.
func (s *Service) lockedCurrent(ctx context.Context, tx *db.Tx, kind string) (current, error) {
	v, err := tx.Memo(admitKey{kind}, func() (any, error) {
		var c current
		steps := []db.Step{
			{Query: q.Get("KindLockShared"), Args: []any{s.db.Schema(), kind}, Scan: func(r db.Row) error { var v any; return r.Scan(&v) }},
			{Query: q.Get("KindCurrent"), Args: []any{kind}, Scan: func(r db.Row) error { return r.Scan(&c.scope, &c.builtin, &c.rev) }},
		}
		if s.skipWriteLock {
			steps = steps[1:]
		}
		err := tx.Pipeline(ctx, steps...)
		if errors.Is(err, db.ErrNotFound) {
			return nil, fault.NotFound("kind %q is not registered", fault.Truncate(kind, 80))
		}
		if err != nil {
			return nil, err
		}
		c.at = s.now()
		s.remember(kind, c)
		return c, nil
	})
	if err != nil {
		return current{}, err
	}
	return v.(current), nil
}

// Present runs the read pipeline of kind's current revision on a stored spec: aliases
// mapped to canonical names, tombstoned fields hidden, current defaults filled into absent
// fields. Reads never fail: when the registry cannot be read, the spec is returned as stored.
//
// qr is the caller's transaction when it has one: the registry is read through it, so a
// transaction never waits for a second pooled connection (with every connection held by such
// transactions, that wait would never end).
func (s *Service) Present(ctx context.Context, qr db.Querier, kind string, spec json.RawMessage) json.RawMessage {
	var (
		c   current
		err error
	)
	if tx, ok := qr.(*db.Tx); ok {
		// Inside a write: the object is presented by the revision the write will be judged
		// by (the kind's key taken now, as Admit would), not by a cached one.
		c, err = s.lockedCurrent(ctx, tx, kind)
	} else {
		c, err = s.lookup(ctx, qr, kind, false)
	}
	if err != nil {
		return spec
	}
	sch, err := s.revision(ctx, qr, kind, c.rev)
	if err != nil {
		return spec
	}
	s.mu.Lock()
	inert := s.inert[revKey{kind, c.rev}]
	s.mu.Unlock()
	if inert {
		return spec
	}
	v, err := decode(spec)
	if err != nil {
		return spec
	}
	out, err := encode(sch.Present(v))
	if err != nil {
		return spec
	}
	return out
}

// List returns every kind, built-in ones included.
func (s *Service) List(ctx context.Context) ([]api.KindInfo, error) {
	rows, err := s.db.Query(ctx, q.Get("KindList"))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []api.KindInfo{}
	for rows.Next() {
		var k api.KindInfo
		if err := rows.Scan(&k.Name, &k.Scope, &k.Builtin, &k.Revision, &k.CreatedAt, &k.UpdatedAt); err != nil {
			return nil, err
		}
		k.CreatedAt, k.UpdatedAt = k.CreatedAt.UTC(), k.UpdatedAt.UTC()
		out = append(out, k)
	}
	return out, rows.Err()
}

// Get returns one kind with its current schema.
func (s *Service) Get(ctx context.Context, name string) (api.KindInfo, error) {
	k := api.KindInfo{Name: name}
	err := s.db.QueryRow(ctx, q.Get("KindGet"), name).Scan(&k.Scope, &k.Builtin, &k.Revision, &k.CreatedAt, &k.UpdatedAt)
	if errors.Is(err, db.ErrNotFound) {
		return k, fault.NotFound("kind %q is not registered", fault.Truncate(name, 80))
	}
	if err != nil {
		return k, err
	}
	k.CreatedAt, k.UpdatedAt = k.CreatedAt.UTC(), k.UpdatedAt.UTC()
	rev, err := s.Revision(ctx, name, k.Revision)
	k.Schema = rev.Schema
	return k, err
}

// Revisions returns every revision of a kind, oldest first.
func (s *Service) Revisions(ctx context.Context, name string) ([]api.KindRevision, error) {
	rows, err := s.db.Query(ctx, q.Get("KindRevisions"), name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []api.KindRevision{}
	for rows.Next() {
		r := api.KindRevision{Kind: name}
		var doc, report []byte
		if err := rows.Scan(&r.Revision, &doc, &report, &r.CreatedBy, &r.CreatedAt); err != nil {
			return nil, err
		}
		r.Schema, r.CreatedAt = doc, r.CreatedAt.UTC()
		if err := json.Unmarshal(report, &r.Report); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fault.NotFound("kind %q is not registered", fault.Truncate(name, 80))
	}
	scope, err := s.scopeOf(ctx, name)
	if err != nil {
		return nil, err
	}
	vis := s.visibilityOf(ctx)
	for i := range out {
		out[i].Report = vis.filterReport(ctx, scope, out[i].Report)
	}
	return out, nil
}

// scopeOf returns a registered kind's scope ("org" or "global").
func (s *Service) scopeOf(ctx context.Context, name string) (string, error) {
	c, err := s.lookup(ctx, s.db, name, false)
	return c.scope, err
}

// Revision returns one revision of a kind.
func (s *Service) Revision(ctx context.Context, name string, n int) (api.KindRevision, error) {
	r := api.KindRevision{Kind: name, Revision: n}
	var doc, report []byte
	err := s.db.QueryRow(ctx, q.Get("KindRevisionGet"), name, n).Scan(&doc, &report, &r.CreatedBy, &r.CreatedAt)
	if errors.Is(err, db.ErrNotFound) {
		return r, fault.NotFound("kind %q has no revision %d", fault.Truncate(name, 80), n)
	}
	if err != nil {
		return r, err
	}
	r.Schema, r.CreatedAt = doc, r.CreatedAt.UTC()
	if err := json.Unmarshal(report, &r.Report); err != nil {
		return r, err
	}
	scope, err := s.scopeOf(ctx, name)
	if err != nil {
		return r, err
	}
	r.Report = s.visibilityOf(ctx).filterReport(ctx, scope, r.Report)
	return r, nil
}

// BuiltinSchema returns the schema strata ships for a built-in kind.
func BuiltinSchema(name string) ([]byte, error) {
	return builtinFS.ReadFile("builtin/" + name + ".json")
}

// EnsureBuiltin registers the built-in kinds' schemas this release ships, through the same
// compatibility check as users' kinds, when the registry holds no revision equal to them.
// An older release's schema already present as an earlier revision is left alone, so a
// staged rollout never registers a schema backwards.
func (s *Service) EnsureBuiltin(ctx context.Context) error {
	for _, name := range Builtin {
		doc, err := BuiltinSchema(name)
		if err != nil {
			return err
		}
		var exists bool
		if err := s.db.QueryRow(ctx, q.Get("KindRevisionExists"), name, doc).Scan(&exists); err != nil {
			return err
		}
		if exists {
			continue
		}
		res, err := s.register(ctx, auth.AuditActor{Actor: "strata"}, name, api.KindRequest{Schema: doc}, false, true)
		if err != nil {
			return fmt.Errorf("register the built-in schema of %s: %w", name, err)
		}
		_ = res
	}
	return nil
}

// Register registers req as the next revision of kind name (or, with dryRun, only reports).
// The schema must be in strata's structural subset (422 naming the schema pointer); an
// identical schema is no new revision (Unchanged); a rejected or unacknowledged change is a
// 409 whose problem document carries the report. Built-in kinds evolve with strata
// releases and cannot be registered through the API.
func (s *Service) Register(ctx context.Context, actor auth.AuditActor, name string, req api.KindRequest, dryRun bool) (api.KindResult, error) {
	if slices.Contains(Builtin, name) {
		return api.KindResult{}, fault.Conflict("%s is a built-in kind: its schema evolves with strata releases, not through the API", name)
	}
	if err := ValidateKindName(name); err != nil {
		return api.KindResult{}, err
	}
	return s.register(ctx, actor, name, req, dryRun, false)
}

func (s *Service) register(ctx context.Context, actor auth.AuditActor, name string, req api.KindRequest, dryRun, builtin bool) (api.KindResult, error) {
	res := api.KindResult{Kind: name, DryRun: dryRun, Report: api.KindReport{Compatible: true, Changes: []api.KindFinding{}, Against: []int{}}}
	if req.Scope != "" && req.Scope != "org" && req.Scope != "global" {
		return res, fault.UnprocessableFields("invalid kind", []fault.FieldError{{Field: "/scope", Message: fmt.Sprintf("scope must be \"org\" or \"global\", not %q", fault.Truncate(req.Scope, 40))}})
	}
	if len(bytes.TrimSpace(req.Schema)) == 0 {
		return res, fault.UnprocessableFields("invalid kind", []fault.FieldError{{Field: "/schema", Message: "required: the JSON Schema of the kind's spec"}})
	}
	next, err := schema.Parse(req.Schema)
	if err != nil {
		return res, underSchema(err)
	}
	canonical, err := encode(next.Doc())
	if err != nil {
		return res, err
	}
	if bytes.Contains(canonical, []byte(`\u0000`)) {
		// PostgreSQL's jsonb cannot store the NUL character.
		return res, fault.UnprocessableFields("invalid kind", []fault.FieldError{{Field: "/schema", Message: "must not contain the NUL character (\\u0000), which PostgreSQL cannot store"}})
	}
	acks := make([]compat.Ack, 0, len(req.Acknowledge))
	for _, a := range req.Acknowledge {
		acks = append(acks, compat.Ack{Path: a.Path, Rule: a.Rule})
	}
	vis := s.visibilityOf(ctx)
	represented := 0
	// present is a held value under the new revision: its defaults and aliases filled in.
	present := func(raw []byte) ([]byte, error) {
		v, err := decode(raw)
		if err != nil {
			return nil, err
		}
		return encode(next.Present(v))
	}
	// The data-aware part of the check, without the kind's key: writes of the kind go on
	// meanwhile, and the locked part below re-checks only the objects they wrote.
	pre, err := s.scanUnlocked(ctx, name, next, acks, vis)
	if err != nil {
		return res, err
	}
	if s.afterUnlockedScan != nil {
		s.afterUnlockedScan()
	}
	if dryRun && pre != nil && !pre.unchanged {
		// A dry run answers from the unlocked scan: advice as of its snapshot, no key taken.
		res.Scope, res.Revision, res.Report = pre.plan.scope, pre.plan.rev+1, pre.plan.report()
		// The held values the registration would present differently must be the caller's
		// to write, in a dry run as in the real one.
		if s.holder != nil {
			err := s.db.ReadTx(ctx, func(tx *db.Tx) error {
				_, err := s.holder.Represent(ctx, tx, name, res.Revision, present, true)
				return err
			})
			if err != nil {
				return res, err
			}
		}
		return res, nil
	}
	err = s.db.InTx(ctx, func(tx *db.Tx) error {
		if _, err := tx.Exec(ctx, q.Get("KindLockExclusive"), s.db.Schema(), name); err != nil {
			return err
		}
		cur, err := s.lookup(ctx, tx, name, true)
		if fault.KindOf(err) == fault.KindNotFound {
			if builtin {
				return fmt.Errorf("built-in kind %s is missing from the registry", name)
			}
			if req.Scope == "" {
				return fault.UnprocessableFields("invalid kind", []fault.FieldError{{Field: "/scope", Message: "required on a kind's first registration: \"org\" or \"global\""}})
			}
			// Kind names resolve case-insensitively in the CLI (`strata get database`), so two
			// that differ only in case would be ambiguous.
			if _, err := tx.Exec(ctx, q.Get("KindLockFolded"), s.db.Schema(), name); err != nil {
				return err
			}
			var other string
			switch err := tx.QueryRow(ctx, q.Get("KindFoldedName"), name).Scan(&other); {
			case err == nil:
				return fault.Conflict("kind %s exists; names of kinds must differ by more than case (register %s, or choose another name)", other, other)
			case !errors.Is(err, db.ErrNotFound):
				return err
			}
			res.Scope, res.Revision = req.Scope, 1
			for _, a := range req.Acknowledge {
				res.Report.RedundantAcks = append(res.Report.RedundantAcks, api.KindRedundantAck{Path: fault.Truncate(a.Path, 200), Rule: fault.Truncate(a.Rule, 80),
					Reason: "a kind's first registration changes nothing: there is nothing to acknowledge"})
			}
			if dryRun {
				return nil
			}
			if _, err := tx.Exec(ctx, q.Get("KindInsert"), name, req.Scope, false); err != nil {
				return err
			}
			return s.insertRevision(ctx, tx, actor, name, 1, canonical, res.Report)
		}
		if err != nil {
			return err
		}
		if cur.builtin && !builtin {
			return fault.Conflict("%s is a built-in kind: its schema evolves with strata releases, not through the API", name)
		}
		if req.Scope != "" && req.Scope != cur.scope {
			return &fault.Error{Kind: fault.KindConflict, Detail: fmt.Sprintf("kind %s has scope %q; a kind's scope cannot change (register a new kind and move the objects)", name, cur.scope),
				Fields: []fault.FieldError{{Field: "/scope", Message: fmt.Sprintf("must stay %q", cur.scope)}}}
		}
		res.Scope = cur.scope
		latest, err := s.revision(ctx, tx, name, cur.rev)
		if err != nil {
			return err
		}
		if same, err := encode(latest.Doc()); err == nil && bytes.Equal(same, canonical) {
			res.Revision, res.Unchanged = cur.rev, true
			return nil
		}
		var report api.KindReport
		if p, ok, err := s.recheck(ctx, tx, name, cur, next, pre); err != nil {
			return err
		} else if ok {
			report = p.report()
		} else if report, err = s.check(ctx, tx, name, cur, next, acks, vis); err != nil {
			return err
		}
		res.Report, res.Revision = report, cur.rev+1
		if s.afterScan != nil {
			s.afterScan()
		}
		if !report.Compatible && !dryRun {
			return &fault.Error{Kind: fault.KindConflict,
				Detail:     refusal(report),
				Extensions: map[string]any{"report": report}}
		}
		if dryRun {
			if s.holder != nil {
				_, err := s.holder.Represent(ctx, tx, name, cur.rev+1, present, true)
				return err
			}
			return nil
		}
		if _, err := tx.Exec(ctx, q.Get("KindAdvance"), name, cur.rev+1); err != nil {
			return err
		}
		if err := s.insertRevision(ctx, tx, actor, name, cur.rev+1, canonical, report); err != nil {
			return err
		}
		if s.holder == nil {
			return nil
		}
		// Held values are read without the registry (Salt renders them from SQL), so the new
		// revision's defaults and aliases are written into them now, under the kind's key —
		// which the holder refuses, and the whole registration with it, when the caller may
		// not write one of them.
		represented, err = s.holder.Represent(ctx, tx, name, cur.rev+1, present, false)
		return err
	})
	if err != nil {
		return res, err
	}
	if represented > 0 {
		s.holder.Represented()
	}
	if !dryRun && !res.Unchanged {
		s.remember(name, current{scope: res.Scope, rev: res.Revision, builtin: builtin, at: s.now()})
	}
	return res, nil
}

// refusal summarises why a report refuses a registration.
func refusal(r api.KindReport) string {
	var rejected, unacked []string
	for _, f := range r.Changes {
		if f.Field == "" { // an unknown acknowledgement has a path but no field of the spec
			f.Field = f.Path
		}
		switch {
		case f.Verdict == string(compat.Reject):
			rejected = append(rejected, f.Field+" ("+f.Rule+")")
		case f.Verdict == string(compat.Acknowledge) && !f.Acknowledged && !f.Earlier:
			// An earlier change was acknowledged when it was registered: not a question now.
			unacked = append(unacked, f.Field+" ("+f.Rule+")")
		}
	}
	var parts []string
	if len(rejected) > 0 {
		parts = append(parts, "rejected: "+strings.Join(rejected, ", "))
	}
	if len(unacked) > 0 {
		parts = append(parts, "needs an acknowledgement: "+strings.Join(unacked, ", "))
	}
	return "the schema change is not compatible with the stored objects or their readers; " + strings.Join(parts, "; ") + " (the report says why and what to do)"
}

func (s *Service) insertRevision(ctx context.Context, tx *db.Tx, actor auth.AuditActor, name string, rev int, doc json.RawMessage, report api.KindReport) error {
	rep, err := json.Marshal(report)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, q.Get("KindRevisionInsert"), name, rev, []byte(doc), rep, actor.Actor); err != nil {
		return err
	}
	return auth.RecordAudit(ctx, tx, auth.AuditEntry{Actor: actor.Actor, Action: "kind.register", Target: name, RemoteAddr: actor.RemoteAddr,
		Detail: map[string]any{"revision": rev, "changes": len(report.Changes)}})
}

// underSchema re-roots the schema package's field pointers under /schema, the member of
// the request body they are in.
func underSchema(err error) error {
	var fe *fault.Error
	if !errors.As(err, &fe) {
		return err
	}
	out := *fe
	out.Fields = make([]fault.FieldError, len(fe.Fields))
	for i, f := range fe.Fields {
		out.Fields[i] = fault.FieldError{Field: "/schema" + f.Field, Message: f.Message}
	}
	return &out
}

// check diffs next against the latest revision and every older revision stored objects
// still reference, runs the data-aware checks the changes need over the stored objects, and
// decides. The caller holds the kind's key exclusively, so the scan sees every object that
// will ever have been written under the revisions it diffs against.
//
// A caller who may not read every object of the kind (vis) is judged without looking at the
// data at all, so that neither the report nor the verdict can reveal objects of orgs it
// cannot read: against every older revision instead of the ones objects still use, and a
// change that needs the data-aware check is a 403 naming the scope it needs — decided from
// the schemas alone, before any object is read.
func (s *Service) check(ctx context.Context, tx *db.Tx, name string, cur current, next *schema.Schema, acks []compat.Ack, vis visibility) (api.KindReport, error) {
	p, err := s.plan(ctx, tx, name, cur, next, acks, vis)
	if err != nil {
		return api.KindReport{}, err
	}
	if p.scan {
		if err := s.scanAll(ctx, tx, name, next, p); err != nil {
			return api.KindReport{}, err
		}
	}
	return p.report(), nil
}

// checkPlan is a registration's check: the changes the new revision makes against every live
// revision, which of them need the stored data (scan), and, once scanned, which objects hit
// which change (by label, so a re-check of some objects replaces their entries).
type checkPlan struct {
	rev     int // the current revision the plan was made against
	scope   string
	against []int
	changes []keyedChange
	plain   []compat.Change
	acks    []compat.Ack
	// userAcks is how many of acks the request carried; the rest are the acknowledgements
	// of earlier changes, added by plan.
	userAcks int
	scan     bool
	hits     map[string][]int // object label -> indexes into plain
	scanned  int
	// heldScanned counts the held values among scanned (a re-check reads them all again).
	heldScanned int
}

type keyedChange struct {
	change  compat.Change
	against int
	earlier bool
}

// plan computes the changes of a registration and whether they need the data.
func (s *Service) plan(ctx context.Context, tx *db.Tx, name string, cur current, next *schema.Schema, acks []compat.Ack, vis visibility) (*checkPlan, error) {
	latestRev := cur.rev
	blind := !vis.all(cur.scope)
	against := []int{latestRev}
	var live []int
	if blind {
		for r := latestRev - 1; r >= 1; r-- {
			live = append(live, r)
		}
	} else {
		rows, err := tx.Query(ctx, q.Get("KindLiveRevisions"), name)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var r int
			if err := rows.Scan(&r); err != nil {
				rows.Close()
				return nil, err
			}
			live = append(live, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	var held []int
	if s.holder != nil {
		var err error
		if held, err = s.holder.HeldRevisions(ctx, tx, name); err != nil {
			return nil, err
		}
		if !blind {
			live = append(live, held...)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(live)))
	live = slices.Compact(live)
	for _, r := range live {
		if r != latestRev && r < latestRev {
			against = append(against, r)
		}
	}
	var changes []keyedChange
	seen := map[string]bool{}
	latest, err := s.revision(ctx, tx, name, latestRev)
	if err != nil {
		return nil, err
	}
	for _, rev := range against {
		old, err := s.revision(ctx, tx, name, rev)
		if err != nil {
			return nil, err
		}
		// A change against an older revision that the latest revision already makes too was
		// decided when it was registered (acknowledged then, if it needed that): context
		// now, not a question to ask again.
		already := map[string]bool{}
		if rev != latestRev {
			for _, c := range compat.Diff(old.Doc(), latest.Doc()) {
				already[c.Path+"\x00"+c.Rule] = true
			}
		}
		for _, c := range compat.Diff(old.Doc(), next.Doc()) {
			k := c.Path + "\x00" + c.Rule
			if seen[k] {
				continue
			}
			seen[k] = true
			changes = append(changes, keyedChange{c, rev, already[k]})
		}
	}
	userAcks := len(acks)
	acks = slices.Clone(acks)
	for _, c := range changes {
		if c.earlier && c.change.Ack != "" {
			acks = append(acks, compat.Ack{Path: c.change.Path, Rule: c.change.Ack})
		}
	}
	p := &checkPlan{rev: cur.rev, scope: cur.scope, against: against, changes: changes, plain: make([]compat.Change, len(changes)), acks: acks, userAcks: userAcks, hits: map[string][]int{}}
	for i, c := range changes {
		p.plain[i] = c.change
		p.scan = p.scan || c.change.Check != compat.NoCheck
	}
	if p.scan && blind {
		var need string
		for _, c := range changes {
			if c.change.Check != compat.NoCheck {
				need = c.change.Rule + " at " + c.change.Field
				break
			}
		}
		return nil, fault.Forbidden("this schema change of %s (%s) is checked against every stored object, and token %q may not read all of them: it needs scope resources:read:%s (or resources:read:*); changes that need no data (new optional fields, descriptions, defaults) need only kinds:write",
			name, need, vis.p.Name, auth.TargetName(cur.scope, "*"))
	}
	if p.scan && len(held) > 0 && !vis.allHeld {
		return nil, fault.Forbidden("this schema change of %s is checked against the stored pillar rows of the categories bound to it, and token %q may not read all of them: it needs scope %s",
			name, vis.p.Name, vis.heldScope)
	}
	return p, nil
}

// report decides the plan on the hits found so far. Each change's sample names the first
// affected objects by label order, so a report does not depend on where rows lie on disk.
func (p *checkPlan) report() api.KindReport {
	impacts := map[int]compat.Impact{}
	labels := slices.Sorted(maps.Keys(p.hits))
	for _, label := range labels {
		for _, i := range p.hits[label] {
			im := impacts[i]
			im.Count++
			if len(im.Sample) < SampleSize {
				im.Sample = append(im.Sample, label)
			}
			impacts[i] = im
		}
	}
	decided := compat.Decide(p.plain, impacts, p.acks)
	report := api.KindReport{Compatible: decided.Compatible, Changes: []api.KindFinding{}, Scanned: p.scanned, Against: p.against}
	for _, f := range decided.Changes {
		kf := api.KindFinding{Path: f.Path, Field: f.Field, Rule: f.Rule, Row: f.Row, Verdict: string(f.Verdict), Acknowledged: f.Acknowledged,
			Ack: f.Ack, Message: f.Message, WayForward: f.WayForward}
		if f.Impact != nil {
			kf.Impact = &api.KindImpact{Count: f.Impact.Count, Sample: f.Impact.Sample}
			if kf.Impact.Sample == nil {
				kf.Impact.Sample = []string{}
			}
		}
		for _, c := range p.changes {
			if c.change.Path == f.Path && c.change.Rule == f.Rule {
				kf.Against, kf.Earlier = c.against, c.earlier
				if c.earlier {
					kf.Acknowledged = false // decided then, not acknowledged now
				}
				break
			}
		}
		report.Changes = append(report.Changes, kf)
	}
	report.RedundantAcks = p.redundant(report.Changes)
	return report
}

// redundant lists the request's acknowledgements that matched changes but that none of them
// needed: the change was decided by an earlier registration (the current revision already
// makes it), or its verdict is accept (nothing to acknowledge) or reject (an acknowledgement
// cannot accept it). An acknowledgement that matches no change at all is not listed here:
// Decide reports it as a rejected unknown-acknowledgement.
func (p *checkPlan) redundant(findings []api.KindFinding) []api.KindRedundantAck {
	var out []api.KindRedundantAck
	for _, a := range p.acks[:p.userAcks] {
		var matched *api.KindFinding
		needed := false
		for i, f := range findings {
			if f.Rule == "unknown-acknowledgement" || (a.Path != f.Path && (f.Field == "" || a.Path != f.Field)) || (a.Rule != f.Ack && a.Rule != f.Rule) {
				continue
			}
			matched = &findings[i]
			if !f.Earlier && f.Verdict == string(compat.Acknowledge) {
				needed = true
			}
		}
		if matched == nil || needed {
			continue
		}
		what := matched.Field + " (" + matched.Rule + ")"
		var reason string
		switch {
		case matched.Earlier:
			reason = fmt.Sprintf("%s was decided by an earlier registration: revision %d already makes that change", what, p.rev)
		case matched.Verdict == string(compat.Reject):
			reason = fmt.Sprintf("%s is rejected: an acknowledgement cannot accept it", what)
		default:
			reason = fmt.Sprintf("%s is accepted without one", what)
		}
		out = append(out, api.KindRedundantAck{Path: fault.Truncate(a.Path, 200), Rule: fault.Truncate(a.Rule, 80), Reason: reason})
	}
	return out
}

// unlockedScan is the first part of a registration's check, made in one snapshot without
// the kind's key: the plan against the revision current then, its hits on every stored
// object, and which changes the snapshot held (head and missing: SnapshotVersions).
type unlockedScan struct {
	plan      *checkPlan
	head      int64
	missing   []int64
	unchanged bool // the schema is the current revision's: nothing to check
}

// scanUnlocked runs the data scan of a registration of an existing kind in a read-only
// snapshot, holding no key: nil when there is nothing to scan under a lock-free snapshot
// (a first registration, a built-in kind, changes that need no data), and the locked part
// then checks as before.
func (s *Service) scanUnlocked(ctx context.Context, name string, next *schema.Schema, acks []compat.Ack, vis visibility) (*unlockedScan, error) {
	var out *unlockedScan
	err := s.db.ReadTx(ctx, func(tx *db.Tx) error {
		cur, err := s.lookup(ctx, tx, name, true)
		if fault.KindOf(err) == fault.KindNotFound || (err == nil && cur.builtin) {
			return nil
		}
		if err != nil {
			return err
		}
		latest, err := s.revision(ctx, tx, name, cur.rev)
		if err != nil {
			return err
		}
		if same, err := encode(latest.Doc()); err == nil {
			if canonical, err := encode(next.Doc()); err == nil && bytes.Equal(same, canonical) {
				out = &unlockedScan{unchanged: true}
				return nil
			}
		}
		p, err := s.plan(ctx, tx, name, cur, next, acks, vis)
		if err != nil || !p.scan {
			return err // a refusal to scan blind is the answer; no scan needs no snapshot
		}
		head, missing, err := resource.SnapshotVersions(ctx, tx)
		if err != nil {
			return err
		}
		if err := s.scanAll(ctx, tx, name, next, p); err != nil {
			return err
		}
		out = &unlockedScan{plan: p, head: head, missing: missing}
		return nil
	})
	return out, err
}

// recheck completes an unlocked scan under the kind's key (held by tx): when the kind is
// still at the revision the scan planned against, it re-examines only the objects written
// since the scan's snapshot (and forgets those deleted since), found in the changes log, and
// reports true. Otherwise — no scan, another registration came between, or the log was
// pruned past the snapshot — it reports false and the caller checks everything anew.
func (s *Service) recheck(ctx context.Context, tx *db.Tx, name string, cur current, next *schema.Schema, pre *unlockedScan) (*checkPlan, bool, error) {
	if pre == nil || pre.plan == nil || pre.plan.rev != cur.rev || pre.plan.scope != cur.scope {
		return nil, false, nil
	}
	p := pre.plan
	if s.skipRecheck {
		return p, true, nil
	}
	var compacted int64
	if err := tx.QueryRow(ctx, q.Get("KindCompacted")).Scan(&compacted); err != nil {
		return nil, false, err
	}
	if compacted > pre.head {
		return nil, false, nil
	}
	rows, err := tx.Query(ctx, q.Get("KindChangedNames"), name, pre.head, pre.missing)
	if err != nil {
		return nil, false, err
	}
	var orgs, names []string
	for rows.Next() {
		var org, obj string
		if err := rows.Scan(&org, &obj); err != nil {
			rows.Close()
			return nil, false, err
		}
		orgs, names = append(orgs, org), append(names, obj)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	if len(names) > 0 {
		for i := range names {
			delete(p.hits, objectLabel(orgs[i], names[i])) // gone, or re-examined just below
		}
		n, err := s.scanRows(ctx, tx, name, next, p, q.Get("KindScanNamed"), name, orgs, names)
		p.scanned += n
		if err != nil {
			return p, true, err
		}
	}
	return p, true, s.scanHeld(ctx, tx, name, next, p)
}

// scanAll examines every stored object of the kind for the changes that need data: values
// the new revision's schema refuses at a change's path and keyword, and values present or
// absent at a path. It records each object's hits in p and counts the objects read.
func (s *Service) scanAll(ctx context.Context, tx *db.Tx, name string, next *schema.Schema, p *checkPlan) error {
	n, err := s.scanRows(ctx, tx, name, next, p, q.Get("KindScan"), name)
	p.scanned += n
	if err != nil {
		return err
	}
	return s.scanHeld(ctx, tx, name, next, p)
}

// scanRows examines the objects query returns (org, name, spec), replacing their hits in p.
func (s *Service) scanRows(ctx context.Context, tx *db.Tx, name string, next *schema.Schema, p *checkPlan, query *db.Query, args ...any) (int, error) {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var (
			org, obj string
			raw      []byte
		)
		if err := rows.Scan(&org, &obj, &raw); err != nil {
			return n, err
		}
		n++
		if err := p.examine(next, objectLabel(org, obj), raw); err != nil {
			return n, fmt.Errorf("stored spec of %s %s: %w", name, obj, err)
		}
	}
	return n, rows.Err()
}

// scanHeld examines every value of the kind the holder keeps (pillar rows of bound
// categories), replacing the hits of held values in p: held values are few next to objects
// and have no change log, so a locked re-check reads them all again.
func (s *Service) scanHeld(ctx context.Context, tx *db.Tx, name string, next *schema.Schema, p *checkPlan) error {
	if s.holder == nil {
		return nil
	}
	for label := range p.hits {
		if _, ok := heldName(label); ok {
			delete(p.hits, label)
		}
	}
	p.scanned -= p.heldScanned
	p.heldScanned = 0
	err := s.holder.ScanHeld(ctx, tx, name, func(label string, raw []byte) error {
		p.heldScanned++
		if err := p.examine(next, label, raw); err != nil {
			return fmt.Errorf("stored value of %s %s: %w", name, label, err)
		}
		return nil
	})
	p.scanned += p.heldScanned
	return err
}

// examine records which of p's changes the stored value raw, labelled label, hits.
func (p *checkPlan) examine(next *schema.Schema, label string, raw []byte) error {
	spec, err := decode(raw)
	if err != nil {
		return err
	}
	needViolations := false
	for _, c := range p.plain {
		needViolations = needViolations || c.Check == compat.Violations
	}
	var viols []schema.Violation
	if needViolations {
		viols = next.Violations(next.Present(spec))
	}
	var hit []int
	for i, c := range p.plain {
		h := false
		switch c.Check {
		case compat.Violations:
			for _, v := range viols {
				if c.Counts(v.Schema, v.Keyword) {
					h = true
					break
				}
			}
		case compat.Present:
			h = compat.HasValue(spec, c.Path)
		case compat.Absent:
			h = compat.Lacks(spec, c.Path)
		}
		if h {
			hit = append(hit, i)
		}
	}
	if len(hit) > 0 {
		p.hits[label] = hit
	} else {
		delete(p.hits, label)
	}
	return nil
}

// objectLabel names an object in a report: org/name, or name for global kinds.
func objectLabel(org, name string) string {
	if org != "" {
		return org + "/" + name
	}
	return name
}
