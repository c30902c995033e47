package auth

import "strings"

// namePattern is what one scope grants among the things of one family and target kind,
// written in those things' own names (the target kind stripped): every name, one name, or
// the names starting with a prefix. Filter collects them for list queries; match applies one
// to a name for point checks.
type namePattern struct {
	all    bool
	name   string
	prefix bool
}

// patternOf reads a scope's name (or the part after its target kind) as a pattern: "*",
// a prefix ending in "*", or an exact name.
func patternOf(text string) namePattern {
	switch {
	case text == "*":
		return namePattern{all: true}
	case strings.HasSuffix(text, "*"):
		return namePattern{name: strings.TrimSuffix(text, "*"), prefix: true}
	default:
		return namePattern{name: text}
	}
}

func (p namePattern) match(name string) bool {
	switch {
	case p.all:
		return true
	case p.prefix:
		return strings.HasPrefix(name, p.name)
	default:
		return p.name == name
	}
}

// splitTarget splits the name a point check asks about into its target kind and the thing's
// own name: node/web01 → node, web01; group/acme/web → group, acme/web; global → global, "".
// A plain family's names have no target kind. A name without "/" in a target family (global,
// or "*" for settings every target shares) is a target kind of its own with an empty name.
func splitTarget(family, name string) (target, rest string) {
	if targetFamilies[family] == nil {
		return "", name
	}
	target, rest, _ = strings.Cut(name, "/")
	return target, rest
}

// grantPattern is the one rule deciding which things of family, of target kind target ("" in
// the plain families), the scope grants verb on; point checks (Scope.grants) and list filters
// (ListFilter, ListFilterTarget) both ask it. ok is false when the scope grants none of them.
//
// The name rule: "*" grants everything. In a plain family (orgs, nodes, groups, …) the name
// is the thing's name or prefix, and a name holding "/" (a target-qualified name of family
// "*") grants nothing. In a target family (pillars, resources) a name grants only through its
// target kind: exactly "global" grants the global pillar layer, and <target>/<rest> grants
// the things of that target kind whose own names rest matches. A plain name grants no
// target: *:*:node*, *:read:o*, *:*:g* and *:*:gl* grant no node/…, org/…, group/… or
// global, however the qualified name happens to begin.
func (s Scope) grantPattern(family, verb, target string) (namePattern, bool) {
	if s.Admin {
		return namePattern{all: true}, true
	}
	if s.Family != "*" && s.Family != family {
		return namePattern{}, false
	}
	if s.Verb != "*" && !implies(s.Verb, verb) {
		return namePattern{}, false
	}
	if s.Name == "*" {
		return namePattern{all: true}, true
	}
	targets := targetFamilies[family]
	if targets == nil {
		if target != "" || strings.Contains(s.Name, "/") {
			return namePattern{}, false
		}
		return patternOf(s.Name), true
	}
	if !contains(targets, target) {
		return namePattern{}, false
	}
	if target == "global" && family == "pillars" {
		return namePattern{all: true}, s.Name == "global"
	}
	rest, ok := strings.CutPrefix(s.Name, target+"/")
	if !ok {
		return namePattern{}, false
	}
	return patternOf(rest), true
}

// listFilter is the Filter of every pattern the principal's scopes grant verb on for family's
// things of target kind target.
func (p *Principal) listFilter(family, verb, target string) Filter {
	f := Filter{Names: []string{}, Prefixes: []string{}}
	if p == nil {
		return f
	}
	for _, s := range p.Scopes {
		pat, ok := s.grantPattern(family, verb, target)
		switch {
		case !ok:
		case pat.all:
			return Filter{All: true, Names: []string{}, Prefixes: []string{}}
		case pat.prefix:
			f.Prefixes = append(f.Prefixes, pat.name)
		default:
			f.Names = append(f.Names, pat.name)
		}
	}
	return f
}
