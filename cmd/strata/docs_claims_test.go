package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDocsSayWhatHappens (issue 29, finding 9): the docs misled where their blocks ran but
// their words did not hold. Each claim the docs now make is checked here through the real
// binary: kinds.md's watch prints a table and -o json NDJSON; salt.md's token command is the
// one `strata salt config` prints; the typed-category example (salt.md and
// examples/ntp-formula.yaml, one text) gives the pillar a formula reads (ntp:servers); an
// unknown minion gets {} from strata, a NULL row from node_pillars with unknownMinion error
// (Salt's "non-dict types"), and the global rows from an exported tree's '*'.
func TestDocsSayWhatHappens(t *testing.T) {
	t.Parallel()
	c := newCLIEnv(t)
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	token := strings.TrimPrefix(c.env[1], "STRATA_TOKEN=")
	salt, err := os.ReadFile(filepath.Join(root, "docs/salt.md"))
	require.NoError(t, err)
	kinds, err := os.ReadFile(filepath.Join(root, "docs/kinds.md"))
	require.NoError(t, err)
	c.run("org", "create", "acme")
	c.run("node", "create", "web01", "--org", "acme")

	// kinds.md: watch prints a table; -o json prints NDJSON.
	require.Contains(t, string(kinds), "strata watch Database --org acme               # ADDED/MODIFIED/DELETED as a table")
	require.Contains(t, string(kinds), "strata watch Database --org acme -o json       # the same events as NDJSON")
	firstLine := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, args...)
		cmd.Env = append(os.Environ(), c.env...)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		sc := bufio.NewScanner(out)
		require.True(t, sc.Scan(), "strata %s prints", strings.Join(args, " "))
		return sc.Text()
	}
	require.True(t, strings.HasPrefix(firstLine("watch", "node"), "EVENT"), "a table")
	var ev struct{ Type string }
	require.NoError(t, json.Unmarshal([]byte(firstLine("watch", "node", "-o", "json")), &ev), "NDJSON")
	require.Equal(t, "ADDED", ev.Type)

	// salt.md's token command is the one strata salt config prints.
	docToken := regexp.MustCompile(`strata token create salt-master ((?:--scope '[^']+' ?)+)`).FindSubmatch(salt)
	require.NotNil(t, docToken, "salt.md gives the token command")
	require.Contains(t, c.run("salt", "config"), "token create salt-master "+strings.TrimSpace(string(docToken[1])))

	// The typed-category example: one text in salt.md and examples/, read as ntp:servers.
	example, err := os.ReadFile(filepath.Join(root, "examples/ntp-formula.yaml"))
	require.NoError(t, err)
	kindText := string(example[strings.Index(string(example), "kind: NtpFormula"):])
	require.Contains(t, string(salt), "cat > ntp-formula.yaml <<'YAML'\n"+kindText+"YAML\n", "salt.md's heredoc is examples/ntp-formula.yaml")
	c.run("kind", "apply", "-f", filepath.Join(root, "examples/ntp-formula.yaml"))
	c.run("pillar", "category", "set", "ntp", "--kind", "NtpFormula")
	c.run("pillar", "set", "ntp", "--org", "acme", "-f", c.write("ntp.json", `{"ntp": {"servers": ["0.pool.ntp.org", "1.pool.ntp.org"]}}`))
	var render struct {
		NTP struct {
			Servers []string `json:"servers"`
			Iburst  *bool    `json:"iburst"`
		} `json:"ntp"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.run("pillar", "render", "web01", "-o", "json")), &render))
	require.Equal(t, []string{"0.pool.ntp.org", "1.pool.ntp.org"}, render.NTP.Servers, "the formula reads ntp:servers")
	require.NotNil(t, render.NTP.Iburst)
	require.True(t, *render.NTP.Iburst, "the kind's default is stored")
	_, errOut, err := cliStreams(t, c.env, "pillar", "set", "ntp", "--node", "web01", "-f", c.write("empty.json", `{"ntp": {"servers": []}}`))
	require.Error(t, err)
	require.Contains(t, errOut, "/ntp/servers", "the refusal names the field salt.md names")

	// Unknown minions: strata answers {}, an exported tree's '*' the global rows.
	c.run("pillar", "set", "motd", "--global", "-f", c.write("motd.json", `{"motd": "hello"}`))
	require.JSONEq(t, `{}`, callAs(t, c.s.url, token, "GET", "/v1/salt/pillar/web99", "").body)
	tree := filepath.Join(c.dir, "tree")
	c.run("pillar", "export", tree)
	top, err := os.ReadFile(filepath.Join(tree, "top.sls"))
	require.NoError(t, err)
	require.Regexp(t, `(?m)^  ["']\*["']:\n(    - .*\n)*    - "?strata\.global\.motd"?$`, string(top), "the tree's '*' gives every minion the global rows")
	require.Contains(t, string(salt), "gives such a minion `{}`")

	// With unknownMinion error: node_pillars answers one NULL row (Salt's "non-dict types"),
	// http_json says why.
	c.run("pillar", "settings", "set", "--unknown-minion", "error")
	psql := exec.Command("psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", c.url, "-c", "SELECT count(*), bool_and(pillar IS NULL) FROM strata.node_pillars('web99')")
	var pgErr strings.Builder
	psql.Stderr = &pgErr
	out, err := psql.Output()
	require.NoError(t, err, pgErr.String())
	require.Equal(t, "1|t", strings.TrimSpace(string(out)), "one NULL row")
	require.Contains(t, pgErr.String(), "WARNING:  node_pillars(web99): unknown minion web99", "the reason, as salt.md says, in a WARNING")
	require.Contains(t, callAs(t, c.s.url, token, "GET", "/v1/salt/pillar/web99", "").body, `minion \"web99\" is not a node in strata`)
	require.Contains(t, string(salt), "Cannot update using non-dict types")
	require.Contains(t, string(salt), `minion "web99" is not a node in strata`)
}
