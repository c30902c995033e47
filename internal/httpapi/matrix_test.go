package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
)

// The isolation matrix: org B ("webshop") holds a secret in every place a request could
// reach, and a token scoped to org A ("acme": its org, groups, nodes web*, pillars, objects
// and node operator rights) tries to reach B through every route of the table (path),
// every body reference its kinds declare (body, bulk line), a selector, a member, a watch
// and a kind registration. B's name makes finding 9 reachable: a prefix meant for nodes web*
// would match the org webshop if scopes did not name their target kind.
const (
	matrixOrgB   = "webshop"
	matrixSecret = "b-secret-7e1f"
)

// matrixBNames are B's things a request may not learn: an answer may repeat what the
// request named, never the rest.
var matrixBNames = []string{matrixOrgB, "vdb01", "dbs", "bmain", matrixSecret}

// matrixParams stand in for each path parameter: always one of B's things.
var matrixParams = map[string]string{
	"org": matrixOrgB, "node": "vdb01", "minion": "vdb01", "group": "dbs", "kind": "Db", "name": "bmain",
	"category": "db", "change": "1", "project": "net", "workspace": "default", "n": "1", "id": "tok_x",
}

var paramRE = regexp.MustCompile(`\{([a-z]+)\}`)

func setupMatrix(t *testing.T) (*testBundle, string, func() string) {
	t.Helper()
	b := setupState(t)
	must := func(method, path, body string) {
		t.Helper()
		r := b.do(t, method, path, b.admin, strings.NewReader(body))
		require.Less(t, r.status, 300, "%s %s: %s", method, path, r.body)
	}
	sec := `"secret":"` + matrixSecret + `"`
	must("POST", "/v1/orgs", `{"metadata":{"name":"acme"}}`)
	must("POST", "/v1/orgs", `{"metadata":{"name":"`+matrixOrgB+`"},"spec":{`+sec+`}}`)
	must("POST", "/v1/orgs/"+matrixOrgB+"/groups", `{"metadata":{"name":"dbs"},"spec":{"selector":"role=db",`+sec+`}}`)
	must("POST", "/v1/orgs/acme/groups", `{"metadata":{"name":"web"}}`)
	must("POST", "/v1/nodes", `{"metadata":{"name":"vdb01","labels":{"role":"db"}},"spec":{"org":"`+matrixOrgB+`",`+sec+`}}`)
	must("POST", "/v1/nodes", `{"metadata":{"name":"web01","labels":{"role":"web"}},"spec":{"org":"acme"}}`)
	for _, path := range []string{"/v1/pillars/global/g", "/v1/orgs/" + matrixOrgB + "/pillars/db", "/v1/orgs/" + matrixOrgB + "/groups/dbs/pillars/db", "/v1/nodes/vdb01/pillars/db"} {
		if path == "/v1/pillars/global/g" {
			must("PUT", path, `{"g":1}`)
			continue
		}
		must("PUT", path, `{`+sec+`}`)
	}
	must("PUT", "/v1/kinds/Db", `{"scope":"org","schema":{"type":"object","properties":{"secret":{"type":"string"}}}}`)
	must("POST", "/v1/orgs/"+matrixOrgB+"/resources/Db", `{"metadata":{"name":"bmain"},"spec":{`+sec+`}}`)
	must("POST", "/v1/orgs/acme/resources/Db", `{"metadata":{"name":"amain"},"spec":{"secret":"a"}}`)

	a := b.token(t, "org-a", "orgs:write:acme", "groups:write:acme", "nodes:write:web*", "pillars:*:org/acme",
		"pillars:*:group/acme/*", "pillars:*:node/web*", "resources:*:org/acme", "kinds:write:Db")
	// snapshot is everything B has, as the admin reads it: it must be the same after the
	// attempts.
	snapshot := func() string {
		var out []string
		for _, path := range []string{"/v1/orgs/" + matrixOrgB, "/v1/nodes/vdb01", "/v1/orgs/" + matrixOrgB + "/groups/dbs",
			"/v1/orgs/" + matrixOrgB + "/groups/dbs/members", "/v1/orgs/" + matrixOrgB + "/pillars", "/v1/orgs/" + matrixOrgB + "/groups/dbs/pillars",
			"/v1/nodes/vdb01/pillars", "/v1/orgs/" + matrixOrgB + "/resources/Db", "/v1/orgs/" + matrixOrgB + "/resources/Db/bmain",
			"/v1/nodes/vdb01/pillar", "/v1/nodes?labelSelector=role%3Ddb", "/v1/kinds/Db"} {
			r := b.do(t, "GET", path, b.admin, nil)
			require.Equal(t, 200, r.status, "%s: %s", path, r.body)
			out = append(out, path+" "+string(r.body))
		}
		return strings.Join(out, "\n")
	}
	return b, a, snapshot
}

func (b *testBundle) token(t *testing.T, name string, scopes ...string) string {
	return isolationBundle{b}.token(t, name, scopes...)
}

// requireNothingOfB fails when an answer names one of B's things the request did not name.
func requireNothingOfB(t *testing.T, what, sent string, body []byte) {
	t.Helper()
	for _, name := range matrixBNames {
		if name != matrixSecret && strings.Contains(sent, name) {
			continue
		}
		require.NotContains(t, string(body), name, "%s reveals %q: %s", what, name, body)
	}
}

// TestIsolationMatrix: every attempt of a token scoped to org A to reach org B is a 403 or a
// 404 (lists and watches answer 200 without B's things), no answer carries anything of B's
// the request did not name, and B is unchanged at the end. The attempts are generated from
// the route table and from the kind descriptors' body references, so a route or a reference
// added later is attacked too. Seen failing on the code before issue 15 for findings 1
// (a node's spec.org), 7 (the member's org named), and 9 (pillar scopes across targets).
func TestIsolationMatrix(t *testing.T) {
	t.Parallel()
	b, a, snapshot := setupMatrix(t)
	before := snapshot()

	type attempt struct{ method, path, body, why string }
	var attempts []attempt
	// Path: every route, its parameters naming B's things.
	patterns := httpapi.New(httpapi.Options{Resources: resource.NewService(nil), Pillars: pillar.NewService(nil)}).Patterns()
	for _, p := range patterns {
		method, path, _ := strings.Cut(p, " ")
		if !paramRE.MatchString(path) && method != "GET" {
			continue // names nothing of B's by its path: the body attempts below cover it
		}
		path = paramRE.ReplaceAllStringFunc(path, func(m string) string {
			v, ok := matrixParams[strings.Trim(m, "{}")]
			require.True(t, ok, "no stand-in for %s in %s", m, p)
			return v
		})
		body := ""
		switch method {
		case "POST", "PUT", "PATCH", "LOCK", "UNLOCK":
			body = `{"metadata":{"name":"web77","labels":{"role":"db"}},"spec":{"org":"acme","a":1}}`
		}
		if strings.HasPrefix(path, "/v1/kinds/") && method == "PUT" {
			// Kind registration: a tightening whose data-aware check would look at B's
			// objects (finding 2).
			path += "?dryRun=true"
			body = `{"schema":{"type":"object","properties":{"secret":{"type":"string","pattern":"^b-"}}}}`
		}
		if strings.HasSuffix(path, ":apply") {
			body = `{"metadata":{"name":"vdb01"},"spec":{"org":"acme"}}`
		}
		attempts = append(attempts, attempt{method, path, body, "path of " + p})
	}
	// Body: every reference a kind declares, set to B on writes whose path is A's own.
	// The members known to reference orgs are attacked whatever the descriptors declare
	// (a descriptor that stopped declaring one must not stop its attack), and every
	// declared one besides.
	known := map[string][]resource.Reference{resource.KindNode: {{Member: "org", Kind: resource.KindOrg}}}
	kinds := resource.NewService(nil).Kinds().All()
	refs := 0
	for _, k := range kinds {
		all := known[k.Name]
		for _, ref := range k.References {
			if !strings.Contains(fmtRefs(all), ","+ref.Member+",") {
				all = append(all, ref)
			}
		}
		for _, ref := range all {
			refs++
			require.Equal(t, resource.KindOrg, ref.Kind, "a reference to a %s needs a stand-in here", ref.Kind)
			coll, item := "/v1/"+k.Plural, "/v1/"+k.Plural+"/web01"
			if k.Scope == resource.ScopeOrg {
				coll, item = "/v1/orgs/acme/"+k.Plural, "/v1/orgs/acme/"+k.Plural+"/web01"
			}
			member, _ := json.Marshal(map[string]any{ref.Member: matrixOrgB})
			obj := `{"metadata":{"name":"web78","labels":{"role":"db"}},"spec":` + string(member) + `}`
			attempts = append(attempts,
				attempt{"POST", coll, obj, k.Name + " create, spec." + ref.Member},
				attempt{"PUT", item, `{"metadata":{"labels":{"role":"db"}},"spec":` + string(member) + `}`, k.Name + " replace, spec." + ref.Member},
				attempt{"PATCH", item, `{"spec":` + string(member) + `}`, k.Name + " patch, spec." + ref.Member},
			)
			if k.Name == resource.KindNode {
				attempts = append(attempts,
					attempt{"POST", "/v1/nodes:apply", `{"metadata":{"name":"web79"},"spec":` + string(member) + `}`, "bulk line, spec." + ref.Member},
					attempt{"POST", "/v1/nodes:apply", `{"metadata":{"name":"web01"},"spec":` + string(member) + `}`, "bulk line moving, spec." + ref.Member})
			}
		}
	}
	require.NotZero(t, refs, "the descriptors declare references")
	attempts = append(attempts,
		// Member: B's node into A's group.
		attempt{"PUT", "/v1/orgs/acme/groups/web/members/vdb01", "", "member of another org"},
		// Bulk line: memberships of B's group for A's node.
		attempt{"POST", "/v1/nodes:apply", `{"metadata":{"name":"web01"},"spec":{"org":"acme"},"groups":["dbs"]}`, "bulk line groups"},
		// Selector: a list selecting B's nodes by label.
		attempt{"GET", "/v1/nodes?labelSelector=role%3Ddb", "", "selector"},
		attempt{"GET", "/v1/orgs/acme/groups/web/members", "", "members of A's group"},
		// Pillars of A's node and render (only A's layers).
		attempt{"GET", "/v1/nodes/web01/pillar?explain=true", "", "render of A's node"},
	)

	for _, at := range attempts {
		hdr := []string{}
		if strings.HasSuffix(at.path, ":apply") {
			hdr = []string{"Content-Type", "application/x-ndjson"}
		}
		if at.method == "PATCH" {
			hdr = []string{"Content-Type", "application/merge-patch+json"}
		}
		r := b.do(t, at.method, at.path, a, strings.NewReader(at.body), hdr...)
		what := at.why + ": " + at.method + " " + at.path + " " + at.body
		requireNothingOfB(t, what, at.method+" "+at.path+" "+at.body, r.body)
		switch {
		case strings.HasSuffix(at.path, ":apply") && r.status == 200:
			require.NotContains(t, string(r.body), `"result":"created"`, what)
			require.NotContains(t, string(r.body), `"result":"updated"`, what)
			require.Contains(t, string(r.body), `"errors":1`, what)
		case strings.HasPrefix(at.path, "/v1/salt/"):
			require.Equal(t, 200, r.status, what)
			require.Contains(t, string(r.body), `{"_errors":["strata: cannot render the pillar of minion`, what)
		case at.method == "GET" && r.status == 200:
			// A list, a render or a member list of A's: allowed, without B (checked above).
		default:
			require.Contains(t, []int{403, 404}, r.status, "%s: %s", what, r.body)
		}
	}

	// Watch: a watch of every list, from the start, sees none of B's things.
	for _, path := range []string{"/v1/nodes", "/v1/orgs", "/v1/orgs/acme/groups", "/v1/orgs/acme/resources/Db"} {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		req, err := http.NewRequestWithContext(ctx, "GET", b.srv.URL+path+"?watch=true&resourceVersion=0", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+a)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			buf := make([]byte, 1<<16)
			var got []byte
			for {
				n, err := resp.Body.Read(buf)
				got = append(got, buf[:n]...)
				if err != nil {
					break
				}
			}
			resp.Body.Close()
			requireNothingOfB(t, "watch "+path, path, got)
		}
		cancel()
	}
	for _, path := range []string{"/v1/orgs/" + matrixOrgB + "/groups", "/v1/orgs/" + matrixOrgB + "/resources/Db"} {
		r := b.do(t, "GET", path+"?watch=true", a, nil)
		require.Contains(t, []int{403, 404}, r.status, path)
		requireNothingOfB(t, "watch "+path, path, r.body)
	}

	require.Equal(t, before, snapshot(), "B is unchanged")
}

func fmtRefs(refs []resource.Reference) string {
	var out []string
	for _, r := range refs {
		out = append(out, r.Member)
	}
	return "," + strings.Join(out, ",") + ","
}

// starScopeCases are the *-family scopes of issue 27's route matrix: each is run against every
// route with every path parameter standing for stand (a name its plain prefix or qualified
// name matches), next to the token its documented meaning expands to (the same verb and name
// in every family it reaches: the plain families for a plain name, pillars and resources for
// a target-qualified one). granted and refused pin routes by pattern.
var starScopeCases = []struct {
	scope, stand     string
	qualified        bool
	granted, refused []string
}{
	{scope: "*:*:node*", stand: "node9", granted: []string{"GET /v1/nodes/{node}", "PATCH /v1/nodes/{node}"},
		refused: []string{"GET /v1/nodes/{node}/pillar", "GET /v1/nodes/{node}/pillars/{category}", "PUT /v1/nodes/{node}/pillars/{category}"}},
	{scope: "*:read:o*", stand: "ops9", granted: []string{"GET /v1/orgs/{org}", "GET /v1/orgs/{org}/groups"},
		refused: []string{"GET /v1/orgs/{org}/pillars/{category}", "GET /v1/orgs/{org}/resources/{kind}/{name}", "PUT /v1/orgs/{org}"}},
	{scope: "*:*:g*", stand: "g9", granted: []string{"GET /v1/orgs/{org}/groups/{group}/members", "DELETE /v1/orgs/{org}"},
		refused: []string{"GET /v1/pillars/global/{category}", "PUT /v1/orgs/{org}/groups/{group}/pillars/{category}"}},
	{scope: "*:*:gl*", stand: "gl9", granted: []string{"GET /v1/orgs/{org}"},
		refused: []string{"GET /v1/pillars/global", "PUT /v1/pillars/global/{category}"}},
	{scope: "*:read:node/web*", stand: "web01", qualified: true,
		granted: []string{"GET /v1/nodes/{node}/pillars", "GET /v1/nodes/{node}/pillars/{category}", "GET /v1/nodes/{node}/pillars/{category}/history"},
		refused: []string{"GET /v1/nodes/{node}/pillar", "PUT /v1/nodes/{node}/pillars/{category}", "GET /v1/nodes/{node}", "GET /v1/orgs/{org}/pillars", "GET /v1/orgs/{org}/resources/{kind}/{name}"}},
	{scope: "*:*:org/acme", stand: "acme", qualified: true,
		granted: []string{"GET /v1/orgs/{org}/pillars", "PUT /v1/orgs/{org}/pillars/{category}", "DELETE /v1/orgs/{org}/resources/{kind}/{name}"},
		refused: []string{"GET /v1/orgs/{org}", "PUT /v1/orgs/{org}/groups/{group}/pillars/{category}", "GET /v1/nodes/{node}/pillar", "GET /v1/pillars/global"}},
}

// targetFamilyRoute reports whether a route's scopes are of a target family (pillars or
// resources), by its path.
func targetFamilyRoute(pattern string) bool {
	return strings.Contains(pattern, "/pillar") || strings.Contains(pattern, "/salt/") || strings.Contains(pattern, "/resources")
}

// lacksRE finds the scopes an answer says the token lacks: a 403's detail, a stream line's
// problem, Salt's _errors text.
var lacksRE = regexp.MustCompile(`lacks (?:the )?scope ([^ "\\]+)`)

// starAnswers runs every route of the table as token on a fresh bundle, each path parameter
// standing for stand, and returns per pattern the scopes the answer says are missing ("" when
// the route was granted). Writes are meant to fail after authorization (nothing they name
// exists), and two runs of the same requests on fresh bundles see the same data.
func starAnswers(t *testing.T, stand string, scopes ...string) map[string]string {
	t.Helper()
	b := setup(t)
	tok := b.token(t, "matrix-token", scopes...)
	out := map[string]string{}
	patterns := httpapi.New(httpapi.Options{Resources: resource.NewService(nil), Pillars: pillar.NewService(nil)}).Patterns()
	for _, p := range patterns {
		method, path, _ := strings.Cut(p, " ")
		path = paramRE.ReplaceAllStringFunc(path, func(m string) string {
			switch strings.Trim(m, "{}") {
			case "n", "change":
				return "1"
			case "id":
				return "tok_x"
			case "workspace":
				return "default"
			case "category":
				return "cat"
			}
			return stand
		})
		body, hdr := "", []string{}
		switch method {
		case "POST", "PUT", "PATCH", "LOCK", "UNLOCK":
			body = `{"metadata":{"name":"` + stand + `"},"spec":{"org":"` + stand + `"}}`
		}
		if strings.HasSuffix(path, ":apply") {
			hdr = []string{"Content-Type", "application/x-ndjson"}
		}
		if method == "PATCH" {
			hdr = []string{"Content-Type", "application/merge-patch+json"}
		}
		r := b.do(t, method, path, tok, strings.NewReader(body), hdr...)
		var lacks []string
		for _, m := range lacksRE.FindAllStringSubmatch(string(r.body), -1) {
			lacks = append(lacks, m[1])
		}
		if r.status == 403 && len(lacks) == 0 {
			lacks = []string{"403: " + string(r.body)}
		}
		out[p] = strings.Join(lacks, " ")
	}
	return out
}

// TestStarScopeRouteMatrix (issue 27): a *-family scope grants on every route exactly what
// the scopes it stands for grant (the plain families for a plain name, pillars and resources
// for a qualified one), so a plain prefix such as *:*:node* or *:read:o* refuses every pillar
// and resource route (only the list of global objects answers, filtered), a qualified name
// such as *:*:org/acme refuses every plain route but lists, and the pinned routes answer as
// the docs' examples say.
func TestStarScopeRouteMatrix(t *testing.T) {
	t.Parallel()
	plain := []string{"orgs", "groups", "nodes", "projects", "state", "kinds", "tokens", "audit"}
	for _, c := range starScopeCases {
		t.Run(strings.NewReplacer("*", "x", ":", "_", "/", "_").Replace(c.scope), func(t *testing.T) {
			t.Parallel()
			_, rest, _ := strings.Cut(c.scope, ":")
			verb, name, _ := strings.Cut(rest, ":")
			families := plain
			if c.qualified {
				families = []string{"pillars", "resources"}
			}
			var expansion []string
			for _, f := range families {
				if f == "resources" && strings.HasPrefix(name, "node/") {
					continue // resources have no node target
				}
				expansion = append(expansion, f+":"+verb+":"+name)
			}
			star := starAnswers(t, c.stand, c.scope)
			want := starAnswers(t, c.stand, expansion...)
			require.Equal(t, want, star, "%s grants what %v grant, route by route", c.scope, expansion)
			listed := map[string]bool{"GET /v1/resources/{kind}": true, "GET /v1/orgs": true, "GET /v1/nodes": true,
				"GET /v1/projects": true, "GET /v1/tokens": true}
			grantedAny := false
			for p, lacks := range star {
				granted := lacks == ""
				grantedAny = grantedAny || granted
				if listed[p] || !granted {
					continue
				}
				require.Equal(t, c.qualified, targetFamilyRoute(p), "%s grants %s", c.scope, p)
			}
			require.True(t, grantedAny, c.scope)
			for _, p := range c.granted {
				require.Contains(t, star, p)
				require.Empty(t, star[p], "%s grants %s", c.scope, p)
			}
			for _, p := range c.refused {
				require.Contains(t, star, p)
				require.NotEmpty(t, star[p], "%s refuses %s", c.scope, p)
			}
		})
	}
}
