package auth

import (
	"fmt"
	"regexp"
	"strings"
)

// targetFamilies lists the families whose things are of several target kinds, and those
// kinds. A scope of such a family names its target kind before the name: pillars of the
// node web01 are node/web01, of the org acme org/acme, of its group web group/acme/web, the
// global layer is global; objects of user kinds inside org acme are org/acme (authorized by
// their org), a global object named acme is global/acme. A name without its target kind
// would grant every kind of target that happens to share it (a node named like an org, an
// org named like a node prefix), which is why the grammar refuses one.
var targetFamilies = map[string][]string{
	"pillars":   {"global", "org", "group", "node"},
	"resources": {"org", "global"},
}

// TargetKinds returns the target kinds of family, nil when the family's scopes name plain
// things.
func TargetKinds(family string) []string { return targetFamilies[family] }

// TargetName is the name scopes check for a thing of target kind target called name
// ("node", "web01" → "node/web01"). The global pillar layer is "global" (it has no name);
// a group's pillar target is group/<org>/<group>.
func TargetName(target string, name ...string) string {
	if len(name) == 0 {
		return target
	}
	return target + "/" + strings.Join(name, "/")
}

// plainNameRE is a name, a prefix ending in "*", or "*".
var plainNameRE = regexp.MustCompile(`^(\*|[A-Za-z0-9][A-Za-z0-9_.\-]{0,252}\*?)$`)

// groupNameRE is the rest of a group/ pillar name: groups of one org (acme/*, acme/web,
// acme/w*) or of the orgs a prefix matches (ac*, *).
var groupNameRE = regexp.MustCompile(`^(\*|[A-Za-z0-9][A-Za-z0-9_.\-]{0,252}\*|[A-Za-z0-9][A-Za-z0-9_.\-]{0,252}/(\*|[A-Za-z0-9][A-Za-z0-9_.\-]{0,252}\*?))$`)

// checkScopeName checks a scope's name for family: plain names everywhere except the target
// families, whose names are *, global (pillars) or <target>/<name>. Family "*" takes either
// form: a plain name grants the plain families, a qualified one the target families.
func checkScopeName(family, name string) error {
	targets := targetFamilies[family]
	if family == "*" {
		if plainNameRE.MatchString(name) {
			return nil
		}
		if strings.Contains(name, "/") || name == "global" {
			return checkTargetName(name, []string{"global", "org", "group", "node"}, "pillars or resources")
		}
	}
	if targets == nil {
		if !plainNameRE.MatchString(name) {
			return fmt.Errorf("name must be *, a name, or a prefix ending in *")
		}
		return nil
	}
	return checkTargetName(name, targets, family)
}

func checkTargetName(name string, targets []string, family string) error {
	if name == "*" {
		return nil
	}
	if name == "global" && contains(targets, "global") && family != "resources" {
		return nil
	}
	target, rest, ok := strings.Cut(name, "/")
	if !ok || !contains(targets, target) || (target == "global" && family == "pillars") {
		return fmt.Errorf("a %s scope names its target kind: %s, or * for every target", family, targetForms(family))
	}
	if target == "group" {
		if !groupNameRE.MatchString(rest) {
			return fmt.Errorf("a group pillar target is group/<org>/<group>, group/<org>/* or group/<org prefix>*; %q is none of them", name)
		}
		return nil
	}
	if !plainNameRE.MatchString(rest) {
		return fmt.Errorf("after %s/ comes *, a name, or a prefix ending in *", target)
	}
	return nil
}

// targetForms lists the name forms of a target family, for error messages.
func targetForms(family string) string {
	switch family {
	case "pillars":
		return "global, org/<org>, group/<org>/<group>, node/<node> (names may end in *)"
	case "resources":
		return "org/<org> (the objects inside an org) or global/<name> (global objects; names may end in *)"
	}
	return "global, org/<org>, group/<org>/<group>, node/<node> (pillars) or org/<org>, global/<name> (resources)"
}

// ListFilterTarget is ListFilter for one target kind of a target family: the filter names
// are the things' own names (the target kind stripped), so list queries bind them as they
// bind plain names. A scope of another target kind, or a plain name of family "*", lets
// nothing through (grantPattern).
func (p *Principal) ListFilterTarget(family, verb, target string) Filter {
	return p.listFilter(family, verb, target)
}
