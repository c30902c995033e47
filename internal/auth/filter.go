package auth

import "strings"

// Filter is what a principal may see of one family for one verb, in a form a list query
// takes as bound parameters ($all OR name = ANY($names) OR name starts with any of
// $prefixes), so pages are cut from visible rows only: filtering a page after the query
// would leave pages short or empty and leak the name the next page starts after.
type Filter struct {
	// All is true when every name is visible (admin, or a name "*").
	All bool
	// Names are visible exact names.
	Names []string
	// Prefixes are visible name prefixes (scopes whose name ends in "*").
	Prefixes []string
}

// Empty reports whether the filter lets nothing through.
func (f Filter) Empty() bool { return !f.All && len(f.Names) == 0 && len(f.Prefixes) == 0 }

// Allows reports whether name passes the filter, for lists that cannot filter in SQL.
func (f Filter) Allows(name string) bool {
	if f.All {
		return true
	}
	for _, n := range f.Names {
		if n == name {
			return true
		}
	}
	for _, p := range f.Prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// ListFilter turns the principal's scopes that grant verb on family into a Filter. It
// decides exactly as Allows does for each name: a scope counts when its family and verb
// (or a verb implying it) match, whatever its name.
func (p *Principal) ListFilter(family, verb string) Filter {
	f := Filter{Names: []string{}, Prefixes: []string{}}
	if p == nil {
		return f
	}
	for _, s := range p.Scopes {
		if s.Admin {
			return Filter{All: true, Names: []string{}, Prefixes: []string{}}
		}
		if s.Family != "*" && s.Family != family {
			continue
		}
		if s.Verb != "*" && s.Verb != verb && !contains(impliedVerbs[s.Verb], verb) {
			continue
		}
		switch {
		case s.Name == "*":
			return Filter{All: true, Names: []string{}, Prefixes: []string{}}
		case strings.HasSuffix(s.Name, "*"):
			f.Prefixes = append(f.Prefixes, strings.TrimSuffix(s.Name, "*"))
		default:
			f.Names = append(f.Names, s.Name)
		}
	}
	return f
}
