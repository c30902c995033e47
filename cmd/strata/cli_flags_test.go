package main_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCLISpeaksFlags (issue 16): the CLI answers in its own terms. A mistyped subcommand exits
// 1 with suggestions at every level; an unreachable server says how to start or point at
// one; kind names resolve case-insensitively, with the nearest names for a typo and the flag
// to give for a kind of the other scope; server refusals name flags (--cascade), not query
// parameters or paths; pillar targets are named by their flags; -o is case-insensitive; and
// --file, which some commands took, still works beside -f/--filename.
func TestCLISpeaksFlags(t *testing.T) {
	t.Parallel()
	c := newCLIEnv(t)
	env, run, write := c.env, c.run, c.write
	token := strings.TrimPrefix(env[1], "STRATA_TOKEN=")
	fails := func(args ...string) string {
		t.Helper()
		out, errOut, err := cliStreams(t, env, args...)
		require.Error(t, err, "strata %s must fail: %s", strings.Join(args, " "), out)
		require.NotContains(t, errOut, "(HTTP", "strata %s answers in HTTP terms: %s", strings.Join(args, " "), errOut)
		return errOut
	}

	// Mistyped subcommands, at every level.
	require.Contains(t, fails("node", "lsit"), "Did you mean this?\n\tlist")
	require.Contains(t, fails("pillar", "settings", "gte"), "Did you mean this?\n\tget")
	require.Contains(t, fails("kind", "aply"), "Did you mean this?\n\tapply")
	require.Contains(t, fails("nod", "list"), `unknown command "nod" for "strata"`)

	// An unreachable server.
	_, errOut, err := cliStreams(t, []string{"STRATA_SERVER=http://127.0.0.1:1", "STRATA_TOKEN=" + token}, "org", "list")
	require.Error(t, err)
	require.Contains(t, errOut, "cannot reach a strata server at http://127.0.0.1:1")
	require.Contains(t, errOut, "`strata serve`")
	require.Contains(t, errOut, "STRATA_SERVER")

	// Kinds, case-insensitively; the scope's flag.
	run("org", "create", "acme")
	run("node", "create", "db01", "--org", "acme")
	kindFile := write("database.yaml", "kind: Database\nscope: org\nschema:\n  type: object\n  properties:\n    size: {type: integer}\n")
	run("kind", "apply", "--file", kindFile) // the old flag name still works
	run("apply", "-f", write("main.yaml", "kind: database\nmetadata: {name: main, org: acme}\nspec: {size: 1}\n"))
	require.Contains(t, run("get", "DATABASE", "main", "--org", "acme", "-o", "JSON"), `"kind": "Database"`)
	require.Contains(t, fails("get", "Databse", "--org", "acme"), `kind "Databse" is not registered; did you mean Database?`)
	require.Contains(t, fails("get", "Zebra"), "`strata kind list` shows the kinds")
	require.Contains(t, fails("get", "Database"), "kind Database lives in orgs: give --org ORG")
	require.Contains(t, fails("kind", "apply", "-f", write("upper.yaml", "kind: DATABASE\nscope: org\nschema: {type: object}\n")),
		"kind Database exists; names of kinds must differ by more than case")

	// Server refusals in flags.
	errOut = fails("org", "delete", "acme")
	require.Contains(t, errOut, "--cascade")
	require.NotContains(t, errOut, "?cascade")
	errOut = fails("pillar", "set", "app", "--org", "acme", "--node", "db01", "-f", write("p.json", `{"a":1}`))
	require.Contains(t, errOut, "give exactly one pillar target: --global, --org ORG, --org ORG --group GROUP, or --node NODE")
	require.Contains(t, fails("pillar", "get", "app", "--group", "web"), "--group names a group of an org: give --org ORG too")
	run("org", "delete", "acme", "--cascade")
}

// requireFailsWith asserts a CLI failure whose message holds want and speaks in the CLI's
// terms, not HTTP's.
func requireFailsWith(t *testing.T, err error, want string, msgAndArgs ...any) {
	t.Helper()
	require.ErrorContains(t, err, want, msgAndArgs...)
	require.NotContains(t, err.Error(), "(HTTP ", msgAndArgs...)
}
