package resource

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
)

// Scope says where a kind's names are unique: globally (orgs, nodes) or within one org
// (groups, user kinds).
type Scope int

const (
	// ScopeGlobal kinds are stored with org ” and addressed as /v1/<plural>/{name}.
	ScopeGlobal Scope = iota
	// ScopeOrg kinds live inside an org and are addressed as /v1/orgs/{org}/<plural>/{name}.
	ScopeOrg
)

// Kind describes one kind to the generic resource path: the HTTP routes, the authorization,
// the Go client and the CLI are all derived from it, so every kind (built-in or, later,
// user-defined) is created, read, listed, patched and deleted by the same code.
type Kind struct {
	// Name is the kind as it appears in objects ("Node").
	Name string
	// Plural is the path segment and the CLI noun's plural ("nodes").
	Plural string
	// Param is the path parameter naming one object ("node" in /v1/nodes/{node}).
	Param string
	// Scope is ScopeGlobal or ScopeOrg.
	Scope Scope
	// Family is the authorization family scopes name (orgs, nodes, groups). Global kinds
	// are authorized by the object's name, org kinds by their org's name.
	Family string
	// ValidateName checks a name; nil means a DNS label (ValidateName).
	ValidateName func(name string) error
	// Prepare validates and defaults obj.Spec inside the write's transaction (it may read
	// other rows, for example to check that a node's org exists, and lock them so the check
	// still holds at commit). prev is the stored object on replace and patch, nil on create.
	Prepare func(ctx context.Context, tx *db.Tx, obj *api.Object, prev *api.Object) error
	// OrgMember is the spec member that names the org an object of a global kind belongs to
	// ("org" for nodes); "" when its objects belong to no org. Lists and watches of the kind
	// take ?org=ORG and keep the objects whose member names ORG (ListOptions.InOrg, EventIn),
	// so one generic list path serves "the nodes of acme" as it serves any kind.
	OrgMember string
	// References are the spec members that name objects of other kinds, each with the
	// scope a writer needs on the named object when a write sets or changes it (checkReferences).
	References []Reference
	// AfterWrite runs in the same transaction once the row's write is sent or held for the
	// COMMIT (id is its row id; a statement it sends goes out after the write), for
	// consequences such as dropping memberships a move made invalid. obj may lack its new
	// resourceVersion and timestamps: an update's stamp can be answered only with the COMMIT.
	AfterWrite func(ctx context.Context, tx *db.Tx, id int64, obj api.Object, prev *api.Object) error
	// Renamable kinds can be renamed in place (POST …/{name}/rename): everything hanging off
	// the row (labels, annotations, memberships, pillars) follows it. Nodes are, since a
	// node's name is its Salt minion id, and minion ids change.
	Renamable bool
	// BeforeDelete runs in the deleting transaction after the row is locked; cascade is the
	// caller's ?cascade=true. It refuses (409) or removes what depends on the object.
	BeforeDelete func(ctx context.Context, s *Service, tx *db.Tx, id int64, obj api.Object, cascade bool) error
	// Admit runs the kind's schema write pipeline (package kind) in the write's transaction,
	// after Prepare: it returns the spec to store, the schema revision it conforms to and
	// warnings for the client. prev is the stored spec (nil on create). Nil: no schema.
	Admit func(ctx context.Context, tx *db.Tx, spec, prev json.RawMessage) (json.RawMessage, int, []string, error)
	// Present runs the kind's read pipeline on a stored spec, reading the registry through qr
	// (the caller's transaction when it has one, so a transaction never waits for a second
	// pooled connection); it never fails. Nil: as stored.
	Present func(ctx context.Context, qr db.Querier, spec json.RawMessage) json.RawMessage
	// HoldSteps returns the statements that take the kind's key shared in tx and read its
	// schema revision, which a write sends in one pipeline with BEGIN and the locked read of
	// its row, and done, to call once that pipeline has run (package kind, HoldSteps). Nil:
	// no schema, nothing to hold.
	HoldSteps func(tx *db.Tx) ([]db.Step, func() error)
	// HoldCached is HoldSteps for a write that sends everything with its COMMIT (a write
	// from the list index's copy, updateFromIndex): it admits under the revision the replica
	// remembers and returns the statements that take the key and fail the transaction
	// (db.ErrStale) unless that revision is still current (package kind, HoldCached). ok is
	// false when nothing is remembered. Nil: no schema, nothing to hold.
	HoldCached func(tx *db.Tx) (steps []db.Step, ok bool)
}

// Schemas is the kind registry as the resource path sees it (implemented by package kind):
// the write and read pipelines of every kind's current schema revision, and the user kinds.
type Schemas interface {
	Admit(ctx context.Context, tx *db.Tx, kind string, spec, prev json.RawMessage) (json.RawMessage, int, []string, error)
	Present(ctx context.Context, qr db.Querier, kind string, spec json.RawMessage) json.RawMessage
	HoldSteps(tx *db.Tx, kind string) ([]db.Step, func() error)
	HoldCached(tx *db.Tx, kind string) ([]db.Step, bool)
	// UserKind returns a user-defined kind's scope ("org" or "global"); 404 when unknown.
	UserKind(ctx context.Context, name string) (string, error)
}

// FamilyResources is the authorization family of every user-defined kind's objects.
const FamilyResources = "resources"

// withSchemas returns a copy of k whose Admit and Present go to sc.
func withSchemas(k *Kind, sc Schemas) *Kind {
	c := *k
	name := k.Name
	c.Admit = func(ctx context.Context, tx *db.Tx, spec, prev json.RawMessage) (json.RawMessage, int, []string, error) {
		return sc.Admit(ctx, tx, name, spec, prev)
	}
	c.Present = func(ctx context.Context, qr db.Querier, spec json.RawMessage) json.RawMessage {
		return sc.Present(ctx, qr, name, spec)
	}
	c.HoldSteps = func(tx *db.Tx) ([]db.Step, func() error) { return sc.HoldSteps(tx, name) }
	c.HoldCached = func(tx *db.Tx) ([]db.Step, bool) { return sc.HoldCached(tx, name) }
	return &c
}

// userKind is the descriptor of a user-defined kind: its objects live under
// /v1/orgs/{org}/resources/{kind} (scope org) or /v1/resources/{kind} (scope global) and are
// authorized in the resources family, by org name or by object name.
func userKind(name, scope string, sc Schemas) *Kind {
	k := &Kind{Name: name, Plural: "resources/" + name, Param: "name", Scope: ScopeOrg, Family: FamilyResources}
	if scope == "global" {
		k.Scope = ScopeGlobal
	}
	return withSchemas(k, sc)
}

func (k *Kind) validateName(name string) error {
	if k.ValidateName != nil {
		return k.ValidateName(name)
	}
	return ValidateName(name)
}

// Kinds is the registry of the kinds a Service serves.
type Kinds struct {
	byName map[string]*Kind
}

// NewKinds returns a registry holding ks; it panics on a duplicate name or plural, a
// programming error.
func NewKinds(ks ...*Kind) *Kinds {
	r := &Kinds{byName: map[string]*Kind{}}
	plurals := map[string]bool{}
	for _, k := range ks {
		if r.byName[k.Name] != nil || plurals[k.Plural] {
			panic(fmt.Sprintf("resource: kind %s registered twice", k.Name))
		}
		r.byName[k.Name] = k
		plurals[k.Plural] = true
	}
	return r
}

// Get returns the kind called name.
func (r *Kinds) Get(name string) (*Kind, error) {
	if k := r.byName[name]; k != nil {
		return k, nil
	}
	return nil, fault.NotFound("kind %q is not known", fault.Truncate(name, 80))
}

// All returns the kinds sorted by name.
func (r *Kinds) All() []*Kind {
	out := make([]*Kind, 0, len(r.byName))
	for _, k := range r.byName {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

var minionIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,253}$`)

// ValidateNodeName checks a node name: a Salt minion id of 1-253 characters from
// [A-Za-z0-9._-]. Minion ids are usually host names and may carry upper case and dots,
// which a DNS label would refuse; "." and ".." are refused because they are path segments.
func ValidateNodeName(name string) error {
	if !minionIDRE.MatchString(name) || name == "." || name == ".." {
		return fault.Invalid("/metadata/name", "node name %q must be a Salt minion id: 1-253 characters from A-Z, a-z, 0-9, '.', '_' and '-' (and not . or ..)", fault.Truncate(name, 80))
	}
	return nil
}

// SpecString returns the string member of obj's spec ("" when it is missing or not a string).
func SpecString(obj api.Object, member string) string {
	var m map[string]any
	_ = json.Unmarshal(obj.Spec, &m)
	v, _ := m[member].(string)
	return v
}

// InOrg reports whether obj belongs to org through its org reference, the spec member
// member (Kind.OrgMember); an empty member or org keeps every object.
func InOrg(obj api.Object, member, org string) bool {
	return member == "" || org == "" || SpecString(obj, member) == org
}
