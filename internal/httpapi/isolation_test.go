package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
)

// isolationBundle is two orgs, acme (the attacker's) and victim, each with an org pillar and
// a selector group with a pillar holding a secret, and a node of each.
type isolationBundle struct {
	*testBundle
}

const victimSecret = "victim-db-password-0451"

func setupIsolation(t *testing.T) isolationBundle {
	t.Helper()
	b := setup(t)
	must := func(status int, method, path, body string) {
		t.Helper()
		r := b.do(t, method, path, b.admin, strings.NewReader(body))
		require.Equal(t, status, r.status, "%s %s: %s", method, path, r.body)
	}
	for _, org := range []string{"acme", "victim", "webshop"} {
		must(201, "POST", "/v1/orgs", `{"metadata":{"name":"`+org+`"}}`)
	}
	must(201, "POST", "/v1/orgs/victim/groups", `{"metadata":{"name":"dbs"},"spec":{"selector":"role=db"}}`)
	must(201, "PUT", "/v1/orgs/victim/groups/dbs/pillars/db", `{"password":"`+victimSecret+`"}`)
	must(201, "PUT", "/v1/orgs/victim/pillars/org", `{"victimOrg":"`+victimSecret+`"}`)
	must(201, "PUT", "/v1/orgs/acme/pillars/org", `{"acmeOrg":"acme-value"}`)
	must(201, "POST", "/v1/nodes", `{"metadata":{"name":"web01","labels":{"role":"web"}},"spec":{"org":"acme"}}`)
	must(201, "POST", "/v1/nodes", `{"metadata":{"name":"vdb01","labels":{"role":"db"}},"spec":{"org":"victim"}}`)
	must(201, "POST", "/v1/orgs/acme/groups", `{"metadata":{"name":"web"}}`)
	return isolationBundle{b}
}

func (b isolationBundle) token(t *testing.T, name string, scopes ...string) string {
	t.Helper()
	_, secret, err := b.tokens.Create(context.Background(), auth.AuditActor{Actor: "test"}, auth.CreateParams{Name: name, Scopes: scopes})
	require.NoError(t, err)
	return secret
}

// requireNoVictim fails when an answer carries anything of victim's: its secret or its name.
func requireNoVictim(t *testing.T, what string, body []byte) {
	t.Helper()
	require.NotContains(t, string(body), victimSecret, what)
	require.NotContains(t, string(body), "victim", what)
}

// TestNodeCannotEnterAnotherOrg is finding 1 of issue 15: a node operator of acme created a
// node in victim, or moved one there (PUT, PATCH, bulk line), joined victim's selector group
// and rendered victim's pillars. Each route is refused with 403 naming orgs:attach:victim, and
// no render shows victim's data. Seen failing with the Node descriptor's reference removed.
func TestNodeCannotEnterAnotherOrg(t *testing.T) {
	t.Parallel()
	b := setupIsolation(t)
	op := b.token(t, "acme-operator", "nodes:write:web*", "pillars:render:node/web*", "orgs:read:acme", "orgs:attach:acme", "groups:write:acme")

	p := problem(t, b.do(t, "POST", "/v1/nodes", op, strings.NewReader(`{"metadata":{"name":"web99","labels":{"role":"db"}},"spec":{"org":"victim"}}`)), 403, "forbidden")
	require.Contains(t, p.Detail, "orgs:attach:victim")
	problem(t, b.do(t, "GET", "/v1/nodes/web99", b.admin, nil), 404, "not-found")
	problem(t, b.do(t, "PUT", "/v1/nodes/web98", op, strings.NewReader(`{"metadata":{"labels":{"role":"db"}},"spec":{"org":"victim"}}`)), 403, "forbidden")
	problem(t, b.do(t, "PATCH", "/v1/nodes/web01", op, strings.NewReader(`{"metadata":{"labels":{"role":"db"}},"spec":{"org":"victim"}}`)), 403, "forbidden")
	problem(t, b.do(t, "PUT", "/v1/nodes/web01", op, strings.NewReader(`{"metadata":{"labels":{"role":"db"}},"spec":{"org":"victim"}}`)), 403, "forbidden")
	// An org that does not exist answers the same 403: the refusal is no oracle of which
	// orgs exist.
	problem(t, b.do(t, "PATCH", "/v1/nodes/web01", op, strings.NewReader(`{"spec":{"org":"no-such-org"}}`)), 403, "forbidden")

	res, sum := applyAnswer(t, b.do(t, "POST", "/v1/nodes:apply", op, strings.NewReader(strings.Join([]string{
		`{"metadata":{"name":"web97","labels":{"role":"db"}},"spec":{"org":"victim"}}`,
		`{"metadata":{"name":"web01","labels":{"role":"db"}},"spec":{"org":"victim"}}`,
		`{"metadata":{"name":"web96"},"spec":{"org":"acme"}}`,
	}, "\n")), "Content-Type", "application/x-ndjson"))
	require.Equal(t, 2, sum.Errors)
	lineProblem(t, res, 1, 403, "forbidden")
	lineProblem(t, res, 2, 403, "forbidden")
	require.Equal(t, "created", res[3].Result, "acme is the operator's to place nodes in")

	for _, path := range []string{"/v1/nodes/web01", "/v1/nodes/web01/pillar", "/v1/nodes/web01/pillar?explain=true", "/v1/salt/pillar/web01"} {
		r := b.do(t, "GET", path, b.admin, nil)
		require.Equal(t, 200, r.status, path)
		requireNoVictim(t, path, r.body)
	}
	r := b.do(t, "GET", "/v1/orgs/victim/groups/dbs/members", b.admin, nil)
	require.Equal(t, 200, r.status)
	require.NotContains(t, string(r.body), "web", "no acme node joined victim's group")
	require.Equal(t, 204, b.do(t, "DELETE", "/v1/orgs/acme/groups/web", b.admin, nil).status)

	// Leaving an org needs the same right as entering one: attach on victim alone does not
	// take web01 out of acme.
	half := b.token(t, "victim-attacher", "nodes:write:web*", "orgs:attach:victim")
	p = problem(t, b.do(t, "PATCH", "/v1/nodes/web01", half, strings.NewReader(`{"spec":{"org":"victim"}}`)), 403, "forbidden")
	require.Contains(t, p.Detail, "orgs:attach:acme")
	// With attach on both, the move is the operator's right; orgs:write implies attach.
	both := b.token(t, "mover", "nodes:write:web*", "orgs:attach:victim", "orgs:write:acme")
	r = b.do(t, "PATCH", "/v1/nodes/web01", both, strings.NewReader(`{"spec":{"org":"victim"}}`))
	require.Equal(t, 200, r.status, string(r.body))
	// A node's other writes (labels, staying in its org) need no attach.
	r = b.do(t, "PATCH", "/v1/nodes/web96", op, strings.NewReader(`{"metadata":{"labels":{"x":"y"}}}`))
	require.Equal(t, 200, r.status, string(r.body))
	// A prefix grant is a prefix: nodes:write:web* does not reach db-web01.
	problem(t, b.do(t, "POST", "/v1/nodes", op, strings.NewReader(`{"metadata":{"name":"db-web01"},"spec":{"org":"acme"}}`)), 403, "forbidden")
}

// TestMoveAndBackDropsMemberships: a node moved to another org and back is no longer a
// static member of its first org's group and renders none of that group's pillars (the move
// drops the memberships of the org it leaves, never of the one it enters).
func TestMoveAndBackDropsMemberships(t *testing.T) {
	t.Parallel()
	b := setupIsolation(t)
	require.Equal(t, 201, b.do(t, "PUT", "/v1/orgs/acme/groups/web/members/web01", b.admin, nil).status)
	require.Equal(t, 201, b.do(t, "PUT", "/v1/orgs/acme/groups/web/pillars/app", b.admin, strings.NewReader(`{"static":"member-only"}`)).status)
	r := b.do(t, "GET", "/v1/nodes/web01/pillar", b.admin, nil)
	require.Contains(t, string(r.body), "member-only")
	for _, org := range []string{"victim", "acme"} {
		r := b.do(t, "PATCH", "/v1/nodes/web01", b.admin, strings.NewReader(`{"spec":{"org":"`+org+`"}}`))
		require.Equal(t, 200, r.status, string(r.body))
	}
	r = b.do(t, "GET", "/v1/orgs/acme/groups/web/members", b.admin, nil)
	require.NotContains(t, string(r.body), "web01")
	r = b.do(t, "GET", "/v1/nodes/web01/pillar", b.admin, nil)
	require.Equal(t, 200, r.status)
	require.NotContains(t, string(r.body), "member-only")
	require.Contains(t, string(r.body), "acme-value")
}

// TestMemberOfAnotherOrgIsNotFound is finding 7: adding victim's node to an acme group with
// groups:write:acme answered `node "vdb01" belongs to org "victim"`. A caller who cannot read
// the node gets the 404 of a node that does not exist; one who may read it keeps the
// documented 422.
func TestMemberOfAnotherOrgIsNotFound(t *testing.T) {
	t.Parallel()
	b := setupIsolation(t)
	grouper := b.token(t, "grouper", "groups:write:acme")
	r := b.do(t, "PUT", "/v1/orgs/acme/groups/web/members/vdb01", grouper, nil)
	p := problem(t, r, 404, "not-found")
	requireNoVictim(t, "member of another org", r.body)
	missing := problem(t, b.do(t, "PUT", "/v1/orgs/acme/groups/web/members/nope01", grouper, nil), 404, "not-found")
	require.Equal(t, strings.ReplaceAll(missing.Detail, "nope01", "vdb01"), p.Detail, "the same answer as for a node that does not exist")

	reader := b.token(t, "reader", "groups:write:acme", "nodes:read:vdb01")
	p = problem(t, b.do(t, "PUT", "/v1/orgs/acme/groups/web/members/vdb01", reader, nil), 422, "unprocessable")
	require.Contains(t, p.Detail, "victim")
}

// TestScopeNamesNameTheirTarget is findings 8 and 9: pillars:write:web* (meant for nodes)
// wrote the pillar of an org called webshop, and resources:write:acme created a global object
// named acme. Target-qualified names grant one target kind only.
func TestScopeNamesNameTheirTarget(t *testing.T) {
	t.Parallel()
	b := setupIsolation(t)
	// A legacy name is refused at creation with the forms to use.
	r := b.do(t, "POST", "/v1/tokens", b.admin, strings.NewReader(`{"name":"legacy","scopes":["pillars:write:web*"]}`))
	p := problem(t, r, 400, "validation")
	require.Contains(t, p.Errors[0].Message, "node/<node>")

	nodes := b.token(t, "node-pillars", "pillars:write:node/web*")
	require.Equal(t, 201, b.do(t, "PUT", "/v1/nodes/web01/pillars/app", nodes, strings.NewReader(`{"a":1}`)).status)
	problem(t, b.do(t, "PUT", "/v1/orgs/webshop/pillars/app", nodes, strings.NewReader(`{"a":1}`)), 403, "forbidden")
	problem(t, b.do(t, "PUT", "/v1/orgs/webshop/groups/web/pillars/app", nodes, strings.NewReader(`{"a":1}`)), 403, "forbidden")

	// A node named like an org, and the global layer, share nothing with it.
	require.Equal(t, 201, b.do(t, "POST", "/v1/nodes", b.admin, strings.NewReader(`{"metadata":{"name":"acme"},"spec":{"org":"acme"}}`)).status)
	require.Equal(t, 201, b.do(t, "POST", "/v1/nodes", b.admin, strings.NewReader(`{"metadata":{"name":"global"},"spec":{"org":"acme"}}`)).status)
	org := b.token(t, "org-pillars", "pillars:write:org/acme")
	require.Equal(t, 201, b.do(t, "PUT", "/v1/orgs/acme/pillars/app", org, strings.NewReader(`{"a":1}`)).status)
	problem(t, b.do(t, "PUT", "/v1/nodes/acme/pillars/app", org, strings.NewReader(`{"a":1}`)), 403, "forbidden")
	problem(t, b.do(t, "PUT", "/v1/orgs/acme/groups/web/pillars/app", org, strings.NewReader(`{"a":1}`)), 403, "forbidden")
	glob := b.token(t, "global-pillars", "pillars:write:global")
	require.Equal(t, 201, b.do(t, "PUT", "/v1/pillars/global/app", glob, strings.NewReader(`{"a":1}`)).status)
	problem(t, b.do(t, "PUT", "/v1/nodes/global/pillars/app", glob, strings.NewReader(`{"a":1}`)), 403, "forbidden")
	groups := b.token(t, "group-pillars", "pillars:write:group/acme/*")
	require.Equal(t, 201, b.do(t, "PUT", "/v1/orgs/acme/groups/web/pillars/app", groups, strings.NewReader(`{"a":1}`)).status)
	problem(t, b.do(t, "PUT", "/v1/orgs/acme/pillars/app", groups, strings.NewReader(`{"a":1}`)), 403, "forbidden")

	// render grants read, never write or delete.
	render := b.token(t, "renderer", "pillars:render:*")
	require.Equal(t, 200, b.do(t, "GET", "/v1/nodes/web01/pillar", render, nil).status)
	problem(t, b.do(t, "PUT", "/v1/nodes/web01/pillars/app", render, strings.NewReader(`{"a":2}`)), 403, "forbidden")
	problem(t, b.do(t, "DELETE", "/v1/nodes/web01/pillars/app", render, nil), 403, "forbidden")

	// resources: org/acme is acme's objects; global/acme a global object called acme.
	require.Equal(t, 201, b.do(t, "PUT", "/v1/kinds/Tenant", b.admin, strings.NewReader(`{"scope":"global","schema":{"type":"object"}}`)).status)
	require.Equal(t, 201, b.do(t, "PUT", "/v1/kinds/Db", b.admin, strings.NewReader(`{"scope":"org","schema":{"type":"object"}}`)).status)
	inOrg := b.token(t, "acme-objects", "resources:write:org/acme")
	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs/acme/resources/Db", inOrg, strings.NewReader(`{"metadata":{"name":"main"}}`)).status)
	problem(t, b.do(t, "POST", "/v1/resources/Tenant", inOrg, strings.NewReader(`{"metadata":{"name":"acme"}}`)), 403, "forbidden")
	problem(t, b.do(t, "PUT", "/v1/resources/Tenant/acme", inOrg, strings.NewReader(`{"spec":{}}`)), 403, "forbidden")
	named := b.token(t, "acme-tenant", "resources:write:global/acme")
	require.Equal(t, 201, b.do(t, "POST", "/v1/resources/Tenant", named, strings.NewReader(`{"metadata":{"name":"acme"}}`)).status)
	problem(t, b.do(t, "POST", "/v1/orgs/acme/resources/Db", named, strings.NewReader(`{"metadata":{"name":"other"}}`)), 403, "forbidden")
	r = b.do(t, "GET", "/v1/resources/Tenant", named, nil)
	require.Equal(t, 200, r.status)
	require.Contains(t, string(r.body), `"acme"`)
}

// TestKindRegistrationIsNoOracle is finding 2: with only kinds:write:Db, dry-run registrations
// adding pattern constraints reported which stored objects (of every org) they would affect,
// and stored revision reports listed them to any kinds:read token. A change that needs the
// data is refused to a token that cannot read every object, decided from the schemas alone;
// reports show only readable objects. Seen failing before the fix (the dry run answered 200
// naming victim/vmain).
func TestKindRegistrationIsNoOracle(t *testing.T) {
	t.Parallel()
	b := setupIsolation(t)
	must := func(status int, method, path, body string) []byte {
		t.Helper()
		r := b.do(t, method, path, b.admin, strings.NewReader(body))
		require.Equal(t, status, r.status, "%s %s: %s", method, path, r.body)
		return r.body
	}
	must(201, "PUT", "/v1/kinds/Db", `{"scope":"org","schema":{"type":"object","properties":{"password":{"type":"string"}}}}`)
	must(201, "POST", "/v1/orgs/victim/resources/Db", `{"metadata":{"name":"vmain"},"spec":{"password":"`+victimSecret+`"}}`)
	must(201, "POST", "/v1/orgs/acme/resources/Db", `{"metadata":{"name":"amain"},"spec":{"password":"acme-pw"}}`)
	tight := `{"schema":{"type":"object","properties":{"password":{"type":"string","pattern":"^v"}}}}`

	kw := b.token(t, "kind-writer", "kinds:write:Db", "resources:*:org/acme")
	for _, pattern := range []string{"^v", "^a", "^zzz"} { // affecting victim's, acme's, nobody's: one answer
		r := b.do(t, "PUT", "/v1/kinds/Db?dryRun=true", kw, strings.NewReader(strings.Replace(tight, "^v", pattern, 1)))
		p := problem(t, r, 403, "forbidden")
		require.Contains(t, p.Detail, "resources:read:org/*")
		requireNoVictim(t, "dry run", r.body)
	}
	problem(t, b.do(t, "PUT", "/v1/kinds/Db", kw, strings.NewReader(tight)), 403, "forbidden")
	// A change that needs no data is the kind writer's to make.
	r := b.do(t, "PUT", "/v1/kinds/Db?dryRun=true", kw, strings.NewReader(`{"schema":{"type":"object","properties":{"password":{"type":"string"},"note":{"type":"string"}}}}`))
	require.Equal(t, 200, r.status, string(r.body))
	requireNoVictim(t, "additive dry run", r.body)
	require.Contains(t, string(r.body), `"scanned":0`)

	// A token that may read every object gets the whole report.
	all := b.token(t, "kind-admin", "kinds:write:Db", "resources:read:*")
	r = b.do(t, "PUT", "/v1/kinds/Db?dryRun=true", all, strings.NewReader(tight))
	require.Equal(t, 200, r.status, string(r.body))
	require.Contains(t, string(r.body), "acme/amain")

	// Stored reports: registered by the admin, read by acme's reader.
	body := must(201, "PUT", "/v1/kinds/Db", strings.Replace(tight, "^v", "^x", 1))
	require.Contains(t, string(body), "victim/vmain")
	reader := b.token(t, "kind-reader", "kinds:read:Db", "resources:read:org/acme")
	for _, path := range []string{"/v1/kinds/Db/revisions/2", "/v1/kinds/Db/revisions"} {
		r := b.do(t, "GET", path, reader, nil)
		require.Equal(t, 200, r.status, string(r.body))
		requireNoVictim(t, path, r.body)
		require.Contains(t, string(r.body), "acme/amain")
		require.Contains(t, string(r.body), `"filtered":true`)
	}
	r = b.do(t, "GET", "/v1/kinds/Db/revisions/2", b.admin, nil)
	require.Contains(t, string(r.body), "victim/vmain", "the admin reads the whole report")
}

// TestImportCannotPlaceIntoAnotherOrg: an exported tree's strata-export comments place rows in
// orgs of their own. An importer of acme (pillars:write:*, nodes:write:*, groups:write:acme,
// orgs:attach:acme) sending a tree that places a node into victim — where it would join
// victim's selector group dbs — or a group into victim is refused with 403, and nothing is
// written; the same tree placed in acme imports. Seen failing without authorizeImport.
func TestImportCannotPlaceIntoAnotherOrg(t *testing.T) {
	t.Parallel()
	b := setupIsolation(t)
	tok := b.token(t, "importer", "pillars:write:*", "nodes:write:*", "groups:write:acme", "orgs:attach:acme")
	tree := func(placement, target string) string {
		files := map[string]string{
			"top.sls": "base:\n  " + target + ":\n    - match: nodegroup\n    - x\n",
			"x.sls":   "#!yaml\n# strata-export: " + placement + "\n{\"role\": \"db\"}\n",
		}
		if target == "vdb02" {
			files["top.sls"] = "base:\n  vdb02:\n    - x\n"
		}
		body, _ := json.Marshal(map[string]any{"files": files, "nodegroups": map[string][]string{"g": {"vdb02"}}})
		return string(body)
	}
	cases := []struct{ name, placement, target string }{
		{"node into victim", `{"target":"node/vdb02","category":"x","org":"victim"}`, "vdb02"},
		{"group into victim", `{"target":"group/victim/dbs2","category":"x"}`, "g"},
		{"org victim", `{"target":"org/victim","category":"x"}`, "g"},
	}
	for _, c := range cases {
		r := b.do(t, "POST", "/v1/pillars:import", tok, strings.NewReader(tree(c.placement, c.target)))
		require.Equal(t, 403, r.status, "%s: %s", c.name, r.body)
	}
	problem(t, b.do(t, "GET", "/v1/nodes/vdb02", b.admin, nil), 404, "not-found")
	r := b.do(t, "POST", "/v1/pillars:import", tok, strings.NewReader(tree(`{"target":"node/vdb02","category":"x","org":"acme"}`, "vdb02")))
	require.Equal(t, 200, r.status, string(r.body))
}
