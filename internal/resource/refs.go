package resource

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
)

// Reference declares one body member of a kind that names an object of another kind, and
// what a writer must hold over the named object. The generic write path checks every
// declared reference of every write, so a body can never reach further than its author's
// scopes: the rule is the descriptor's, not a per-kind handler's.
type Reference struct {
	// Member is the member of spec that holds the referenced object's name ("org").
	Member string
	// Kind is the kind the member names (KindOrg).
	Kind string
	// Family and Verb are the scope the writer needs on the named object, by its name, when
	// a write sets the member or changes it: on the new value and on the old one, so that
	// moving an object out of a place needs the same right as moving it in
	// (orgs:attach:<org>). The identity moves need it too, on the value the object holds
	// (checkHeld): a rename takes the object out of the place under its old name and puts
	// another name there, and a delete takes it out for good, so neither may be done to an
	// object in a place the writer may not touch, whatever the writer holds on the names.
	Family, Verb string
}

// Authorizer is what the generic path asks before a write reaches past its path: the
// request's principal (internal/auth), put in the context with WithAuthorizer.
type Authorizer interface {
	// Check returns nil when the caller holds verb on the named thing of family, else a 403
	// naming the scope it needs.
	Check(family, verb, name string) error
	// Allows reports the same without an error.
	Allows(family, verb, name string) bool
}

type authorizerKey struct{}

// WithAuthorizer returns a context whose writes are checked against a. Writes without one
// are the server's own (start-up, imports already authorized as a whole, tests of this
// package) and reach any reference.
func WithAuthorizer(ctx context.Context, a Authorizer) context.Context {
	return context.WithValue(ctx, authorizerKey{}, a)
}

func authorizerFrom(ctx context.Context) Authorizer {
	a, _ := ctx.Value(authorizerKey{}).(Authorizer)
	return a
}

// checkReferences authorizes the references of a write of obj over prev (nil on create):
// for each declared member whose value the write sets or changes, the writer needs the
// reference's scope on the new value and, for a change, on the old one. It runs before the
// kind's Prepare, so a reference the caller may not use is a 403 whether or not the named
// object exists: the answer reveals nothing about other orgs.
func checkReferences(ctx context.Context, k *Kind, obj api.Object, prev *api.Object) error {
	if len(k.References) == 0 {
		return nil
	}
	az := authorizerFrom(ctx)
	if az == nil {
		return nil
	}
	for _, ref := range k.References {
		next := specString(obj.Spec, ref.Member)
		var old string
		if prev != nil {
			old = specString(prev.Spec, ref.Member)
		}
		if next == old && prev != nil {
			continue
		}
		for _, name := range []string{next, old} {
			if name == "" {
				continue
			}
			if err := az.Check(ref.Family, ref.Verb, name); err != nil {
				return fault.Forbidden("%s: spec.%s names %s %q (%v)", refAction(prev, old, next), ref.Member, strings.ToLower(ref.Kind), fault.Truncate(name, 80), err)
			}
		}
	}
	return nil
}

// checkHeld authorizes an identity move of obj, the stored object whose row the caller has
// locked: a rename (action "renaming") or a delete ("deleting"). For each declared reference
// obj holds, the writer needs the reference's scope on the value held — for a node,
// orgs:attach on the org it is in — besides the route's scope on the object's names. The 403
// names the org: every caller of an identity move holds write or delete on the object, and
// both imply read, so the object's spec (its org) is the caller's to know.
func checkHeld(ctx context.Context, k *Kind, obj api.Object, action string) error {
	az := authorizerFrom(ctx)
	if az == nil || len(k.References) == 0 {
		return nil
	}
	for _, ref := range k.References {
		held := specString(obj.Spec, ref.Member)
		if held == "" {
			continue
		}
		err := az.Check(ref.Family, ref.Verb, held)
		if err == nil {
			continue
		}
		return fault.Forbidden("%s %s %q needs %s:%s on its %s %q (spec.%s): %v", action, strings.ToLower(k.Name), fault.Truncate(obj.Metadata.Name, 80),
			ref.Family, ref.Verb, strings.ToLower(ref.Kind), fault.Truncate(held, 80), ref.Member, err)
	}
	return nil
}

// CheckHeld asks, for a writer outside the generic path, what an identity move of obj (a
// stored object) needs: the scopes of the references obj holds, as checkHeld words them with
// action ("importing into"). The Salt-tree import asks it of every existing node a tree
// names, whose org the tree may claim but cannot change.
func (s *Service) CheckHeld(ctx context.Context, obj api.Object, action string) error {
	k, err := s.kindOf(ctx, Ref{Kind: obj.Kind, Org: obj.Metadata.Org, Name: obj.Metadata.Name})
	if err != nil {
		return err
	}
	return checkHeld(ctx, k, obj, action)
}

// familyName is the name a scope of k's family names the object called name (in org, for
// kinds inside an org) by: the object's name for global kinds, its org's for kinds inside an
// org, qualified by target kind in the resources family (org/<org>, global/<name>), as the
// kind's routes authorize it.
func familyName(k *Kind, org, name string) string {
	switch {
	case k.Family == FamilyResources && k.Scope == ScopeOrg:
		return auth.TargetName("org", org)
	case k.Family == FamilyResources:
		return auth.TargetName("global", name)
	case k.Scope == ScopeOrg:
		return org
	}
	return name
}

// refAction says what the write does with a reference, for the 403's message.
func refAction(prev *api.Object, old, next string) string {
	switch {
	case prev == nil:
		return "creating the object"
	case old == "":
		return "setting the reference"
	default:
		return "moving the object"
	}
}

// specString returns the string member of a spec ("" when absent or not a string: the
// kind's Prepare refuses those with a 422 of its own).
func specString(spec json.RawMessage, member string) string {
	var m map[string]any
	if json.Unmarshal(spec, &m) != nil {
		return ""
	}
	s, _ := m[member].(string)
	return s
}

// CanRead reports whether the context's caller may read the named thing of family (always,
// for the server's own writes). Errors about references use it to answer as if an object the
// caller cannot read did not exist.
func CanRead(ctx context.Context, family, name string) bool {
	az := authorizerFrom(ctx)
	return az == nil || az.Allows(family, "read", name)
}
