package main_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// commandPaths walks `strata … --help` and returns every leaf command ("node list", …).
func commandPaths(t *testing.T, prefix []string) [][]string {
	t.Helper()
	out, errOut, err := cliStreams(t, nil, append(append([]string(nil), prefix...), "--help")...)
	require.NoError(t, err, errOut)
	sect := regexp.MustCompile(`(?s)Available Commands:\n(.*?)\n\n`).FindStringSubmatch(out)
	if sect == nil {
		return [][]string{prefix}
	}
	var paths [][]string
	for _, line := range strings.Split(sect[1], "\n") {
		name := strings.Fields(line)[0]
		if name == "help" || name == "completion" {
			continue
		}
		paths = append(paths, commandPaths(t, append(append([]string(nil), prefix...), name))...)
	}
	return paths
}

// TestOutputContract (issue 16): -o json shapes differed (some lists {"items": …}, others bare
// arrays), explain printed JSON in table mode, version -o json printed text. Every command of
// the CLI is classified here (a new one fails the test until it is): every list prints the
// API's list object with -o json and -o yaml, every single object an object, and table mode
// is never JSON.
func TestOutputContract(t *testing.T) {
	t.Parallel()
	c := newCLIEnv(t)
	url, run, write := c.url, c.run, c.write
	run("org", "create", "acme")
	run("node", "create", "web01", "--org", "acme", "--label", "role=web")
	run("group", "--org", "acme", "create", "web", "--node-selector", "role=web")
	run("pillar", "set", "app", "--org", "acme", "-f", write("a.json", `{"port": 80, "tls": {"on": true}}`))
	run("pillar", "set", "app", "--node", "web01", "-f", write("b.json", `{"port": 8080}`))
	run("kind", "apply", "-f", write("k.yaml", "kind: Database\nscope: org\nschema: {type: object, properties: {size: {type: integer}}}\n"))
	run("apply", "-f", write("o.yaml", "kind: Database\nmetadata: {name: main, org: acme}\nspec: {size: 1}\n"))
	run("project", "create", "net")
	run("state", "push", "net", "default", write("s.json", `{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"l-1","outputs":{},"resources":[]}`))
	c.env = append(c.env, "XDG_CONFIG_HOME="+t.TempDir()) // contexts of this test's own
	run("config", "set-context", "here", "--server", c.s.url)

	lists := map[string][]string{
		"org list":             {"org", "list"},
		"node list":            {"node", "list"},
		"group list":           {"group", "--org", "acme", "list"},
		"group members":        {"group", "--org", "acme", "members", "web"},
		"get":                  {"get", "Database", "--org", "acme"},
		"kind list":            {"kind", "list"},
		"kind revisions":       {"kind", "revisions", "Database"},
		"pillar list":          {"pillar", "list", "--org", "acme"},
		"pillar history":       {"pillar", "history", "app", "--org", "acme"},
		"pillar category list": {"pillar", "category", "list"},
		"project list":         {"project", "list"},
		"state list":           {"state", "list", "net"},
		"state versions":       {"state", "versions", "net", "default"},
		"token list":           {"token", "list"},
		"audit":                {"audit"},
		"migrate status":       {"migrate", "status", "--database-url", url},
		"doctor":               {"doctor", "--database-url", url},
		"config get-contexts":  {"config", "get-contexts"},
	}
	singles := map[string][]string{
		"org get":             {"org", "get", "acme"},
		"node get":            {"node", "get", "web01"},
		"group get":           {"group", "--org", "acme", "get", "web"},
		"kind get":            {"kind", "get", "Database"},
		"pillar get":          {"pillar", "get", "app", "--org", "acme"},
		"pillar render":       {"pillar", "render", "web01"},
		"pillar explain":      {"pillar", "explain", "web01"},
		"pillar settings get": {"pillar", "settings", "get"},
		"pillar category get": {"pillar", "category", "get", "app"},
		"state show":          {"state", "show", "net", "default"},
		"salt config":         {"salt", "config"},
		"version":             {"version"},
		"keys status":         {"keys", "status"},
	}
	// Commands that change something, stream, print a file verbatim or start a server.
	others := []string{"apply", "backup create", "backup restore", "delete", "group add-member", "group annotate", "group create", "group delete",
		"group label", "group remove-member", "keys generate", "keys rotate", "kind apply", "kind diff", "migrate up", "node annotate", "node apply",
		"node create", "node delete", "node label", "node rename", "org annotate", "org create", "org delete", "org label",
		"pillar category delete", "pillar category set", "pillar delete", "pillar export", "pillar import", "pillar set", "pillar settings set", "project backend-config",
		"project create", "project credentials", "project delete", "project encrypt", "salt credentials", "serve", "state lock",
		"state decrypt", "state pull", "state push", "state restore", "state unlock", "token create", "token revoke", "watch"}
	// Contexts (current-context prints a name, as kubectl's), man pages, state delete.
	others = append(others, "config current-context", "config delete-context", "config set-context", "config use-context",
		"docs man", "state delete")
	others = append(others, "pillar edit", "pillar restore") // write a row (TestPillarRoundTrips)
	others = append(others, "openapi")                       // prints the OpenAPI document verbatim (TestOpenAPICommand)
	for _, p := range commandPaths(t, nil) {
		name := strings.Join(p, " ")
		_, isList := lists[name]
		_, isSingle := singles[name]
		require.True(t, isList || isSingle || slices.Contains(others, name), "command %q is not classified in TestOutputContract", name)
	}

	for name, args := range lists {
		for _, format := range []string{"json", "JSON", "yaml"} {
			out := run(append(args, "-o", format)...)
			var v map[string]any
			if format == "yaml" {
				require.NoError(t, yaml.Unmarshal([]byte(out), &v), "%s -o yaml: %s", name, out)
			} else {
				require.NoError(t, json.Unmarshal([]byte(out), &v), "%s -o %s is a JSON object: %s", name, format, out)
			}
			items, ok := v["items"].([]any)
			require.True(t, ok, "%s -o %s: the list object has an items array: %s", name, format, out)
			require.NotEmpty(t, items, "%s: the setup gives every list an item", name)
		}
		table := run(args...)
		require.False(t, json.Valid([]byte(table)), "%s: table mode is a table: %s", name, table)
	}
	for name, args := range singles {
		out := run(append(args, "-o", "json")...)
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &v), "%s -o json is a JSON object: %s", name, out)
		require.NotContains(t, v, "items", name)
		table := run(args...)
		require.False(t, json.Valid([]byte(table)), "%s: table mode is a table: %s", name, table)
	}
	require.Regexp(t, `tls:on\s+true\s+org/acme app`, run("pillar", "explain", "web01"), "explain says where each leaf came from")
	require.Regexp(t, `port\s+8080\s+node/web01 app\s+org/acme app`, run("pillar", "explain", "web01"))
	var pl map[string]any
	require.NoError(t, json.Unmarshal([]byte(run("pillar", "list", "--org", "acme", "-o", "json")), &pl))
	require.NotContains(t, pl["items"].([]any)[0], "data", "a list names categories; it does not say their data is null")
}
