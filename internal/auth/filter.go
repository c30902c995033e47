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
// decides exactly as Allows does for each name (both ask grantPattern). In a target family,
// whose names carry their target kind, only "*" and admin pass: use ListFilterTarget there.
func (p *Principal) ListFilter(family, verb string) Filter {
	return p.listFilter(family, verb, "")
}
