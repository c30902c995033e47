package resource

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/stratahq/strata/client"
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
	// (orgs:attach:<org>).
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
func checkReferences(ctx context.Context, k *Kind, obj client.Object, prev *client.Object) error {
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

// refAction says what the write does with a reference, for the 403's message.
func refAction(prev *client.Object, old, next string) string {
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
