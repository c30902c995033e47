package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/pgtest"
)

// trickyPillar holds what a careless YAML or JSON round trip changes: YAML 1.1 words and
// numbers kept as strings, a merge key and a value key, Jinja braces, multi-line and
// unicode text, a big integer, null and an empty string.
const trickyPillar = `{"apache": {"port": 80, "enabled": true, "mode": "on", "answer": "yes", "timeout": "1:30",
  "workers": "010", "ratio": 1.5, "tiny": 0.0000001, "big": 12345678901234567890, "motd": "line one\nline two\n",
  "merge": {"<<": "="}, "tmpl": "{{ grains.id }}", "empty": "", "nil": null, "tilde": "~",
  "list": [1, "yes", {"a": "b"}], "unicode": "café ☕", "lead": " x", "hash": "a #b", "colon": "a: b"}}`

// TestPillarRoundTrips (issue 29, findings 1 and 3) through the real binary: the answer of
// `pillar get -o json` and of `-o yaml` stored back with `pillar set -f`, and `pillar edit`
// with an EDITOR that changes nothing but a comment, leave the render byte-identical (before,
// set stored the whole envelope); an envelope for another target or category is refused
// naming both; a YAML file gives the same row through set as through import; a YAML syntax
// error names file:line:column; `pillar restore` prints the new revision; an edit that
// loses a race keeps the edited file. Seen failing before the fix (the envelope stored as the
// pillar; unknown command "edit" and "restore").
func TestPillarRoundTrips(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabaseURL(t)
	token := "strata_" + strings.Repeat("roundTripTokenXY", 3)
	s := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--database-url", url, "--data-dir", dataDir(t))
	// TMPDIR: pillar edit writes its file there, and keeps it when the edit is not stored
	// (as the races below check): in the test's own directory, not the machine's /tmp.
	env := []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + token, "TMPDIR=" + t.TempDir()}
	dir := t.TempDir()
	runEnv := func(extra []string, args ...string) string {
		t.Helper()
		out, errOut, err := cliStreams(t, append(slicesClone(env), extra...), args...)
		require.NoError(t, err, "strata %s: %s%s", strings.Join(args, " "), out, errOut)
		return out
	}
	run := func(args ...string) string { t.Helper(); return runEnv(nil, args...) }
	fail := func(extra []string, args ...string) string {
		t.Helper()
		out, errOut, err := cliStreams(t, append(slicesClone(env), extra...), args...)
		require.Error(t, err, "strata %s: %s", strings.Join(args, " "), out)
		return errOut
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o700))
		return p
	}
	revision := func() int {
		var p struct{ Revision int }
		require.NoError(t, json.Unmarshal([]byte(run("pillar", "get", "apache", "--node", "web01", "-o", "json")), &p))
		return p.Revision
	}

	run("org", "create", "acme")
	run("node", "create", "web01", "--org", "acme")
	run("pillar", "set", "apache", "--node", "web01", "-f", write("apache.json", trickyPillar))
	// The render as Salt gets it, byte for byte, and as the CLI prints it.
	serverRender := func() string {
		t.Helper()
		req, err := http.NewRequest("GET", s.url+"/v1/nodes/web01/pillar", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode, string(b))
		return string(b)
	}
	wire := serverRender()
	require.Contains(t, wire, `12345678901234567890`)
	render := run("pillar", "render", "web01", "-o", "json")
	require.Contains(t, render, `"timeout": "1:30"`)
	require.Contains(t, render, `"big": 12345678901234567890`, "render -o json keeps the server's digits")
	same := func() {
		t.Helper()
		require.Equal(t, wire, serverRender())
		require.Equal(t, render, run("pillar", "render", "web01", "-o", "json"))
	}

	// get -o json → set -f: the data, not the envelope.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rt.json"), []byte(run("pillar", "get", "apache", "--node", "web01", "-o", "json")), 0o600))
	run("pillar", "set", "apache", "--node", "web01", "-f", filepath.Join(dir, "rt.json"))
	same()
	require.Equal(t, 2, revision())

	// get -o yaml → set -f, through a file and through stdin.
	yml := run("pillar", "get", "apache", "--node", "web01", "-o", "yaml")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rt.yaml"), []byte(yml), 0o600))
	run("pillar", "set", "apache", "--node", "web01", "-f", filepath.Join(dir, "rt.yaml"))
	same()
	require.Equal(t, 3, revision())

	// pillar edit with an EDITOR that only adds a comment: a new revision, the same render.
	editor := write("comment.sh", "#!/bin/sh\necho '# looked at it' >> \"$1\"\n")
	runEnv([]string{"EDITOR=" + editor}, "pillar", "edit", "apache", "--node", "web01")
	same()
	require.Equal(t, 4, revision())
	// An EDITOR that saves nothing new stores nothing.
	runEnv([]string{"EDITOR=true"}, "pillar", "edit", "apache", "--node", "web01")
	require.Equal(t, 4, revision())
	// An EDITOR that changes a value.
	editor = write("port.sh", "#!/bin/sh\nsed -i 's/port: 80$/port: 81/' \"$1\"\n")
	runEnv([]string{"EDITOR=" + editor}, "pillar", "edit", "apache", "--node", "web01")
	require.Contains(t, run("pillar", "render", "web01", "-o", "json"), `"port": 81`)
	require.Equal(t, 5, revision())

	// An envelope for another category or target is refused, naming both; nothing stored.
	msg := fail(nil, "pillar", "set", "nginx", "--node", "web01", "-f", filepath.Join(dir, "rt.json"))
	require.Contains(t, msg, "node/web01 apache")
	require.Contains(t, msg, "node/web01 nginx")
	require.Contains(t, msg, "strata pillar set apache --node web01 -f "+filepath.Join(dir, "rt.json"), "the way out")
	msg = fail(nil, "pillar", "set", "apache", "--org", "acme", "-f", filepath.Join(dir, "rt.yaml"))
	require.Contains(t, msg, "node/web01 apache")
	require.Contains(t, msg, "org/acme apache")
	require.Contains(t, fail(nil, "pillar", "get", "nginx", "--node", "web01"), "has no pillar")

	// pillar restore REVISION (the REVISION column of history) prints the new revision and
	// brings back that revision's data.
	require.Regexp(t, `(?m)^\d+\s+4\s+`, run("pillar", "history", "apache", "--node", "web01"))
	out := run("pillar", "restore", "apache", "--node", "web01", "4")
	require.Contains(t, out, "node/web01 apache restored from revision 4 as revision 6")
	same()
	require.Equal(t, 6, revision())
	require.Contains(t, fail(nil, "pillar", "restore", "apache", "--node", "web01", "99"), "has no revision 99")

	// A YAML file: the same row through set as through import.
	sls := "ntp:\n  servers: [a.pool, b.pool]\n  iburst: yes\n  minpoll: 010\n  offset: 1:30\n  ratio: 1e3\n  base: &b {x: 1}\n  copy:\n    <<: *b\n    y: 2\n"
	run("pillar", "set", "ntp", "--node", "web01", "-f", write("ntp.sls", sls))
	write("tree/top.sls", "base:\n  '*':\n    - ntp\n")
	write("tree/ntp.sls", sls)
	run("pillar", "import", filepath.Join(dir, "tree"))
	data := func(args ...string) string {
		var p struct{ Data json.RawMessage }
		require.NoError(t, json.Unmarshal([]byte(run(append([]string{"pillar", "get", "ntp", "-o", "json"}, args...)...)), &p))
		return string(p.Data)
	}
	require.JSONEq(t, data("--global"), data("--node", "web01"))
	require.JSONEq(t, `{"ntp":{"servers":["a.pool","b.pool"],"iburst":true,"minpoll":10,"offset":90,"ratio":"1e3","base":{"x":1},"copy":{"x":1,"y":2}}}`, data("--node", "web01"))
	// ... also from stdin (YAML, as it is not a JSON object).
	_, errOut, err := cliStdin(t, env, sls, "pillar", "set", "ntp", "--org", "acme", "-f", "-")
	require.NoError(t, err, errOut)
	require.JSONEq(t, data("--global"), data("--org", "acme"))

	// A YAML syntax error names file:line:column.
	bad := write("bad.yaml", "ntp:\n  servers: a: b\n")
	msg = fail(nil, "pillar", "set", "ntp", "--node", "web01", "-f", bad)
	require.Contains(t, msg, bad+":2:13: YAML syntax error: mapping values are not allowed")

	// An edit that loses a race: someone stores the row while the editor is open. Nothing is
	// stored, the message says so and where the edit is kept, and the kept file holds it.
	editor = write("race.sh", fmt.Sprintf("#!/bin/sh\n%q pillar set apache --node web01 -f %q >/dev/null\nsed -i 's/port: 80$/port: 82/' \"$1\"\n",
		binary, write("other.json", `{"apache": {"port": 90}}`)))
	before := revision()
	msg = fail([]string{"EDITOR=" + editor}, "pillar", "edit", "apache", "--node", "web01")
	require.Contains(t, msg, "changed while you edited it")
	kept := regexp.MustCompile(`kept in (\S+\.yaml)`).FindStringSubmatch(msg)
	require.NotNil(t, kept, msg)
	t.Cleanup(func() { os.Remove(kept[1]) })
	b, err := os.ReadFile(kept[1])
	require.NoError(t, err)
	require.Contains(t, string(b), "port: 82")
	require.Equal(t, before+1, revision(), "only the concurrent set was stored")
	require.Contains(t, run("pillar", "render", "web01", "-o", "json"), `"port": 90`)

	// An edit the server refuses is kept too, and the problem names the kept file's line
	// and column.
	editor = write("broken.sh", "#!/bin/sh\nprintf 'apache:\\n  port: 80: 81\\n' > \"$1\"\n")
	msg = fail([]string{"EDITOR=" + editor}, "pillar", "edit", "apache", "--node", "web01")
	kept = regexp.MustCompile(`kept in (\S+\.yaml)`).FindStringSubmatch(msg)
	require.NotNil(t, kept, msg)
	t.Cleanup(func() { os.Remove(kept[1]) })
	require.Contains(t, msg, kept[1]+":2:11: YAML syntax error")
	require.FileExists(t, kept[1])

	// The API's own answer is unwrapped as well (a secret category's adds "secret").
	req, err := http.NewRequest("GET", s.url+"/v1/nodes/web01/pillars/apache", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	run("pillar", "set", "apache", "--node", "web01", "-f", write("api.json", string(answer)))
	var row struct{ Data json.RawMessage }
	require.NoError(t, json.Unmarshal([]byte(run("pillar", "get", "apache", "--node", "web01", "-o", "json")), &row))
	require.JSONEq(t, `{"apache":{"port":90}}`, string(row.Data))

	// A JSON syntax error names file:line:column too.
	badJSON := write("bad.json", "{\n  \"apache\": {\"port\" 80}\n}\n")
	require.Contains(t, fail(nil, "pillar", "set", "apache", "--node", "web01", "-f", badJSON), badJSON+":2:21: not JSON: invalid character")
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// cliStdin runs the strata binary with stdin and returns stdout and stderr.
func cliStdin(t *testing.T, env []string, stdin string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}
