package resource

import (
	"context"
	"fmt"
	"regexp"
	"sort"

	"github.com/stratahq/strata/client"
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
	Prepare func(ctx context.Context, tx *db.Tx, obj *client.Object, prev *client.Object) error
	// AfterWrite runs in the same transaction once the row is written (id is its row id),
	// for consequences such as dropping memberships a move made invalid.
	AfterWrite func(ctx context.Context, tx *db.Tx, id int64, obj client.Object, prev *client.Object) error
	// BeforeDelete runs in the deleting transaction after the row is locked; cascade is the
	// caller's ?cascade=true. It refuses (409) or removes what depends on the object.
	BeforeDelete func(ctx context.Context, s *Service, tx *db.Tx, id int64, obj client.Object, cascade bool) error
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
