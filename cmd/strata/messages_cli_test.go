package main_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKindReportsDecideOnce (issue 29, finding 7): a kind report re-asked decided changes. A
// refused registration's summary listed an `earlier (since revision 1)` finding under "needs
// an acknowledgement", every report repeated all earlier rows, a redundant --ack was taken
// silently, and examples/database-v2.yaml's comment gave an --ack the reports do not print.
// Now earlier findings are one folded line, never a question; a redundant --ack is a warning
// naming it; and the example's own command registers it.
func TestKindReportsDecideOnce(t *testing.T) {
	t.Parallel()
	c := newCLIEnv(t)
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	streams := func(args ...string) (string, string, error) {
		t.Helper()
		return cliStreams(t, c.env, args...)
	}

	c.run("org", "create", "acme")
	// An acknowledgement on a first registration has nothing to acknowledge.
	_, errOut, err := streams("kind", "apply", "-f", filepath.Join(root, "examples/database.yaml"), "--ack", "/spec/size=readersUpgradedFirst")
	require.NoError(t, err)
	require.Contains(t, errOut, "warning: --ack /spec/size=readersUpgradedFirst is not needed")
	c.run("apply", "-f", filepath.Join(root, "examples/main-db.yaml"), "--org", "acme")

	// The example's comment gives the command that registers revision 2.
	v2 := filepath.Join(root, "examples/database-v2.yaml")
	b, err := os.ReadFile(v2)
	require.NoError(t, err)
	m := regexp.MustCompile(`--ack (\S+?)[),]?\s`).FindStringSubmatch(string(b))
	require.NotNil(t, m, "the example names its acknowledgement")
	out, errOut, err := streams("kind", "apply", "-f", v2, "--ack", m[1])
	require.NoError(t, err, "the comment's --ack %s registers it: %s%s", m[1], out, errOut)
	require.Contains(t, out, "registered revision 2")
	require.NotContains(t, errOut, "warning")

	// Revision 3 adds a required field while main still stands at revision 1: the size
	// widening and the tier default are revision 2's decisions, not this one's questions.
	v3 := c.write("v3.yaml", `kind: Database
schema:
  type: object
  required: [engine, owner]
  properties:
    engine: {type: string, enum: [postgres, mysql]}
    size:   {type: number, minimum: 1, maximum: 100}
    tier:   {type: string, default: standard}
    owner:  {type: string}
`)
	out, errOut, err = streams("kind", "apply", "-f", v3, "--ack", m[1])
	require.Error(t, err)
	require.Contains(t, errOut, "needs an acknowledgement: /spec/owner (required-property-added)")
	errLine := errOut[strings.Index(errOut, "error:"):]
	require.NotContains(t, errLine, "/spec/size", "a decided change is not asked again: %s", errLine)
	require.NotContains(t, errOut, "earlier (since", "earlier rows are folded")
	require.Contains(t, errOut, "2 earlier findings decided since revision 1 (use -o json to see them)")
	require.Contains(t, errOut, "warning: --ack "+m[1]+" is not needed: /spec/size (type-widened) was decided by an earlier registration")
	require.Empty(t, out)

	out, errOut, err = streams("kind", "apply", "-f", v3, "--ack", "/spec/owner=newWritesOnly")
	require.NoError(t, err, errOut)
	require.Contains(t, out, "registered revision 3 (against revisions [2 1], 1 object scanned)")
	require.Contains(t, out, "2 earlier findings decided since revision 1")
	require.Equal(t, 1, strings.Count(out, "/spec/owner"), "the new change is one row: %s", out)
	require.NotContains(t, out, "/spec/size", "the earlier rows are folded: %s", out)
	require.Empty(t, errOut)

	// kind revisions counts each revision's own changes.
	require.Regexp(t, `(?m)^3 .* 1\s*$`, c.run("kind", "revisions", "Database"), "revision 3 made one change")

	// -o json keeps every finding, the earlier ones marked.
	js := c.run("kind", "revisions", "Database", "-o", "json")
	require.Contains(t, js, `"earlier": true`)
}

// TestCLIMessagesSayFlags (issue 29, finding 8): errors name flags once, and mistakes get the
// way out — the nearest flag, the -f a file wants, the kind a plural names.
func TestCLIMessagesSayFlags(t *testing.T) {
	t.Parallel()
	c := newCLIEnv(t)
	fails := func(args ...string) string {
		t.Helper()
		out, errOut, err := cliStreams(t, c.env, args...)
		require.Error(t, err, "strata %s must fail: %s", strings.Join(args, " "), out)
		require.NotContains(t, errOut, "invalid request:", "strata %s", strings.Join(args, " "))
		return errOut
	}
	c.run("org", "create", "acme")

	// Did you mean, for flags.
	require.Contains(t, fails("node", "create", "web01", "--org", "acme", "--lable", "env=prod"), "unknown flag: --lable; did you mean --label?")
	require.Contains(t, fails("node", "list", "--sel", "a=b"), "did you mean --selector?")
	require.Contains(t, fails("node", "list", "--zzzzzz"), "`strata node list --help` lists its flags")

	// A file given where -f takes it.
	kindFile := c.write("database.yaml", "kind: Cache\nscope: org\nschema:\n  type: object\n  properties:\n    engine: {type: string}\n")
	require.Contains(t, fails("kind", "apply", kindFile), "did you mean `strata kind apply -f "+kindFile+"`?")
	require.Contains(t, fails("pillar", "set", "apache", "--org", "acme", c.write("p.json", `{"a": 1}`)),
		"did you mean `strata pillar set apache --org acme -f "+filepath.Join(c.dir, "p.json")+"`?")

	// Plural kind names.
	c.run("kind", "apply", "-f", kindFile)
	c.run("apply", "-f", c.write("sessions.yaml", "kind: Cache\nmetadata: {name: sessions}\nspec: {engine: redis}\n"), "--org", "acme")
	require.Contains(t, c.run("get", "caches", "--org", "acme"), "sessions")
	require.Contains(t, c.run("get", "Caches", "sessions", "--org", "acme", "-o", "json"), `"kind": "Cache"`)
	c.run("node", "create", "web01", "--org", "acme")
	require.Contains(t, c.run("get", "nodes"), "web01")

	// pillar import names its flags.
	c.write("plain/top.sls", "base:\n  'web01':\n    - common\n")
	c.write("plain/common.sls", "a: 1\n")
	errOut := fails("pillar", "import", filepath.Join(c.dir, "plain"))
	require.Contains(t, errOut, "give --org ORG")
	require.NotContains(t, errOut, "name the org")
	tree := filepath.Join(c.dir, "tree")
	c.write("tree/top.sls", "base:\n  'web01':\n    - common\n")
	c.write("tree/common.sls", "a: {{ grains['id'] }}\n")
	errOut = fails("pillar", "import", tree, "--org", "acme")
	require.Contains(t, errOut, "1 thing in the tree cannot be imported faithfully")
	require.Contains(t, errOut, "--skip-unsupported")
	require.NotContains(t, errOut, "skipUnsupported")

	// Each sentence once; scope errors show the grammar.
	errOut = fails("org", "create", "Bad_Name")
	require.Equal(t, 1, strings.Count(errOut, "must be 1-63 lower-case alphanumerics"), errOut)
	require.Contains(t, errOut, "/metadata/name: ")
	errOut = fails("node", "list", "-l", "a in")
	require.Equal(t, 1, strings.Count(errOut, `invalid label selector "a in"`), errOut)
	require.Contains(t, errOut, "-l/--selector: ")
	errOut = fails("token", "create", "ci", "--scope", "bogus")
	require.Equal(t, 1, strings.Count(errOut, `scope "bogus"`), errOut)
	require.Contains(t, errOut, "--scope: ")
	require.Contains(t, errOut, "for example admin, orgs:read:acme")
	require.Contains(t, fails("token", "create", "ci", "--scope", "pillars:read:nosuch/x"), "for example pillars:read:org/acme")
	require.Contains(t, fails("token", "create", "ci"), "give at least one --scope")
	// Body members set from flags are named as the flags; written in a file, as pointers.
	require.Contains(t, fails("group", "--org", "acme", "create", "g", "--node-selector", "a in"), "error: --node-selector: invalid label selector")
	require.Contains(t, fails("node", "create", "web09", "--org", "nosuch"), "\n  --org: org \"nosuch\" does not exist")
	require.Contains(t, fails("node", "create", "web09", "--org", "acme", "--label", "Bad Key!=x"), "error: --label: invalid label key")
	require.Contains(t, fails("apply", "-f", c.write("n.yaml", "kind: Node\nmetadata: {name: w9}\nspec: {org: nosuch}\n")), "\n  /spec/org: org \"nosuch\" does not exist")
	errOut = fails("pillar", "set", "app", "--org", "acme", "-f", c.write("bad.json", `{"a":`))
	require.Equal(t, 1, strings.Count(errOut, "error:"), errOut)
	require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %s", errOut)

	// A failed restore does not first announce "0 tables restored".
	_, errOut, err := cliStreams(t, c.env, "backup", "restore", filepath.Join(c.dir, "nope.backup"), "--data-dir", filepath.Join(c.dir, "restored"))
	require.Error(t, err)
	require.NotContains(t, errOut, "tables restored")
	require.Contains(t, errOut, "error:")
}
