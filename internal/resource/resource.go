// Package resource owns strata's object model: orgs, groups, nodes and user kinds, stored in
// one resources table with their labels and annotations.
//
// Every change runs in one transaction that ends with ResourceStamp: it draws the change's
// resourceVersion from a plain sequence and appends the change to the changes table that
// watch resumes from. No lock orders the commits; readers wait for versions still in flight
// instead (versions.go), so lists and watches never skip or reorder a change. Optimistic concurrency compares the stored
// resourceVersion under a row lock (SELECT … FOR UPDATE), so a stale writer gets a conflict,
// never a lost update; creation races end on the (kind, org, name) unique constraint.
package resource

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/jsondepth"
	"github.com/stratahq/strata/internal/metadata"
	"github.com/stratahq/strata/internal/sabotage"
)

//go:embed queries.sql
var queryFS embed.FS

var q = db.MustParseQueries(queryFS, "queries.sql")

// KindOrg is the kind of organisations, a global kind (org ”).
const KindOrg = "Org"

// MaxListLimit caps one page of a list.
const MaxListLimit = 1000

var dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// ValidateName checks a resource name: a DNS label (lower-case alphanumerics and '-', at most
// 63 characters), so names are safe in URLs, scopes and label values.
func ValidateName(name string) error {
	if len(name) > 63 || !dnsLabelRE.MatchString(name) {
		return fault.Invalid("/metadata/name", "name %q must be 1-63 lower-case alphanumerics or '-', starting and ending with an alphanumeric", fault.Truncate(name, 80))
	}
	return nil
}

// Ref identifies one object.
type Ref struct {
	Kind string
	Org  string
	Name string
}

// Service reads and writes objects of the kinds in its registry.
type Service struct {
	db      *db.DB
	kinds   *Kinds
	schemas Schemas
	// DriveLimit is DefaultDriveLimit unless changed before use (tests set 0 to force the
	// walking plan, to check that both plans answer the same).
	DriveLimit int
	// onWrite runs after each write transaction (see OnWrite).
	onWrite []func(scopes ...string)
	// onRename runs in each renaming transaction (see OnRename).
	onRename []func(ctx context.Context, tx *db.Tx, kind string, id int64, old, new string) error
	// resolved is a version through which every version is known resolved (versions.go).
	resolved atomic.Int64
	// exposeGaps turns off waiting for versions in flight, for tests' controls only.
	exposeGaps bool
	// index, when set (Hub.ServeLists), answers lists from memory (index.go) and is the
	// base of updates (updateFromIndex).
	index *Index
	// trustStaleBases skips the check that an update's base is still the stored object, for
	// the control of the stale-copy test only.
	trustStaleBases bool
}

// OnWrite registers f to run after every write transaction of this service has ended,
// committed or not, before the write's caller gets its answer, with the render scopes the
// write can have changed (node:<name>, org:<name>; none when it cannot change a render, as
// objects of user kinds). The replica's render cache uses it to drop those renders at once:
// the NOTIFY every replica gets arrives after the writing request has answered, and a render
// served from the cache in between would predate a write this replica acknowledged. Call it
// before serving.
func (s *Service) OnWrite(f func(scopes ...string)) { s.onWrite = append(s.onWrite, f) }

// wrote runs the OnWrite functions with the scopes a write of refs can have changed.
func (s *Service) wrote(refs ...Ref) {
	var scopes []string
	for _, r := range refs {
		if scope := r.renderScope(); scope != "" {
			scopes = append(scopes, scope)
		}
	}
	if len(scopes) == 0 {
		return
	}
	for _, f := range s.onWrite {
		f(scopes...)
	}
}

// NewService returns a Service over d serving the built-in kinds (Org, Node, Group).
func NewService(d *db.DB) *Service {
	s := &Service{db: d, DriveLimit: DefaultDriveLimit}
	s.kinds = NewKinds(OrgKind(), NodeKind(), GroupKind())
	return s
}

// UseSchemas connects the kind registry: from now on every write of every kind, built-in
// or user-defined, runs its kind's schema write pipeline, every read its read pipeline, and
// the user kinds sc knows are served. Call it once, before serving.
func (s *Service) UseSchemas(sc Schemas) {
	s.schemas = sc
	var ks []*Kind
	for _, k := range s.kinds.All() {
		ks = append(ks, withSchemas(k, sc))
	}
	s.kinds = NewKinds(ks...)
}

// Kind returns the descriptor of a kind, built-in or user-defined; 404 when unknown.
func (s *Service) Kind(ctx context.Context, name string) (*Kind, error) {
	k, err := s.kinds.Get(name)
	if err == nil || s.schemas == nil {
		return k, err
	}
	scope, uerr := s.schemas.UserKind(ctx, name)
	if uerr != nil {
		return nil, uerr
	}
	return userKind(name, scope, s.schemas), nil
}

// presentObject runs the read pipeline of obj's kind on obj (aliases mapped to canonical
// names, tombstoned fields hidden, current defaults filled in; research §5.1) for every object
// a read, a list or a watch returns. Reads never validate and never fail.
// qr is the caller's transaction, or s's database outside one.
func (s *Service) presentObject(ctx context.Context, qr db.Querier, obj *api.Object) {
	k, err := s.Kind(ctx, obj.Kind)
	if err != nil || k.Present == nil || len(obj.Spec) == 0 {
		return
	}
	obj.Spec = k.Present(ctx, qr, obj.Spec)
}

type warningSlot struct{}

type warningSink struct {
	mu   sync.Mutex
	msgs []string
}

// CollectWarnings returns a context whose writes record the warnings of their kinds' write
// pipelines (deprecated or tombstoned fields sent, grandfathered violations), and a function
// that returns them, for the HTTP layer's Warning headers.
func CollectWarnings(ctx context.Context) (context.Context, func() []string) {
	sink := &warningSink{}
	return context.WithValue(ctx, warningSlot{}, sink), func() []string {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return append([]string(nil), sink.msgs...)
	}
}

func addWarnings(ctx context.Context, msgs []string) {
	if sink, ok := ctx.Value(warningSlot{}).(*warningSink); ok && len(msgs) > 0 {
		sink.mu.Lock()
		sink.msgs = append(sink.msgs, msgs...)
		sink.mu.Unlock()
	}
}

// admit runs k's schema write pipeline on obj (prev: the stored object, nil on create).
func admit(ctx context.Context, tx *db.Tx, k *Kind, obj *api.Object, prev *api.Object) error {
	obj.Metadata.SchemaRevision = 0
	if k.Admit == nil {
		return nil
	}
	var prevSpec json.RawMessage
	if prev != nil {
		prevSpec = prev.Spec
	}
	spec, rev, warnings, err := k.Admit(ctx, tx, obj.Spec, prevSpec)
	if err != nil {
		return err
	}
	obj.Spec, obj.Metadata.SchemaRevision = spec, rev
	addWarnings(ctx, warnings)
	return nil
}

// Kinds returns the registry of the kinds s serves.
func (s *Service) Kinds() *Kinds { return s.kinds }

// DB returns the database s writes to, for the kinds' hooks.
func (s *Service) DB() *db.DB { return s.db }

// kindOf returns the descriptor of ref's kind and checks that ref fits its scope.
func (s *Service) kindOf(ctx context.Context, ref Ref) (*Kind, error) {
	k, err := s.Kind(ctx, ref.Kind)
	if err != nil {
		return nil, err
	}
	if (k.Scope == ScopeGlobal) != (ref.Org == "") {
		return nil, fault.Invalid("/metadata/org", "%s is %s", k.Name, map[Scope]string{ScopeGlobal: "a global kind and has no org", ScopeOrg: "a kind inside an org and needs one"}[k.Scope])
	}
	return k, nil
}

// normalize validates an incoming object for ref and fills defaults.
func normalize(k *Kind, ref Ref, obj *api.Object) error {
	if obj.Kind != "" && obj.Kind != ref.Kind {
		return fault.Invalid("/kind", "kind %q does not match the endpoint's kind %q", fault.Truncate(obj.Kind, 80), ref.Kind)
	}
	obj.Kind = ref.Kind
	if obj.Metadata.Name == "" {
		obj.Metadata.Name = ref.Name
	}
	if obj.Metadata.Name != ref.Name {
		return fault.Invalid("/metadata/name", "name %q does not match the name in the URL %q", fault.Truncate(obj.Metadata.Name, 80), ref.Name)
	}
	if err := k.validateName(ref.Name); err != nil {
		return err
	}
	if obj.Metadata.Org != "" && obj.Metadata.Org != ref.Org {
		return fault.Invalid("/metadata/org", "org %q does not match %q", fault.Truncate(obj.Metadata.Org, 80), ref.Org)
	}
	obj.Metadata.Org = ref.Org
	if obj.Metadata.Labels == nil {
		obj.Metadata.Labels = map[string]string{}
	}
	if obj.Metadata.Annotations == nil {
		obj.Metadata.Annotations = map[string]string{}
	}
	if err := metadata.Validate(obj.Metadata.Labels, obj.Metadata.Annotations); err != nil {
		// Well-formed JSON whose keys or values break the metadata rules: 422, each
		// offending key named.
		var fe *fault.Error
		if errors.As(err, &fe) {
			return fault.UnprocessableFields(fe.Detail, fe.Fields)
		}
		return err
	}
	if len(obj.Spec) == 0 || string(obj.Spec) == "null" {
		obj.Spec = json.RawMessage("{}")
	}
	spec, err := canonicalSpec(obj.Spec)
	if err != nil {
		return err
	}
	obj.Spec = spec
	return nil
}

// canonicalSpec checks that spec is a JSON object PostgreSQL's jsonb can store and returns
// it re-encoded: numbers keep their exact text, strings become valid UTF-8. The NUL
// character cannot be stored in jsonb, so it is refused with the path of the offending value
// rather than failing in the database.
func canonicalSpec(raw json.RawMessage) (json.RawMessage, error) {
	if !utf8.Valid(raw) {
		return nil, fault.Invalid("/spec", "spec must be valid UTF-8 (invalid bytes would be stored as U+FFFD)")
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, fault.Invalid("/spec", "spec is not valid JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fault.Invalid("/spec", "spec must be a JSON object")
	}
	if err := jsondepth.Check(v, "/spec"); err != nil {
		return nil, err
	}
	if path, ok := findNUL(v, "/spec"); ok {
		return nil, fault.Invalid(path, "must not contain the NUL character (\\u0000), which PostgreSQL cannot store")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fault.Invalid("/spec", "%v", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// findNUL returns the JSON pointer (below path) of the first string or key holding a NUL
// character. The pointer is built only when one is found: the walk keeps a stack of tokens,
// so a long key above many members is not copied once per member.
func findNUL(v any, path string) (string, bool) {
	tokens := make([]string, 0, 16)
	if hasNUL(v, &tokens) {
		return jsondepth.Pointer(path, tokens), true
	}
	return "", false
}

// hasNUL walks v for a NUL character, tokens holding the reference tokens down to v; on a hit
// they lead to it.
func hasNUL(v any, tokens *[]string) bool {
	switch t := v.(type) {
	case string:
		return strings.ContainsRune(t, 0)
	case map[string]any:
		for k, c := range t {
			*tokens = append(*tokens, k)
			if strings.ContainsRune(k, 0) || hasNUL(c, tokens) {
				return true
			}
			*tokens = (*tokens)[:len(*tokens)-1]
		}
	case []any:
		for i, c := range t {
			*tokens = append(*tokens, strconv.Itoa(i))
			if hasNUL(c, tokens) {
				return true
			}
			*tokens = (*tokens)[:len(*tokens)-1]
		}
	}
	return false
}

// Create stores a new object; 409 when it exists. An object of an org-scoped kind needs its
// org (404 otherwise); the org row is locked FOR SHARE until commit, so an org deletion
// cannot slip in between the check and the insert.
func (s *Service) Create(ctx context.Context, ref Ref, obj api.Object) (api.Object, error) {
	k, err := s.kindOf(ctx, ref)
	if err != nil {
		return api.Object{}, err
	}
	if err := normalize(k, ref, &obj); err != nil {
		return api.Object{}, err
	}
	defer s.wrote(ref)
	var out api.Object
	err = againIfTaken(func() error {
		return inTxWarning(ctx, s.db, func(ctx context.Context, tx *db.Tx) error {
			_, err := createTx(ctx, tx, k, ref, obj, &out, stampAtCommit)
			return err
		})
	})
	if err != nil {
		return api.Object{}, err
	}
	if s.index != nil {
		s.index.wrote(out)
	}
	return out, nil
}

// writeTx runs fn, which writes objects, in a transaction that announces itself after it
// commits (announceAfterCommit).
func (s *Service) writeTx(ctx context.Context, fn func(tx *db.Tx) error) error {
	return s.db.InTx(ctx, func(tx *db.Tx) error {
		announceAfterCommit(tx, s.db)
		return fn(tx)
	})
}

// announceAfterCommit makes tx, a transaction that writes objects, send no notification
// before it commits and wake every replica's change poller after (db.Tx.DeferNotifications,
// migration 0036): each object it writes is stamped in the change log with the renders the
// change can alter (renderScope), which is all a replica needs to learn from it, and the
// NOTIFY that the statement triggers would send inside the transaction would make it take
// PostgreSQL's database-wide notification lock through its commit flush.
func announceAfterCommit(tx *db.Tx, d *db.DB) {
	tx.DeferNotifications(d.Schema() + ".changes")
}

// announceScope makes the transaction's announcement after COMMIT also name scope on
// "<schema>.pillars" (db.Tx.Announce), so the other replicas' render caches drop it as soon
// as the announcement arrives, without waiting for their change pollers to read the change
// row (which names it too, and is what counts if the announcement is lost). Nothing when
// scope is nil.
func announceScope(tx *db.Tx, scope *string) {
	if scope != nil {
		tx.Announce(tx.Schema()+".pillars", *scope)
	}
}

// renderScope is the render_scope of a change's row: the cached renders (package pillar) a
// change of obj from prev (nil: created; obj nil: prev deleted) can alter, as the statement
// triggers of migrations 0014 and 0016 name them for writers that notify in their
// transaction — a node's labels or spec (its org is in its spec) → node:<name>, an org's
// or a group's spec → org:<org>, a creation or a deletion of either likewise — or nil when
// no render can change (objects of user kinds, annotations, a group's status).
func renderScope(obj, prev *api.Object) *string {
	o := obj
	if o == nil {
		o = prev
	}
	scope := Ref{Kind: o.Kind, Org: o.Metadata.Org, Name: o.Metadata.Name}.renderScope()
	if scope == "" {
		return nil
	}
	// A node's labels are compared first: they are what most writes change, and comparing
	// specs decodes both when their bytes differ.
	if obj != nil && prev != nil && (o.Kind != KindNode || maps.Equal(obj.Metadata.Labels, prev.Metadata.Labels)) &&
		sameJSON(obj.Spec, prev.Spec) {
		return nil
	}
	return &scope
}

// renderScope is the cache scope of the renders an object named r can alter: node:<name>
// for a node, org:<name> for an org and org:<org> for a group (every node of the org), ""
// for objects of other kinds, which no render reads.
func (r Ref) renderScope() string {
	switch r.Kind {
	case KindNode:
		return "node:" + r.Name
	case KindOrg:
		return "org:" + r.Name
	case KindGroup:
		return "org:" + r.Org
	}
	return ""
}

// sameJSON reports whether a and b are the same JSON value (a spec as sent and as jsonb gave
// it back differ in spacing and key order).
func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var va, vb any
	decA, decB := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	decA.UseNumber()
	decB.UseNumber()
	if decA.Decode(&va) != nil || decB.Decode(&vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// inTxWarning runs fn in a transaction and passes the warnings its writes gave to ctx's
// collector only when it commits: a write that fails (or is retried) warns about nothing.
func inTxWarning(ctx context.Context, d *db.DB, fn func(ctx context.Context, tx *db.Tx) error) error {
	wctx, take := CollectWarnings(ctx)
	err := d.InTx(wctx, func(tx *db.Tx) error {
		announceAfterCommit(tx, d)
		return fn(wctx, tx)
	})
	if err == nil {
		addWarnings(ctx, take())
	}
	return err
}

// createTx inserts a normalized object in tx, writes it as stored into *out (stampObject:
// with stampAtCommit, its version and timestamps arrive with the COMMIT) and returns its row id.
func createTx(ctx context.Context, tx *db.Tx, k *Kind, ref Ref, obj api.Object, out *api.Object, mode stampMode) (int64, error) {
	if k.Scope == ScopeOrg {
		if _, err := LockOrg(ctx, tx, ref.Org); err != nil {
			return 0, err
		}
	}
	if err := checkReferences(ctx, k, obj, nil); err != nil {
		return 0, err
	}
	obj.Status = nil // the server's to write (a kind's Prepare may set it)
	if obj.Metadata.UID != "" {
		return 0, fault.Invalid("/metadata/uid", "uid is the server's: a new object gets one, a create cannot set it")
	}
	if k.Prepare != nil {
		if err := k.Prepare(ctx, tx, &obj, nil); err != nil {
			return 0, err
		}
	}
	if err := admit(ctx, tx, k, &obj, nil); err != nil {
		return 0, err
	}
	var id int64
	err := tx.QueryRow(ctx, q.Get("ResourceInsert"), ref.Kind, ref.Org, ref.Name).Scan(&id)
	if errors.Is(err, db.ErrConflict) {
		return 0, fault.Conflict("%s %q already exists", ref.Kind, ref.Name)
	}
	if err != nil {
		return 0, err
	}
	if err := stampObject(ctx, tx, id, "ADDED", obj, nil, "", out, mode); err != nil {
		return 0, err
	}
	if k.AfterWrite != nil {
		if err := k.AfterWrite(ctx, tx, id, *out, nil); err != nil {
			return 0, err
		}
	}
	return id, nil
}

// LockOrg locks the org called name FOR SHARE until the transaction ends and returns its row
// id; 404 when there is no such org. Writers of things inside an org take it, so that a
// concurrent org deletion (which takes FOR UPDATE) waits for them or they see it gone.
func LockOrg(ctx context.Context, tx *db.Tx, name string) (int64, error) {
	var id int64
	err := tx.QueryRow(ctx, q.Get("OrgLockShare"), KindOrg, name).Scan(&id)
	if errors.Is(err, db.ErrNotFound) {
		return 0, fault.NotFound("org %q not found", fault.Truncate(name, 80))
	}
	return id, err
}

// writeAndStamp writes obj's spec, labels and annotations to row id and records the change,
// returning obj as stored (resourceVersion and timestamps set). Only what differs from prev
// (nil on create) is written: one upsert for the keys that are new or changed, one delete for
// the keys that went. The keys are sorted (metadata.Split), and the caller holds the row lock,
// so writers of one resource queue on that lock instead of deadlocking on key rows, and the
// per-resource caps that normalize checked on the whole new set still hold at commit.
func writeAndStamp(ctx context.Context, tx *db.Tx, id int64, changeType string, obj api.Object, prev *api.Object, orgMember string) (api.Object, error) {
	var out api.Object
	err := stampObject(ctx, tx, id, changeType, obj, prev, orgMember, &out, stampNow)
	return out, err
}

// stampMode says when a write's statements go out and what its stamp checks (stampObject).
type stampMode int

const (
	// stampNow sends the statements at once; a version a reader settled first is drawn
	// again inside the transaction, as a transaction the writer does not own needs.
	stampNow stampMode = iota
	// stampAtCommit holds them for the COMMIT's round trip (db.Tx.SendWithCommit); a taken
	// version fails the transaction (versionTaken) and the caller runs it again.
	stampAtCommit
	// stampIfUnchanged is stampAtCommit for a write computed from an unlocked read (prev
	// from the list index), in a transaction that has sent nothing yet: the stamp goes first
	// and updates the row only while it still carries prev's version
	// (ResourceStampIfUnchanged), taking the row lock before any key row, as the locked path
	// does; otherwise it, and everything behind it, writes nothing, and *out gets no
	// resourceVersion.
	stampIfUnchanged
)

// stampObject is writeAndStamp writing into *out, its statements sent as mode says. With
// stampAtCommit or stampIfUnchanged, in a transaction its caller commits (db.Tx.Owned), *out
// gets its resourceVersion and timestamps only when their results arrive: at COMMIT, or in
// front of the next statement the transaction sends.
func stampObject(ctx context.Context, tx *db.Tx, id int64, changeType string, obj api.Object, prev *api.Object, orgMember string, out *api.Object, mode stampMode) error {
	var oldLabels, oldAnnos map[string]string
	if prev != nil {
		oldLabels, oldAnnos = prev.Metadata.Labels, prev.Metadata.Annotations
	}
	// The writes and the stamp go out in one round trip (db.Pipeline): none needs another's
	// result, and the stamp, which draws the version, runs last — or first, with
	// stampIfUnchanged, whose stamp may write nothing: the statements behind it then write
	// nothing either (afterWrite, queries.sql), which holds only when the stamp is the
	// transaction's first write, so the transaction must not have sent anything yet.
	ifUnchanged := mode == stampIfUnchanged
	if ifUnchanged && (!tx.Owned() || tx.Sent() || prev == nil) {
		return errStaleBase
	}
	var steps []db.Step
	for _, m := range []struct {
		upsert, del string
		old, new    map[string]string
	}{
		{"LabelsUpsert", "LabelsDelete", oldLabels, obj.Metadata.Labels},
		{"AnnotationsUpsert", "AnnotationsDelete", oldAnnos, obj.Metadata.Annotations},
	} {
		set, gone := metadata.Diff(m.old, m.new)
		if len(set) > 0 {
			p, n, v := metadata.Split(set)
			steps = append(steps, db.Step{Query: q.Get(m.upsert), Args: []any{id, p, n, v, ifUnchanged}})
		}
		if len(gone) > 0 {
			p, n, _ := metadata.Split(gone)
			steps = append(steps, db.Step{Query: q.Get(m.del), Args: []any{id, p, n, ifUnchanged}})
		}
	}
	obj.Metadata.ResourceVersion = ""
	obj.Metadata.CreatedAt, obj.Metadata.UpdatedAt = nil, nil
	obj.Metadata.UID = uidOf(id)
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var schemaRev *int
	if obj.Metadata.SchemaRevision > 0 {
		schemaRev = &obj.Metadata.SchemaRevision
	}
	// The labels before the change go into the change row (NULL on create), so a selector
	// watch can tell an object that stopped matching from one that still matches.
	var prevLabels []byte
	if prev != nil {
		if prevLabels, err = json.Marshal(nonNilLabels(oldLabels)); err != nil {
			return err
		}
	}
	// The org before the change likewise, so an org watch (?org=) can tell a node that moved
	// out of its org from one that changed elsewhere.
	var prevOrg *string
	if prev != nil && orgMember != "" {
		o := SpecString(*prev, orgMember)
		prevOrg = &o
	}
	var status []byte // NULL, not JSON null, when the object has none
	if len(obj.Status) > 0 {
		status = obj.Status
	}
	who := writer(ctx)
	scope := renderScope(&obj, prev)
	announceScope(tx, scope)
	stampArgs := []any{id, changeType, body, []byte(obj.Spec), schemaRev, prevLabels, status, who.Actor, who.RemoteAddr, who.RequestID, prevOrg, scope}
	*out = obj
	taken := false
	stamped := func(rv int64, created, updated time.Time) {
		out.Metadata.ResourceVersion = strconv.FormatInt(rv, 10)
		created, updated = created.UTC(), updated.UTC()
		out.Metadata.CreatedAt, out.Metadata.UpdatedAt = &created, &updated
	}
	if ifUnchanged {
		prevRV, err := strconv.ParseInt(prev.Metadata.ResourceVersion, 10, 64)
		if err != nil {
			return fmt.Errorf("the object read has no resourceVersion: %w", err)
		}
		stampArgs = append(stampArgs, prevRV)
	}
	atCommit := mode != stampNow && tx.Owned()
	stamp := "ResourceStamp"
	switch {
	case ifUnchanged:
		stamp = "ResourceStampIfUnchanged"
	case atCommit:
		stamp = "ResourceStampAtCommit"
	}
	stampStep := db.Step{Query: q.Get(stamp), Args: stampArgs,
		Scan: func(r db.Row) error {
			var (
				rv               int64
				created, updated time.Time
				wrote            string // ResourceStampIfUnchanged's set_config
			)
			dest := []any{&rv, &created, &updated}
			if ifUnchanged {
				dest = append(dest, &wrote)
			}
			err := r.Scan(dest...)
			if errors.Is(err, db.ErrNotFound) && ifUnchanged {
				return nil // overtaken: nothing written, out keeps no resourceVersion
			}
			if errors.Is(err, db.ErrNotFound) {
				taken = true // a reader settled the drawn number first: draw again below
				return nil
			}
			if err == nil {
				stamped(rv, created, updated)
			}
			return err
		}}
	if ifUnchanged {
		steps = append([]db.Step{stampStep}, steps...)
	} else {
		steps = append(steps, stampStep)
	}
	action := "object.update"
	if changeType == "ADDED" {
		action = "object.create"
	}
	if !renaming(ctx) {
		rec, err := auth.AuditStep(ctx, auth.AuditEntry{Actor: who.Actor, Action: action, Target: objectTarget(obj), OnlyIfWrote: ifUnchanged})
		if err != nil {
			return err
		}
		steps = append(steps, rec)
	}
	if atCommit {
		return tx.SendWithCommit(ctx, steps...)
	}
	if err := tx.Pipeline(ctx, steps...); err != nil {
		return fmt.Errorf("write and stamp: %w", err)
	}
	for try := 0; taken; try++ {
		if try == maxStampTries {
			return errVersionsTaken
		}
		var (
			rv               int64
			created, updated time.Time
		)
		err := tx.QueryRow(ctx, q.Get("ResourceStamp"), stampArgs...).Scan(&rv, &created, &updated)
		if taken = errors.Is(err, db.ErrNotFound); !taken && err != nil {
			return fmt.Errorf("stamp: %w", err)
		}
		if !taken {
			stamped(rv, created, updated)
		}
	}
	return nil
}

// errVersionsTaken is the answer to a write that drew maxStampTries versions a reader had
// settled first.
var errVersionsTaken = fault.New(fault.KindUnavailable, "could not draw a resourceVersion in %d tries; retry the write", maxStampTries)

// versionTaken reports whether err is a write's transaction failing because its stamp, sent
// with COMMIT (ResourceStampAtCommit), drew a version a reader had settled first: the change
// row's insert met the reader's GAP row. Nothing of the write committed; it runs again.
func versionTaken(err error) bool {
	return errors.Is(err, db.ErrConflict) && db.ConstraintOf(err) == "changes_pkey"
}

// againIfTaken runs write, a whole write transaction whose stamp goes out with its COMMIT,
// again while it fails only because its version was taken (versionTaken), at most
// maxStampTries times.
func againIfTaken(write func() error) error {
	for range maxStampTries {
		if err := write(); !versionTaken(err) {
			return err
		}
	}
	return errVersionsTaken
}

// Get reads one object.
func (s *Service) Get(ctx context.Context, ref Ref) (api.Object, error) {
	if _, err := s.kindOf(ctx, ref); err != nil {
		return api.Object{}, err
	}
	obj, err := scanObject(ref.Kind, s.db.QueryRow(ctx, q.Get("ResourceGet"), ref.Kind, ref.Org, ref.Name))
	if errors.Is(err, db.ErrNotFound) {
		return api.Object{}, notFound(ref)
	}
	if err == nil {
		s.presentObject(ctx, s.db, &obj)
	}
	return obj, err
}

func notFound(ref Ref) error {
	if ref.Org != "" {
		return fault.NotFound("%s %q not found in org %q", ref.Kind, fault.Truncate(ref.Name, 80), fault.Truncate(ref.Org, 80))
	}
	return fault.NotFound("%s %q not found", ref.Kind, fault.Truncate(ref.Name, 80))
}

func scanObject(kind string, row db.Row, extra ...any) (api.Object, error) {
	var (
		obj                         api.Object
		spec, labels, annos, status []byte
		rv, id                      int64
		created, updated            time.Time
	)
	dest := append([]any{&obj.Metadata.Name, &obj.Metadata.Org, &spec, &rv, &created, &updated, &labels, &annos, &obj.Metadata.SchemaRevision, &status, &id}, extra...)
	if err := row.Scan(dest...); err != nil {
		return api.Object{}, err
	}
	obj.Kind = kind
	obj.Spec = spec
	obj.Metadata.UID = uidOf(id)
	if status != nil {
		obj.Status = status
	}
	obj.Metadata.ResourceVersion = strconv.FormatInt(rv, 10)
	created, updated = created.UTC(), updated.UTC()
	obj.Metadata.CreatedAt, obj.Metadata.UpdatedAt = &created, &updated
	if err := json.Unmarshal(labels, &obj.Metadata.Labels); err != nil {
		return api.Object{}, err
	}
	if err := json.Unmarshal(annos, &obj.Metadata.Annotations); err != nil {
		return api.Object{}, err
	}
	return obj, nil
}

// ListOptions page through a list.
type ListOptions struct {
	Limit int
	// After is the last name of the previous page ("" for the first page). The caller gets
	// it from an opaque continue token (auth.OpenCursor); names never reach clients here.
	After string
	// Filter restricts the list to the names the caller may see. It is applied in the
	// query, so every page holds only visible rows.
	Filter auth.Filter
	// Selector keeps the objects whose labels it matches; the zero Selector keeps all.
	Selector metadata.Selector
	// InOrg keeps the objects of a global kind whose org reference (Kind.OrgMember: a node's
	// spec.org) names this org; "" keeps all. A kind without an org reference refuses it.
	InOrg string

	orgMember string // the kind's OrgMember, set by List and ListSnapshot
}

// withOrgMember checks opts.InOrg against kind k and returns opts carrying k's org member.
func withOrgMember(k *Kind, opts ListOptions) (ListOptions, error) {
	if opts.InOrg != "" && k.OrgMember == "" {
		return opts, fault.Invalid("org", "%s objects belong to no org: list them without org", k.Name)
	}
	opts.orgMember = k.OrgMember
	return opts, nil
}

// List returns a page of the objects of kind in org that opts.Filter and opts.Selector let
// through, ordered by name (bytewise), and the page's last name when more follow ("" otherwise).
//
// With a list index (Hub.ServeLists) the page comes from memory once the index has applied
// the database's current version (index.go); the database answers when it cannot, as below,
// with the same pages, order and resourceVersion semantics.
//
// The page and its resourceVersion are read in one REPEATABLE READ snapshot (db.ReadTx): the
// version is the newest change that snapshot sees, so a watch started from it receives
// exactly the changes the items do not reflect. Read in two statements under READ COMMITTED,
// a write committing in between could make the version cover a change the items lack, and
// the watch would never send it.
func (s *Service) List(ctx context.Context, kind, org string, opts ListOptions) (out api.ObjectList, last string, err error) {
	out = api.ObjectList{Items: []api.Object{}}
	k, err := s.kindOf(ctx, Ref{Kind: kind, Org: org})
	if err != nil {
		return out, "", err
	}
	if opts, err = withOrgMember(k, opts); err != nil {
		return out, "", err
	}
	if s.index != nil {
		l, last, ok, err := s.index.list(ctx, kind, org, opts)
		if err != nil {
			return out, "", err
		}
		if ok {
			for i := range l.Items {
				s.presentObject(ctx, s.db, &l.Items[i])
			}
			return l, last, nil
		}
	}
	floor := s.resolved.Load() // before the snapshot: versions through it are visible in it
	var gaps []int64
	err = s.db.ReadTx(ctx, func(tx *db.Tx) error {
		if out, last, err = s.listTx(ctx, tx, kind, org, opts); err != nil {
			return err
		}
		gaps, err = s.gapsOf(ctx, tx, floor, listVersion(out))
		return err
	})
	if err == nil && len(gaps) > 0 {
		out.Items, last, err = s.settleList(ctx, kind, org, opts, pageLimit(opts), out.Items, last, gaps)
	}
	if err != nil {
		return api.ObjectList{Items: []api.Object{}}, "", err
	}
	s.noteResolved(listVersion(out))
	for i := range out.Items {
		s.presentObject(ctx, s.db, &out.Items[i])
	}
	return out, last, nil
}

// listTx reads one page of List in tx.
func (s *Service) listTx(ctx context.Context, tx *db.Tx, kind, org string, opts ListOptions) (api.ObjectList, string, error) {
	out := api.ObjectList{Items: []api.Object{}}
	limit := pageLimit(opts)
	rv, ids, err := s.drive(ctx, tx, opts.Selector)
	if err != nil {
		return out, "", err
	}
	out.ResourceVersion = strconv.FormatInt(rv, 10)
	f := opts.Filter
	var rows db.Rows
	switch {
	case ids == nil:
		query, selArgs := withSelector(q.Get("ResourceList"), opts.Selector, 10, false)
		rows, err = tx.Query(ctx, query, append([]any{kind, org, opts.After, limit + 1, f.All, f.Names, f.Prefixes, opts.InOrg, opts.orgMember}, selArgs...)...)
	case len(ids) == 0:
		return out, "", nil // a requirement no object meets
	default:
		// Read the few objects by primary key and sort them, instead of walking names.
		query, selArgs := withSelector(q.Get("ResourceList"), opts.Selector, 10, true)
		rows, err = tx.Query(ctx, query, append([]any{kind, org, opts.After, limit + 1, f.All, f.Names, f.Prefixes, opts.InOrg, opts.orgMember, ids}, selArgs...)...)
	}
	if err != nil {
		return out, "", err
	}
	defer rows.Close()
	for rows.Next() {
		obj, err := scanObject(kind, rows)
		if err != nil {
			return out, "", err
		}
		out.Items = append(out.Items, obj)
	}
	if err := rows.Err(); err != nil {
		return out, "", err
	}
	if len(out.Items) > limit {
		out.Items = out.Items[:limit]
		return out, out.Items[limit-1].Metadata.Name, nil
	}
	return out, "", nil
}

// pageLimit is the size of a page of List.
func pageLimit(opts ListOptions) int {
	if opts.Limit <= 0 || opts.Limit > MaxListLimit {
		return MaxListLimit
	}
	return opts.Limit
}

// DefaultDriveLimit is how many objects a selector's most selective positive requirement
// may name for a list to start from them (ResourceList with the ids condition) rather than walk the kind in
// name order (ResourceList).
const DefaultDriveLimit = 2000

// drive reads the list's resourceVersion and decides how a list with selector sel runs. In
// the same statement it counts, for each positive requirement (in, exists), the objects that
// meet it, up to DriveLimit+1 (an index-only range of labels_selector each). nil ids means
// "walk": there is no positive requirement, or every one is common, so a page fills quickly in
// name order. An empty, non-nil slice means a requirement no object meets: the list is empty,
// answered without reading a single object. Otherwise it returns the ids of the objects that
// meet the most selective requirement, which the list reads by primary key and sorts. The
// planner cannot make this choice itself: a prepared statement's generic plan serves every
// selector alike, and at a million objects even custom plans walked half a million names for
// selectors that matched nothing (docs/benchmarks.md).
func (s *Service) drive(ctx context.Context, tx *db.Tx, sel metadata.Selector) (int64, []int64, error) {
	limit := s.DriveLimit
	query, args, positives := withCounts(q.Get("SelectorCounts"), sel, limit+1)
	var (
		rv     int64
		counts []int64
	)
	if err := tx.QueryRow(ctx, query, args...).Scan(&rv, &counts); err != nil {
		return 0, nil, err
	}
	best := -1
	for i, n := range counts {
		if n == 0 {
			return rv, []int64{}, nil
		}
		if n <= int64(limit) && (best < 0 || n < counts[best]) {
			best = i
		}
	}
	if best < 0 || limit <= 0 {
		return rv, nil, nil
	}
	r := positives[best]
	var rows db.Rows
	var err error
	if r.Op == metadata.OpIn {
		rows, err = tx.Query(ctx, q.Get("LabelProbeIn"), r.Prefix, r.Name, r.Values, limit+1)
	} else {
		rows, err = tx.Query(ctx, q.Get("LabelProbeExists"), r.Prefix, r.Name, limit+1)
	}
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	ids := []int64{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return 0, nil, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return 0, nil, err
	}
	if len(ids) == 0 || len(ids) > limit {
		// Changed since the count: walking is always correct.
		return rv, nil, nil
	}
	return rv, ids, nil
}

// lockForWrite locks the stored row, reads the object as stored and checks the caller's
// expected resourceVersion ("" = no precondition). A write that will read its kind's schema
// (replace, patch, apply) passes its kind, whose key (k's HoldSteps) is taken first, in
// the same pipeline as the locked read, which is also the transaction's first round trip
// (BEGIN goes with it): its transaction opens, holds its kind and locks and reads its row in
// one round trip. Writes that do not read the schema (delete, rename) pass nil.
func lockForWrite(ctx context.Context, tx *db.Tx, k *Kind, ref Ref, expected string) (int64, api.Object, error) {
	// One statement locks the row and reads the object. Under READ COMMITTED a statement
	// that waited for the row lock sees the locked row's newest version, but its subqueries
	// (labels, annotations) still see the snapshot from before the wait; every write stamps
	// resource_version, so when the version the snapshot saw differs from the locked row's,
	// the object changed during the wait and is read again in a statement of its own.
	var (
		id      int64
		seenRV  int64
		kind    string
		cur     api.Object
		missing bool
		steps   []db.Step
		held    = func() error { return nil }
	)
	if k != nil && k.HoldSteps != nil {
		steps, held = k.HoldSteps(tx)
	}
	steps = append(steps, db.Step{Query: q.Get("ResourceLockAndGet"), Args: []any{ref.Kind, ref.Org, ref.Name}, Scan: func(r db.Row) error {
		var err error
		cur, err = scanObject(ref.Kind, r, &id, &kind, &seenRV)
		if errors.Is(err, db.ErrNotFound) {
			missing = true
			return nil
		}
		return err
	}})
	if err := tx.Pipeline(ctx, steps...); err != nil {
		return 0, api.Object{}, err
	}
	if err := held(); err != nil {
		return 0, api.Object{}, err
	}
	if missing {
		return 0, api.Object{}, notFound(ref)
	}
	if strconv.FormatInt(seenRV, 10) != cur.Metadata.ResourceVersion {
		objs, err := getByID(ctx, tx, []int64{id})
		if err != nil {
			return 0, api.Object{}, err
		}
		if len(objs) != 1 {
			return 0, api.Object{}, fmt.Errorf("locked %s %q (id %d) but could not read it", ref.Kind, ref.Name, id)
		}
		cur = objs[0].obj
	}
	if expected != "" {
		if n, err := strconv.ParseInt(expected, 10, 64); err != nil || n < 1 {
			return 0, cur, fault.Invalid("/metadata/resourceVersion", "resourceVersion must be a resourceVersion this server issued (a positive decimal integer), not %q", fault.Truncate(expected, 40))
		}
	}
	if expected != "" && expected != cur.Metadata.ResourceVersion && !sabotage.Active("precondition") {
		return 0, cur, fault.Conflict("%s %q has been modified: resourceVersion is %s, the request expected %s; read it again and retry", ref.Kind, ref.Name, cur.Metadata.ResourceVersion, fault.Truncate(expected, 40))
	}
	return id, cur, nil
}

// stored is an object read with its row id.
type stored struct {
	id  int64
	obj api.Object
}

// getByID reads the objects with the given row ids (groups first, then nodes, each by name).
func getByID(ctx context.Context, tx *db.Tx, ids []int64) ([]stored, error) {
	rows, err := tx.Query(ctx, q.Get("ResourceGetByID"), ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []stored
	for rows.Next() {
		var (
			st   stored
			kind string
		)
		o, err := scanObject("", rows, &st.id, &kind)
		if err != nil {
			return nil, err
		}
		o.Kind = kind
		st.obj = o
		out = append(out, st)
	}
	return out, rows.Err()
}

// update runs one replace or patch: compute the new object from the stored one, let the kind
// check it, write the difference and stamp the change.
//
// When the replica's list index holds the object, the write starts from that copy without
// reading the database, and everything — the kind's key, the stamp, the labels, the audit
// record — goes out with the COMMIT in one round trip; the stamp writes only while the row
// still carries the copy's version (updateFromIndex). Otherwise, or when the copy was
// overtaken, the row is locked and read first, and the write, its stamp and its audit
// record go out with the COMMIT (stampAtCommit): two round trips.
func (s *Service) update(ctx context.Context, ref Ref, expected string, next func(cur api.Object) (api.Object, error)) (api.Object, error) {
	k, err := s.kindOf(ctx, ref)
	if err != nil {
		return api.Object{}, err
	}
	var out api.Object
	defer s.wrote(ref)
	defer func() {
		if err == nil && s.index != nil {
			s.index.wrote(out)
		}
	}()
	err = againIfTaken(func() error {
		if base, ok := s.indexedBase(ref, expected); ok {
			err := s.updateFromIndex(ctx, k, ref, base, next, &out)
			if !errors.Is(err, errStaleBase) && !errors.Is(err, db.ErrStale) {
				if err == nil {
					s.index.basedWrites.Add(1)
				}
				return err
			}
			s.index.staleBases.Add(1)
			s.index.deleted(ref) // what this replica wrote last, if it was the base, is old too
			out = api.Object{}
		}
		return inTxWarning(ctx, s.db, func(ctx context.Context, tx *db.Tx) error {
			id, cur, err := lockForWrite(ctx, tx, k, ref, expected)
			if err != nil {
				return err
			}
			obj, err := nextObject(ctx, tx, k, ref, cur, next)
			if err != nil {
				return err
			}
			return updateTx(ctx, tx, k, id, cur, obj, &out, stampAtCommit)
		})
	})
	return out, err
}

// errStaleBase stops a write from the list index's copy (updateFromIndex) before its COMMIT:
// the locked path writes instead.
var errStaleBase = errors.New("the write cannot start from the list index's copy")

// indexedBase returns the list index's copy of ref's object as the base of an update, when
// the index holds one that can be (an expected resourceVersion other than the copy's leaves
// the answer, 409 or not, to the locked read).
func (s *Service) indexedBase(ref Ref, expected string) (api.Object, bool) {
	if s.index == nil {
		return api.Object{}, false
	}
	base, ok := s.index.object(ref.Kind, ref.Org, ref.Name)
	if !ok || (expected != "" && expected != base.Metadata.ResourceVersion) {
		return api.Object{}, false
	}
	return base, true
}

// updateFromIndex is update from base, the list index's copy of the object, which may be
// behind the database: the kind's key and revision check (Kind.HoldCached), the stamp, the
// labels, the audit record and COMMIT go out in one round trip, the stamp first, and the
// stamp writes only while the row still carries base's version (stampIfUnchanged), holding
// the row lock to COMMIT from there, so the write applies to exactly the object it was
// computed from, as under the locked read; when the row has moved on, the stamp and
// everything behind it write nothing and the COMMIT commits nothing, without an error. It
// returns errStaleBase or db.ErrStale, with nothing written, when the locked path has to
// decide instead: the copy (or the remembered revision: db.ErrStale) was overtaken, the
// write would change nothing (which only the current object can tell), or anything failed
// before the COMMIT (the answer, an error too, must come from the current object). A COMMIT
// that failed otherwise is the answer, as it may have committed.
func (s *Service) updateFromIndex(ctx context.Context, k *Kind, ref Ref, base api.Object, next func(cur api.Object) (api.Object, error), out *api.Object) error {
	id, ok := idOfUID(base.Metadata.UID)
	if !ok {
		return errStaleBase
	}
	base.Metadata.Labels, base.Metadata.Annotations = maps.Clone(base.Metadata.Labels), maps.Clone(base.Metadata.Annotations)
	// A stamped write has a version above base's; an overtaken stamp leaves out without
	// one, and a write that turned out to change nothing (after the kind's defaults) answers
	// base's, which only the locked read can confirm.
	stamped := func() bool {
		return out.Metadata.ResourceVersion != "" && out.Metadata.ResourceVersion != base.Metadata.ResourceVersion
	}
	// As inTxWarning, but the warnings are the caller's only once the stamp is known to have
	// written: the locked path that follows an overtaken copy gives its own.
	wctx, take := CollectWarnings(ctx)
	err := s.db.InTx(wctx, func(tx *db.Tx) error {
		announceAfterCommit(tx, s.db)
		if !tx.Owned() {
			return errStaleBase
		}
		if err := s.writeFromBase(wctx, tx, k, ref, id, base, next, out); err != nil {
			return fmt.Errorf("%w: %w", errStaleBase, err)
		}
		if !tx.Holding() && !stamped() {
			// A statement of the kind's (AfterWrite) carried the stamp, which wrote nothing:
			// roll back what that statement did.
			return errStaleBase
		}
		return nil
	})
	if err == nil && !stamped() {
		return errStaleBase // committed nothing
	}
	if err == nil {
		addWarnings(ctx, take())
	}
	return err
}

// writeFromBase is the body of updateFromIndex's transaction.
func (s *Service) writeFromBase(ctx context.Context, tx *db.Tx, k *Kind, ref Ref, id int64, cur api.Object, next func(cur api.Object) (api.Object, error), out *api.Object) error {
	if k.HoldCached != nil {
		hold, ok := k.HoldCached(tx)
		if !ok {
			return errStaleBase
		}
		if err := tx.SendWithCommit(ctx, hold...); err != nil {
			return err
		}
	}
	obj, err := nextObject(ctx, tx, k, ref, cur, next)
	if err != nil {
		return err
	}
	if sameObject(cur, obj) {
		return errStaleBase // a write that changes nothing answers the current object
	}
	mode := stampIfUnchanged
	if s.trustStaleBases || sabotage.Active("stalebase") {
		mode = stampAtCommit
	}
	return updateTx(ctx, tx, k, id, cur, obj, out, mode)
}

// nextObject computes an update's object from cur, the stored object, and normalizes it. The
// request applies to the object as clients read it (aliases mapped, tombstoned fields
// hidden, defaults filled in), as Kubernetes applies a patch to the defaulted object, so a
// patch never trips over a field its sender cannot see.
func nextObject(ctx context.Context, tx *db.Tx, k *Kind, ref Ref, cur api.Object, next func(cur api.Object) (api.Object, error)) (api.Object, error) {
	shown := cur
	if k.Present != nil {
		shown.Spec = k.Present(ctx, tx, cur.Spec)
	}
	obj, err := next(shown)
	if err != nil {
		return api.Object{}, err
	}
	obj.Metadata.ResourceVersion = ""
	if err := normalize(k, ref, &obj); err != nil {
		return api.Object{}, err
	}
	return obj, nil
}

// idOfUID is uidOf's inverse.
func idOfUID(uid string) (int64, bool) {
	if !strings.HasPrefix(uid, "u") {
		return 0, false
	}
	id, err := strconv.ParseInt(uid[1:], 36, 64)
	return id, err == nil && id > 0
}

// updateTx writes a normalized obj over cur, the stored object whose row (id) tx has locked
// (or, with stampIfUnchanged, the copy the stamp checks), into *out (stampObject: with
// stampAtCommit and stampIfUnchanged, its version and timestamps arrive with the COMMIT).
func updateTx(ctx context.Context, tx *db.Tx, k *Kind, id int64, cur, obj api.Object, out *api.Object, mode stampMode) error {
	obj.Status = cur.Status // the server's to write: a status sent with a write is ignored
	if obj.Metadata.UID != "" && obj.Metadata.UID != cur.Metadata.UID {
		return fault.Invalid("/metadata/uid", "uid %q is not this object's (%s): it cannot be changed", fault.Truncate(obj.Metadata.UID, 40), cur.Metadata.UID)
	}
	if err := checkReferences(ctx, k, obj, &cur); err != nil {
		return err
	}
	if k.Prepare != nil {
		if err := k.Prepare(ctx, tx, &obj, &cur); err != nil {
			return err
		}
	}
	if err := admit(ctx, tx, k, &obj, &cur); err != nil {
		return err
	}
	if sameObject(cur, obj) {
		// Nothing would change: as Kubernetes does, answer the stored object without a
		// write, so no new resourceVersion, no change event for watchers and no render
		// invalidation. Compared with what is stored, after defaults and normalization, so
		// a write that would persist a new default or drop tombstoned data still writes.
		*out = cur
		return nil
	}
	if err := stampObject(ctx, tx, id, "MODIFIED", obj, &cur, k.OrgMember, out, mode); err != nil {
		return err
	}
	out.Metadata.CreatedAt = cur.Metadata.CreatedAt
	if k.AfterWrite != nil {
		if err := k.AfterWrite(ctx, tx, id, *out, &cur); err != nil {
			return err
		}
	}
	return nil
}

// Replace overwrites an existing object (PUT): spec, labels and annotations all become the
// request's. A non-empty metadata.resourceVersion must match the stored one (409
// otherwise); one that is not a number is a 400.
func (s *Service) Replace(ctx context.Context, ref Ref, obj api.Object) (api.Object, error) {
	return s.update(ctx, ref, obj.Metadata.ResourceVersion, func(api.Object) (api.Object, error) { return obj, nil })
}

// Patch applies an RFC 7396 JSON merge patch to the object's metadata (labels,
// annotations) and spec, under the row lock, so concurrent patches compose instead of
// overwriting each other. A resourceVersion in the patch is a precondition.
func (s *Service) Patch(ctx context.Context, ref Ref, patch []byte) (api.Object, error) {
	members, err := checkPatchMembers(patch)
	if err != nil {
		return api.Object{}, err
	}
	if meta, ok := parseMetadataPatch(members); ok {
		return s.update(ctx, ref, meta.resourceVersion, func(cur api.Object) (api.Object, error) {
			return meta.apply(cur), nil
		})
	}
	var pre struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(patch, &pre); err != nil {
		return api.Object{}, fault.Invalid("/metadata", "the merge patch's metadata must be an object: %v", err)
	}
	return s.update(ctx, ref, pre.Metadata.ResourceVersion, func(cur api.Object) (api.Object, error) {
		return mergePatchObject(cur, patch)
	})
}

// mergePatchObject applies a merge patch to what a client may write of cur (kind, name, org,
// labels, annotations, spec) through its JSON document: the general case of Patch.
func mergePatchObject(cur api.Object, patch []byte) (api.Object, error) {
	doc, err := json.Marshal(map[string]any{
		"kind":     cur.Kind,
		"metadata": map[string]any{"name": cur.Metadata.Name, "org": cur.Metadata.Org, "labels": cur.Metadata.Labels, "annotations": cur.Metadata.Annotations},
		"spec":     cur.Spec,
	})
	if err != nil {
		return cur, err
	}
	merged, err := MergePatch(doc, patch)
	if fault.KindOf(err) == fault.KindUnprocessable {
		return cur, err // too deep: the 422 names the pointer
	}
	if err != nil {
		return cur, fault.Invalid("", "%v", err)
	}
	var next api.Object
	if err := json.NewDecoder(bytesReader(merged)).Decode(&next); err != nil {
		return cur, fault.Invalid("/metadata", "the patched object is not valid: %v", err)
	}
	return next, nil
}

// Delete removes an object (its labels and annotations cascade). A non-empty expected
// resourceVersion is a precondition; cascade lets the kind remove what depends on the object
// (an org's nodes and groups) instead of refusing with 409. A delete is an identity move:
// the writer needs the scopes of the references the object holds (checkHeld: orgs:attach on
// a node's org), checked on the locked row.
func (s *Service) Delete(ctx context.Context, ref Ref, expected string, cascade bool) error {
	k, err := s.kindOf(ctx, ref)
	if err != nil {
		return err
	}
	defer s.wrote(ref)
	if s.index != nil {
		defer s.index.deleted(ref)
	}
	return againIfTaken(func() error {
		return s.writeTx(ctx, func(tx *db.Tx) error {
			id, last, err := lockForWrite(ctx, tx, nil, ref, expected)
			if err != nil {
				return err
			}
			if err := checkHeld(ctx, k, last, "deleting"); err != nil {
				return err
			}
			if k.BeforeDelete != nil {
				if err := k.BeforeDelete(ctx, s, tx, id, last, cascade); err != nil {
					return err
				}
			}
			return deleteLocked(ctx, tx, id, last, true)
		})
	})
}

// deleteLocked deletes row id, whose row lock the transaction holds, and records the
// deletion with the object as it was last. With atCommit, in a transaction its caller
// commits, the deletion, its audit record and its stamp go out with the COMMIT
// (db.Tx.SendWithCommit), and a version a reader settled first fails the transaction
// (ResourceStampDeletedAtCommit, versionTaken) for the caller to run again, as for an update.
func deleteLocked(ctx context.Context, tx *db.Tx, id int64, last api.Object, atCommit bool) error {
	del := db.Step{Query: q.Get("ResourceDelete"), Args: []any{id}}
	if atCommit && tx.Owned() {
		steps, _, err := deletionSteps(ctx, tx, last, "ResourceStampDeletedAtCommit")
		if err != nil {
			return err
		}
		return tx.SendWithCommit(ctx, append([]db.Step{del}, steps...)...)
	}
	return stampDeleted(ctx, tx, last, del)
}

// stampDeleted records last's deletion in the changes log (and the audit log, unless the
// deletion is the old name's half of a rename), after the statements before (pipelined with
// the audit record), drawing again inside the transaction when a reader settled the number
// it drew.
func stampDeleted(ctx context.Context, tx *db.Tx, last api.Object, before ...db.Step) error {
	steps, stamp, err := deletionSteps(ctx, tx, last, "ResourceStampDeleted")
	if err != nil {
		return err
	}
	if first := append(before, steps[:len(steps)-1]...); len(first) > 0 {
		if err := tx.Pipeline(ctx, first...); err != nil {
			return err
		}
	}
	for range maxStampTries {
		var rv int64
		err := tx.QueryRow(ctx, stamp.Query, stamp.Args...).Scan(&rv)
		if !errors.Is(err, db.ErrNotFound) {
			return err
		}
		// A reader settled the drawn number first: draw again.
	}
	return errVersionsTaken
}

// deletionSteps are the statements that record last's deletion: its audit record (unless
// the deletion is the old name's half of a rename) and, last, its stamp (stampQuery, which
// is also returned alone).
func deletionSteps(ctx context.Context, tx *db.Tx, last api.Object, stampQuery string) ([]db.Step, db.Step, error) {
	last.Metadata.ResourceVersion = ""
	body, err := json.Marshal(last)
	if err != nil {
		return nil, db.Step{}, err
	}
	prevLabels, err := json.Marshal(nonNilLabels(last.Metadata.Labels))
	if err != nil {
		return nil, db.Step{}, err
	}
	who := writer(ctx)
	var steps []db.Step
	if !renaming(ctx) {
		rec, err := auth.AuditStep(ctx, auth.AuditEntry{Actor: who.Actor, Action: "object.delete", Target: objectTarget(last)})
		if err != nil {
			return nil, db.Step{}, err
		}
		steps = append(steps, rec)
	}
	scope := renderScope(nil, &last)
	announceScope(tx, scope)
	stamp := db.Step{Query: q.Get(stampQuery), Args: []any{last.Kind, last.Metadata.Org, last.Metadata.Name, body, prevLabels, who.Actor, who.RemoteAddr, who.RequestID, scope},
		Scan: func(r db.Row) error { var rv int64; return r.Scan(&rv) }}
	return append(steps, stamp), stamp, nil
}

// uidOf is the UID of the object in row id: stable for the row's life (renames keep the
// row), never reused (row ids come from an identity column).
func uidOf(id int64) string { return "u" + strconv.FormatInt(id, 36) }

// writer is who writes in ctx: the request's actor, or "system" for strata's own writes.
func writer(ctx context.Context) auth.AuditActor {
	a := auth.AuditActorFrom(ctx)
	if a.Actor == "" {
		a.Actor = "system"
	}
	return a
}

// objectTarget names an object in the audit log: Kind/org/name, or Kind/name for global
// kinds.
func objectTarget(o api.Object) string {
	if o.Metadata.Org != "" {
		return o.Kind + "/" + o.Metadata.Org + "/" + o.Metadata.Name
	}
	return o.Kind + "/" + o.Metadata.Name
}

// maxStampTries bounds the draws of one stamp. A draw is lost only when a reader settles the
// number in the instant between nextval and the insert of the same statement (versions.go),
// so a second draw practically always succeeds.
const maxStampTries = 10

// nonNilLabels makes absent labels the empty object, so a change row's prev_labels is NULL
// only for creations (and rows older releases wrote).
func nonNilLabels(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
