package auth_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/stratahq/strata/internal/auth"
)

// This file is a reference model of the scope grammar, written from docs/api.md
// ("Authentication and scopes": the families, verbs, target kinds, "How a name grants" and
// the implied verbs) and not from the code, and a property-based test holding package auth
// to it (issue 27). The model describes a thing by its parts (an org, a group of an org, a
// node, the global layer …), never by the text auth checks, so it cannot share a string
// comparison bug with the code.

// modelPlainFamilies are the families whose scope names are plain names (docs/api.md).
var modelPlainFamilies = []string{"orgs", "groups", "nodes", "projects", "state", "kinds", "tokens", "audit"}

// modelVerbs are the verbs a request asks for (never "*": a request asks one verb).
var modelVerbs = []string{"read", "read-outputs", "read-secrets", "write", "delete", "render", "lock", "force-unlock", "register", "credentials", "attach"}

// modelGrantedVerbs is docs/api.md's "Implied verbs" paragraph as a table: write grants read,
// lock, delete and attach; delete, lock and render grant read; read (and so every verb that
// grants it) grants read-outputs; nothing else is implied.
var modelGrantedVerbs = map[string][]string{
	"write":  {"write", "read", "lock", "delete", "attach", "read-outputs"},
	"delete": {"delete", "read", "read-outputs"},
	"lock":   {"lock", "read", "read-outputs"},
	"render": {"render", "read", "read-outputs"},
	"read":   {"read", "read-outputs"},
}

func modelVerbGrants(granted, asked string) bool {
	if granted == "*" {
		return true
	}
	if implied, ok := modelGrantedVerbs[granted]; ok {
		return slices.Contains(implied, asked)
	}
	return granted == asked
}

// modelVerbValid is the verbs' family restrictions: read-outputs only for state,
// read-secrets only for pillars, attach only for orgs (family "*" takes each).
func modelVerbValid(family, verb string) bool {
	only := map[string]string{"read-outputs": "state", "read-secrets": "pillars", "attach": "orgs"}[verb]
	return only == "" || family == "*" || family == only
}

// modelNameGrants is docs/api.md's name rule for one name: "*" every name, a prefix ending
// in "*" the names starting with it, otherwise the name itself.
func modelNameGrants(pattern, name string) bool {
	if pattern == "*" {
		return true
	}
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, p)
	}
	return pattern == name
}

// thing is one thing a request may ask about, by its parts.
type thing struct {
	family string
	// sort: "plain" (a plain family's thing called name), "global-layer" (pillars),
	// "org", "group", "node" (pillars; org also resources), "global-object" (resources),
	// "shared" (what every target shares: pillar settings, categories, import, export).
	sort             string
	name, org, group string
}

func (t thing) String() string {
	return fmt.Sprintf("%s %s %s/%s/%s", t.family, t.sort, t.name, t.org, t.group)
}

// modelScope is one grant: admin, or family:verb:name.
type modelScope struct {
	admin              bool
	family, verb, name string
}

func (s modelScope) String() string {
	if s.admin {
		return "admin"
	}
	return s.family + ":" + s.verb + ":" + s.name
}

// modelGrants decides, as docs/api.md says, whether scope s grants verb on t.
func modelGrants(s modelScope, verb string, t thing) bool {
	if s.admin {
		return true
	}
	if s.family != "*" && s.family != t.family {
		return false
	}
	if !modelVerbGrants(s.verb, verb) {
		return false
	}
	if s.name == "*" {
		return true // every thing of the family, what every target shares included
	}
	switch t.sort {
	case "plain":
		// A target-qualified name grants nothing in the plain families.
		return !strings.Contains(s.name, "/") && modelNameGrants(s.name, t.name)
	case "shared":
		return false // only "*"
	case "global-layer":
		return s.name == "global"
	case "org":
		rest, ok := strings.CutPrefix(s.name, "org/")
		return ok && modelNameGrants(rest, t.org)
	case "node":
		rest, ok := strings.CutPrefix(s.name, "node/")
		return ok && modelNameGrants(rest, t.name)
	case "global-object":
		rest, ok := strings.CutPrefix(s.name, "global/")
		return ok && modelNameGrants(rest, t.name)
	case "group":
		rest, ok := strings.CutPrefix(s.name, "group/")
		if !ok {
			return false
		}
		// group/<org>/<group name or prefix>, group/<org prefix>* (every group of the orgs
		// it matches), group/* (every group).
		if org, grp, ok := strings.Cut(rest, "/"); ok {
			return org == t.org && modelNameGrants(grp, t.group)
		}
		return strings.HasSuffix(rest, "*") && modelNameGrants(rest, t.org)
	}
	panic("unknown sort " + t.sort)
}

// authName is the name auth checks for t (docs/api.md's target table: node/<node>,
// org/<org>, group/<org>/<group>, global, global/<name>; "*" for shared settings), and the
// target kind and own name a list of t's target kind filters by.
func (t thing) authName() (name, target, own string) {
	switch t.sort {
	case "plain":
		return t.name, "", t.name
	case "shared":
		return "*", "", ""
	case "global-layer":
		return auth.TargetName("global"), "global", ""
	case "org":
		return auth.TargetName("org", t.org), "org", t.org
	case "node":
		return auth.TargetName("node", t.name), "node", t.name
	case "global-object":
		return auth.TargetName("global", t.name), "global", t.name
	case "group":
		return auth.TargetName("group", t.org, t.group), "group", t.org + "/" + t.group
	}
	panic("unknown sort " + t.sort)
}

// modelPool is the names things and scopes are drawn from: short, sharing prefixes with each
// other and with the target kinds' own words (node, org, group, global), so that a text
// comparison across target kinds would be caught.
var modelPool = []string{"a", "ab", "abc", "b", "g", "gl", "global", "group", "n", "node", "node1", "o", "org", "ops", "web01", "vdb01", "victim"}

func drawPattern(t *rapid.T, label string) string {
	switch rapid.IntRange(0, 2).Draw(t, label+"-form") {
	case 0:
		return "*"
	case 1:
		return rapid.SampledFrom(modelPool).Draw(t, label)
	default:
		// A prefix: a pool name cut anywhere (possibly empty) and "*".
		n := rapid.SampledFrom(modelPool).Draw(t, label)
		return n[:rapid.IntRange(0, len(n)).Draw(t, label+"-cut")] + "*"
	}
}

// drawScopeName draws a name valid for family per docs/api.md: plain forms for plain
// families, target forms for pillars and resources, either for "*".
func drawScopeName(t *rapid.T, family string) string {
	plain := func() string { return drawPattern(t, "plain") }
	qualified := func(kinds []string) string {
		switch kind := rapid.SampledFrom(kinds).Draw(t, "kind"); kind {
		case "*":
			return "*"
		case "global":
			return "global"
		case "group":
			switch rapid.IntRange(0, 2).Draw(t, "group-form") {
			case 0:
				return "group/*"
			case 1:
				n := rapid.SampledFrom(modelPool).Draw(t, "org-prefix")
				return "group/" + n[:rapid.IntRange(0, len(n)).Draw(t, "org-cut")] + "*"
			default:
				return "group/" + rapid.SampledFrom(modelPool).Draw(t, "org") + "/" + drawPattern(t, "group")
			}
		case "global-object":
			return "global/" + drawPattern(t, "rest")
		default:
			return kind + "/" + drawPattern(t, "rest")
		}
	}
	switch family {
	case "pillars":
		return qualified([]string{"*", "global", "org", "group", "node"})
	case "resources":
		return qualified([]string{"*", "org", "global-object"})
	case "*":
		if rapid.Bool().Draw(t, "plain-form") {
			return plain()
		}
		return qualified([]string{"*", "global", "org", "group", "node", "global-object"})
	}
	return plain()
}

func drawScope(t *rapid.T) modelScope {
	if rapid.IntRange(0, 30).Draw(t, "admin") == 0 {
		return modelScope{admin: true}
	}
	families := append([]string{"*", "pillars", "resources", "*", "pillars"}, modelPlainFamilies...)
	family := rapid.SampledFrom(families).Draw(t, "family")
	verbs := append([]string{"*"}, modelVerbs...)
	verb := rapid.SampledFrom(verbs).Draw(t, "verb")
	return modelScope{family: family, verb: verb, name: drawScopeName(t, family)}
}

func drawThing(t *rapid.T) thing {
	families := append([]string{"pillars", "pillars", "resources"}, modelPlainFamilies...)
	family := rapid.SampledFrom(families).Draw(t, "thing-family")
	pick := func(label string) string { return rapid.SampledFrom(modelPool).Draw(t, label) }
	switch family {
	case "pillars":
		switch rapid.SampledFrom([]string{"global-layer", "org", "group", "node", "shared"}).Draw(t, "sort") {
		case "global-layer":
			return thing{family: family, sort: "global-layer"}
		case "org":
			return thing{family: family, sort: "org", org: pick("org")}
		case "group":
			return thing{family: family, sort: "group", org: pick("org"), group: pick("group")}
		case "node":
			return thing{family: family, sort: "node", name: pick("node")}
		default:
			return thing{family: family, sort: "shared"}
		}
	case "resources":
		switch rapid.SampledFrom([]string{"org", "global-object", "shared"}).Draw(t, "sort") {
		case "org":
			return thing{family: family, sort: "org", org: pick("org")}
		case "global-object":
			return thing{family: family, sort: "global-object", name: pick("object")}
		default:
			return thing{family: family, sort: "shared"}
		}
	}
	return thing{family: family, sort: "plain", name: pick("name")}
}

// TestScopeModel: for generated tokens (one to three scopes, admin now and then) and
// generated things and verbs, auth grants exactly what the reference model grants — a point
// check (Principal.Allows) and the list filter of the thing's family and target kind alike —
// and every scope the documented grammar allows parses, while a verb outside its family
// (read-outputs, read-secrets, attach) is refused.
func TestScopeModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 3).Draw(rt, "scopes")
		var model []modelScope
		var p auth.Principal
		for range n {
			s := drawScope(rt)
			parsed, err := auth.ParseScope(s.String())
			if !s.admin && !modelVerbValid(s.family, s.verb) {
				if err == nil {
					rt.Fatalf("%s parsed, but docs/api.md restricts verb %s to another family", s, s.verb)
				}
				continue
			}
			if err != nil {
				rt.Fatalf("%s is a documented scope form, ParseScope refused it: %v", s, err)
			}
			if parsed.String() != s.String() {
				rt.Fatalf("%s parsed as %s", s, parsed)
			}
			model = append(model, s)
			p.Scopes = append(p.Scopes, parsed)
		}
		for range 200 {
			th := drawThing(rt)
			verb := rapid.SampledFrom(modelVerbs).Draw(rt, "asked-verb")
			want := false
			for _, s := range model {
				want = want || modelGrants(s, verb, th)
			}
			name, target, own := th.authName()
			if got := p.Allows(th.family, verb, name); got != want {
				rt.Fatalf("scopes %v, %s %s (%q): Allows = %v, the model says %v", model, verb, th, name, got, want)
			}
			var f auth.Filter
			switch {
			case th.sort == "shared":
				// What every target shares is granted by a list filter letting everything through.
				f = p.ListFilter(th.family, verb)
				if f.All != want {
					rt.Fatalf("scopes %v, %s %s: ListFilter.All = %v, the model says %v", model, verb, th, f.All, want)
				}
				continue
			case target == "":
				f = p.ListFilter(th.family, verb)
			default:
				f = p.ListFilterTarget(th.family, verb, target)
			}
			if got := f.Allows(own); got != want {
				rt.Fatalf("scopes %v, %s %s: the list filter (%+v) lets %q through = %v, the model says %v", model, verb, th, f, own, got, want)
			}
		}
	})
}

// TestScopeModelExamples pins the examples docs/api.md gives for the name rule: the four
// *-family plain prefixes of issue 27 grant no pillar or resource, yet keep their plain
// families, and the qualified forms grant what they name.
func TestScopeModelExamples(t *testing.T) {
	t.Parallel()
	type check struct {
		family, verb, name string
		want               bool
	}
	cases := map[string][]check{
		"*:*:node*": {
			{"pillars", "read", "node/vdb01", false}, {"pillars", "render", "node/node1", false},
			{"nodes", "write", "node1", true}, {"nodes", "read", "vdb01", false},
		},
		"*:read:o*": {
			{"pillars", "read", "org/victim", false}, {"resources", "read", "org/victim", false},
			{"resources", "read", "org/ops", false}, {"orgs", "read", "ops", true}, {"orgs", "read", "victim", false},
		},
		"*:*:g*": {
			{"pillars", "read", "global", false}, {"pillars", "write", "group/victim/dbs", false},
			{"pillars", "write", "group/g/dbs", false}, {"groups", "write", "gx", true},
		},
		"*:*:gl*":          {{"pillars", "read", "global", false}, {"resources", "read", "global/x", false}},
		"*:read:node/web*": {{"pillars", "read", "node/web01", true}, {"pillars", "read", "org/webshop", false}, {"resources", "read", "org/web01", false}, {"nodes", "read", "web01", false}},
		"*:*:org/acme":     {{"pillars", "write", "org/acme", true}, {"resources", "delete", "org/acme", true}, {"pillars", "read", "group/acme/web", false}, {"orgs", "read", "acme", false}},
		"*:read:global":    {{"pillars", "read", "global", true}, {"orgs", "read", "global", true}, {"resources", "read", "global/x", false}},
	}
	for scope, checks := range cases {
		p := principal(t, scope)
		for _, c := range checks {
			require.Equal(t, c.want, p.Allows(c.family, c.verb, c.name), "%s grants %s:%s:%s", scope, c.family, c.verb, c.name)
		}
	}
}
