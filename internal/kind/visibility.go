package kind

import (
	"context"
	"strings"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
)

// familyResources is the scope family of user kinds' objects (resource.FamilyResources).
const familyResources = "resources"

// visibility is what the caller of a registration or a report read may see of a kind's
// objects: the request's principal (put in the context by the HTTP API), or everything for
// strata's own calls, which carry none.
//
// Values of the kind held elsewhere (pillar rows of bound categories: Holder) are labelled
// apart and shown to callers the holder lets read them.
type visibility struct {
	p *auth.Principal
	h Holder
	// allHeld: the caller may read every held value; heldScope names the scope it lacks.
	allHeld   bool
	heldScope string
}

func (s *Service) visibilityOf(ctx context.Context) visibility {
	p, _ := auth.FromContext(ctx)
	v := visibility{p: p, h: s.holder, allHeld: true}
	if s.holder != nil && p != nil {
		v.allHeld, v.heldScope = s.holder.MayReadAllHeld(ctx)
	}
	return v
}

// all reports whether the caller may read every object of a kind of scope ("org" or
// "global"): then registrations look at the data and reports are shown whole.
func (v visibility) all(scope string) bool {
	return v.p == nil || v.p.ListFilterTarget(familyResources, "read", scope).All
}

// canRead reports whether the caller may read the object a report names by label: org/name
// for kinds of scope org, name for global ones.
func (v visibility) canRead(ctx context.Context, scope, label string) bool {
	if v.p == nil {
		return true
	}
	if name, ok := heldName(label); ok {
		return v.h != nil && v.h.MayReadHeld(ctx, v.p, name)
	}
	if scope == "org" {
		org, _, _ := strings.Cut(label, "/")
		return v.p.Allows(familyResources, "read", auth.TargetName("org", org))
	}
	return v.p.Allows(familyResources, "read", auth.TargetName("global", label))
}

// filterReport keeps, of a stored report, what the caller may read: the affected objects of
// orgs (or global names) it can read, their count, and no total of objects scanned. Filtered
// says the report is cut so.
func (v visibility) filterReport(ctx context.Context, scope string, r api.KindReport) api.KindReport {
	if v.all(scope) && v.allHeld {
		return r
	}
	out := r
	out.Filtered, out.Scanned = true, 0
	out.Changes = make([]api.KindFinding, len(r.Changes))
	for i, f := range r.Changes {
		if f.Impact != nil {
			im := api.KindImpact{Sample: []string{}}
			for _, label := range f.Impact.Sample {
				if v.canRead(ctx, scope, label) {
					im.Sample = append(im.Sample, label)
				}
			}
			im.Count = len(im.Sample)
			f.Impact = &im
			f.Message = impactFreeMessage(f.Message)
		}
		out.Changes[i] = f
	}
	return out
}

// impactFreeMessage drops the sentence of a finding's message that counts and names the
// affected objects ("…; 3 stored objects are affected (acme/a, b/c, …)"), which covers
// objects of every org.
func impactFreeMessage(msg string) string {
	if i := strings.LastIndex(msg, "; "); i >= 0 && strings.Contains(msg[i:], "affected") {
		return msg[:i] + "; the affected objects you may read are listed as the impact"
	}
	return msg
}
