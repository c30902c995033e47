package auth_test

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pgtest"
)

// TestVerbGrants is the whole table of what each verb grants, denials included: a change to
// impliedVerbs that lets render write, or lock delete, fails here.
func TestVerbGrants(t *testing.T) {
	t.Parallel()
	want := map[string][]string{
		"read":         {"read", "read-outputs"},
		"read-outputs": {"read-outputs"},
		"read-secrets": {"read-secrets"},
		"write":        {"attach", "delete", "lock", "read", "read-outputs", "write"},
		"delete":       {"delete", "read", "read-outputs"},
		"render":       {"read", "read-outputs", "render"},
		"lock":         {"lock", "read", "read-outputs"},
		"force-unlock": {"force-unlock"},
		"register":     {"register"},
		"credentials":  {"credentials"},
		"attach":       {"attach"},
		"*":            {"attach", "credentials", "delete", "force-unlock", "lock", "read", "read-outputs", "read-secrets", "register", "render", "write"},
	}
	require.ElementsMatch(t, auth.Verbs, mapKeys(want), "every verb has a row")
	for granted, verbs := range want {
		family := "state"
		if granted == "attach" {
			family = "orgs"
		}
		name := "x"
		if granted == "read-secrets" {
			family, name = "pillars", "node/x"
		}
		p := principal(t, family+":"+granted+":"+name)
		var got []string
		for _, v := range auth.Verbs {
			if v != "*" && p.Allows(family, v, name) {
				got = append(got, v)
			}
		}
		sort.Strings(got)
		require.Equal(t, verbs, got, "verb %s", granted)
	}
}

func mapKeys(m map[string][]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestPrefixIsAPrefix: a name ending in * grants the names that start with it, never the
// names that merely contain it.
func TestPrefixIsAPrefix(t *testing.T) {
	t.Parallel()
	p := principal(t, "projects:write:net*", "nodes:write:web*", "pillars:write:node/web*")
	require.True(t, p.Allows("projects", "write", "net"))
	require.True(t, p.Allows("projects", "write", "network"))
	require.False(t, p.Allows("projects", "write", "mynet"))
	require.False(t, p.Allows("nodes", "write", "db-web01"))
	require.False(t, p.Allows("pillars", "write", "node/db-web01"))
	require.True(t, p.Allows("pillars", "write", "node/web01"))
}

// TestTargetScopeGrammar: pillars and resources scopes name their target kind; a name without
// one is refused with the forms to use, and a grant never crosses target kinds.
func TestTargetScopeGrammar(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		"pillars:write:node/web*", "pillars:read:org/acme", "pillars:write:group/acme/web", "pillars:write:group/acme/*",
		"pillars:read:group/ac*", "pillars:read:group/*", "pillars:read:global", "pillars:render:node/*", "pillars:*:*",
		"resources:write:org/acme", "resources:read:global/acme", "resources:read:global/*", "resources:*:*",
		"*:read:acme", "*:read:org/acme", "*:read:global", "orgs:attach:acme", "orgs:attach:*", "*:attach:acme",
	} {
		s, err := auth.ParseScope(ok)
		require.NoError(t, err, ok)
		require.Equal(t, ok, s.String())
	}
	for bad, says := range map[string]string{
		"pillars:write:web*":         "node/<node>",
		"pillars:write:acme":         "org/<org>",
		"pillars:write:global/x":     "names its target kind",
		"pillars:write:group/acme":   "group/<org>/<group>",
		"pillars:write:pod/x":        "names its target kind",
		"resources:write:acme":       "global/<name>",
		"resources:write:global":     "names its target kind",
		"resources:write:node/web":   "names its target kind",
		"orgs:read:org/acme":         "name must be",
		"nodes:attach:web01":         "orgs:attach:<org>",
		"pillars:write:node/web/x":   "after node/",
		"pillars:write:group/a/b/c":  "group/<org>/<group>",
		"resources:read:org/acme/db": "after org/",
	} {
		_, err := auth.ParseScope(bad)
		require.ErrorContains(t, err, says, bad)
	}

	p := principal(t, "pillars:write:node/web*", "pillars:read:group/acme/*", "resources:read:org/acme")
	require.False(t, p.Allows("pillars", "write", "org/webshop"))
	require.False(t, p.Allows("pillars", "write", "group/webshop/x"))
	require.True(t, p.Allows("pillars", "read", "group/acme/web"))
	require.False(t, p.Allows("pillars", "read", "group/acmex/web"))
	require.False(t, p.Allows("pillars", "read", "org/acme"))
	require.False(t, p.Allows("resources", "read", "global/acme"))

	f := principal(t, "resources:read:global/ten*", "resources:read:global/acme", "resources:read:org/zeta").ListFilterTarget("resources", "read", "global")
	require.Equal(t, auth.Filter{Names: []string{"acme"}, Prefixes: []string{"ten"}}, f)
	require.True(t, principal(t, "resources:read:global/*").ListFilterTarget("resources", "read", "global").All)
	require.True(t, principal(t, "*:*:*").ListFilterTarget("resources", "read", "global").All)
	require.True(t, principal(t, "resources:read:org/*").ListFilterTarget("resources", "read", "global").Empty())
}

// TestMigrateScopes: tokens written with the names of releases before target kinds are
// rewritten to what they were meant for, from the token's other scopes first and the data
// second, keeping every target kind when neither tells; each token once, audited.
func TestMigrateScopes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := pgtest.NewDB(t)
	s := auth.NewService(d)
	// Tokens as an older release stored them (its grammar accepted these names).
	insert := func(id, name string, scopes ...string) {
		_, err := d.Exec(ctx, &db.Query{Name: "seed", Text: `INSERT INTO {{schema}}.tokens (id, name, secret_hash, scopes, created_by) VALUES ($1, $2, $3, $4, 'test')`},
			id, name, db.Bytes(id), scopes)
		require.NoError(t, err)
	}
	insert("tok_a", "node-op", "nodes:write:web*", "pillars:write:web*", "pillars:render:web*")
	insert("tok_b", "org-admin", "orgs:write:acme", "pillars:write:acme", "resources:write:acme")
	insert("tok_c", "by-data", "pillars:read:webshop", "resources:read:tenant1")
	insert("tok_d", "unknown", "pillars:read:zz*")
	insert("tok_e", "already", "pillars:read:node/web*", "pillars:read:global", "state:read:net")
	insert("tok_f", "wild", "*:read:acme")
	insert("tok_g", "g-prefix", "*:*:g*")
	data := map[string][]string{"org": {"acme", "webshop"}, "node": {"web01", "acme"}, "global": {"tenant1"}}
	match := func(_ context.Context, sort, name string, prefix bool) (bool, error) {
		for _, n := range data[sort] {
			if n == name || (prefix && strings.HasPrefix(n, name)) {
				return true, nil
			}
		}
		return false, nil
	}
	got, err := s.MigrateScopes(ctx, match)
	require.NoError(t, err)
	byID := map[string]auth.ScopeMigration{}
	for _, m := range got {
		byID[m.TokenID] = m
	}
	require.Len(t, got, 6, "tok_e needs nothing")
	require.Equal(t, []string{"nodes:write:web*", "pillars:write:node/web*", "pillars:render:node/web*"}, byID["tok_a"].To)
	require.Equal(t, []string{"orgs:write:acme", "pillars:write:org/acme", "pillars:write:group/acme/*", "resources:write:org/acme"}, byID["tok_b"].To)
	require.Equal(t, []string{"pillars:read:org/webshop", "pillars:read:group/webshop/*", "resources:read:global/tenant1"}, byID["tok_c"].To)
	require.Equal(t, []string{"pillars:read:org/zz*", "pillars:read:group/zz*", "pillars:read:node/zz*"}, byID["tok_d"].To)
	require.Contains(t, byID["tok_d"].Notes[0], "narrow the token")
	require.Equal(t, []string{"*:read:acme", "pillars:read:org/acme", "pillars:read:group/acme/*", "pillars:read:node/acme", "resources:read:org/acme"}, byID["tok_f"].To)
	require.Contains(t, byID["tok_f"].Notes[0], "ambiguous")
	// A *-family plain prefix nothing matches does not become the global layer and every
	// target kind (review of issue 27, item 4): it keeps meaning the plain families only, and
	// the audit note says so.
	require.Equal(t, []string{"*:*:g*"}, byID["tok_g"].To)
	require.Len(t, byID["tok_g"].Notes, 1)
	require.Contains(t, byID["tok_g"].Notes[0], "no longer grants pillars")
	require.Contains(t, byID["tok_g"].Notes[0], "no longer grants resources")
	require.Contains(t, byID["tok_g"].Notes[0], "pillars:…:global")
	for _, m := range got {
		for _, sc := range m.To {
			_, err := auth.ParseScope(sc)
			require.NoError(t, err, "%s: %s", m.TokenID, sc)
		}
	}
	// Once only: a second run (another replica) finds nothing to do.
	again, err := s.MigrateScopes(ctx, match)
	require.NoError(t, err)
	require.Empty(t, again)
	audit, err := s.ListAudit(ctx, 0, "token.scopes.migrate", 100)
	require.NoError(t, err)
	require.Len(t, audit, 6)
}

// TestScopeErrorsShowExamples (issue 29, finding 8): a refused scope ends with examples of
// the grammar, of its own family when it names one, and every example is a valid scope.
func TestScopeErrorsShowExamples(t *testing.T) {
	t.Parallel()
	for bad, want := range map[string]string{
		"bogus":                 "admin, orgs:read:acme",
		"pillars:read:nosuch/x": "pillars:read:org/acme",
		"resources:write:web":   "resources:read:org/acme",
		"state:peek:net":        "state:write:net",
		"orgs:read:a/b":         "orgs:read:acme",
		"nodes:read:a b":        "nodes:read:web*",
	} {
		_, err := auth.ParseScope(bad)
		require.Error(t, err, bad)
		_, examples, ok := strings.Cut(err.Error(), "; for example ")
		require.True(t, ok, "%s: %v", bad, err)
		require.True(t, strings.HasPrefix(examples, want), "%s: %v", bad, err)
		for _, ex := range strings.Split(examples, ", ") {
			_, err := auth.ParseScope(ex)
			require.NoError(t, err, "the example %q given for %q", ex, bad)
		}
	}
}
