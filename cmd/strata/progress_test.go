package main_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// progressServer starts strata with org acme and returns the client environment.
func progressServer(t *testing.T) []string {
	t.Helper()
	s, token, _ := stateServer(t)
	env := []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + token}
	_, err := cli(t, env, "org", "create", "acme")
	require.NoError(t, err)
	return env
}

// applyFile writes n node lines, the lines in bad naming an org that does not exist.
func applyFile(t *testing.T, prefix string, n int, bad map[int]bool) string {
	t.Helper()
	var b strings.Builder
	for i := 1; i <= n; i++ {
		org := "acme"
		if bad[i] {
			org = "nope"
		}
		fmt.Fprintf(&b, `{"metadata":{"name":"%s%05d"},"spec":{"org":%q}}`+"\n", prefix, i, org)
	}
	file := filepath.Join(t.TempDir(), "inventory.ndjson")
	require.NoError(t, os.WriteFile(file, []byte(b.String()), 0o600))
	return file
}

// inTerminal runs the strata binary with args on a pseudo-terminal (util-linux script) and
// returns what the terminal showed, stdout and stderr together as a user sees them.
func inTerminal(t *testing.T, env []string, shellCmd string) (string, error) {
	t.Helper()
	script, err := exec.LookPath("script")
	require.NoError(t, err, "progress on a terminal is tested through util-linux script (Debian: bsdutils): install it")
	cmd := exec.Command(script, "-q", "-e", "-c", shellCmd, "/dev/null")
	cmd.Env = append(os.Environ(), append(env, "STRATA_BIN="+binary)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return strings.ReplaceAll(out.String(), "\r\n", "\n"), err
}

var barFrame = regexp.MustCompile(`^\[[= ]{30}\] +(\d+)% (\d+)/(\d+) (\d+) lines applied(?:, (\d+) failed)? [0-9hms]+$`)

// TestProgressOnTerminal: node apply draws a bar of lines the server reported (never of bytes
// sent), its frames always true to their counts, and leaves its last frame on screen above
// the summary, which counts failures apart. From stdin (total unknown) it is a spinner.
func TestProgressOnTerminal(t *testing.T) {
	t.Parallel()
	env := progressServer(t)
	const n = 1500
	file := applyFile(t, "tty", n, map[int]bool{2: true, 700: true, 1499: true})

	out, err := inTerminal(t, env, `"$STRATA_BIN" node apply -f `+file)
	require.Error(t, err, out)
	summary := strings.Index(out, "1500 lines: 3 failed, 1497 applied (1497 created, 0 updated, 0 unchanged)\n")
	require.GreaterOrEqual(t, summary, 0, out)
	frames := strings.Split(out[:strings.LastIndex(out[:summary], "line 2 (tty00002)")], "\r\x1b[K")
	require.Greater(t, len(frames), 1, "a bar was drawn:\n%q", out)
	last := frames[len(frames)-1]
	require.True(t, strings.HasSuffix(last, "\n"), "the last frame is left on screen: %q", last)
	require.Regexp(t, `^\[={30}\] 100% 1500/1500 1497 lines applied, 3 failed [0-9hms]+\n$`, last)
	for _, f := range frames[1:] {
		m := barFrame.FindStringSubmatch(strings.TrimSuffix(f, "\n"))
		require.NotNil(t, m, "frame %q", f)
		pct, _ := strconv.Atoi(m[1])
		cur, _ := strconv.Atoi(m[2])
		done, _ := strconv.Atoi(m[4])
		failed, _ := strconv.Atoi("0" + m[5])
		require.Equal(t, cur*100/n, pct, "the bar shows the lines handled, not bytes: %q", f)
		require.Equal(t, cur, done+failed, "handled = applied + failed: %q", f)
	}
	require.Contains(t, out, "line 700 (tty00700): /spec/org: org \"nope\" does not exist\n")

	// From stdin the total is unknown: a spinner with the counts and the elapsed time.
	stdin := applyFile(t, "spin", 40, map[int]bool{5: true})
	out, err = inTerminal(t, env, `"$STRATA_BIN" node apply -f - < `+stdin)
	require.Error(t, err, out)
	frames = strings.Split(out, "\r\x1b[K")
	require.Regexp(t, `^- 39 lines applied, 1 failed [0-9hms]+\n`, frames[len(frames)-1], "the spinner's last frame stays:\n%q", out)
	require.Contains(t, out, "40 lines: 1 failed, 39 applied (39 created, 0 updated, 0 unchanged)\n")
}

// TestProgressInPipe: into a pipe, progress is a plain line every few seconds, also while
// nothing has been applied yet (it says so), and a last line whose counts are the server's;
// nothing claims lines applied that failed.
func TestProgressInPipe(t *testing.T) {
	t.Parallel()
	env := progressServer(t)
	file := applyFile(t, "pipe", 5, map[int]bool{1: true, 3: true, 5: true})
	cmd := exec.Command(binary, "node", "apply", "-f", file)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.Error(t, cmd.Run())
	require.Equal(t, "5 lines: 3 failed, 2 applied (2 created, 0 updated, 0 unchanged)\n", stdout.String())
	require.Regexp(t, `(?m)^2 lines applied, 3 failed \(5 of 5, 100%, [0-9hms]+\)$`, stderr.String())
	require.NotContains(t, stderr.String(), "5 lines applied")
	require.NotContains(t, stderr.String(), "\r", "no bar is drawn into a pipe")

	// A slow input: the server applies nothing before the batch is complete, and the pipe
	// hears so every few seconds instead of nothing.
	cmd = exec.Command(binary, "node", "apply", "-f", "-")
	cmd.Env = append(os.Environ(), env...)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	errPipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	_, err = io.WriteString(in, `{"metadata":{"name":"slow01"},"spec":{"org":"acme"}}`+"\n")
	require.NoError(t, err)
	lines := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l := <-lines:
		require.Regexp(t, `^0 lines applied \([5-9]s\)$`, l, "a line within a few seconds, counting only what was applied")
	case <-time.After(15 * time.Second):
		t.Fatal("no progress line within 15 s")
	}
	require.NoError(t, in.Close())
	var rest []string
	for l := range lines {
		rest = append(rest, l)
	}
	require.NoError(t, cmd.Wait())
	require.Regexp(t, `^1 lines applied \([0-9hms]+\)$`, rest[len(rest)-1])
}

// TestImportProgress: pillar import counts the rows the server's transaction writes (its
// NDJSON result stream), as "staged" until the summary says the transaction committed; a
// failure after some rows says nothing was imported.
func TestImportProgress(t *testing.T) {
	t.Parallel()
	env := progressServer(t)
	tree := t.TempDir()
	files := map[string]string{
		"top.sls":    "base:\n  '*':\n    - common\n  web01:\n    - web\n  db01:\n    - db\n",
		"common.sls": "a: 1\n",
		"web.sls":    "port: 80\n",
		"db.sls":     "port: 5432\n",
	}
	for name, text := range files {
		require.NoError(t, os.WriteFile(filepath.Join(tree, name), []byte(text), 0o600))
	}

	stdout, stderr, err := cliStreams(t, env, "pillar", "import", tree, "--org", "nosuch")
	require.Error(t, err)
	require.Regexp(t, `(?m)^1 rows staged \(1 of 3, 33%, [0-9hms]+\)$`, stderr, "the global row was written before the node's org was found missing")
	require.Contains(t, stderr, "error: nothing was imported (the import is one transaction, rolled back): invalid node: its org does not exist")
	require.Empty(t, stdout)
	_, err = cli(t, env, "pillar", "get", "common", "--global")
	require.Error(t, err, "rolled back")

	stdout, stderr, err = cliStreams(t, env, "pillar", "import", tree, "--org", "acme")
	require.NoError(t, err, stderr)
	require.Regexp(t, `(?m)^3 rows staged \(3 of 3, 100%, [0-9hms]+\)$`, stderr)
	require.Contains(t, stdout, "imported\n")
	require.Regexp(t, `node/web01\s+web\s+created`, stdout)

	out, err := inTerminal(t, env, `"$STRATA_BIN" pillar import `+tree+` --org acme`)
	require.NoError(t, err, out)
	frames := strings.Split(out, "\r\x1b[K")
	last := frames[len(frames)-1]
	require.Regexp(t, `^\[={30}\] 100% 3/3 3 rows staged [0-9hms]+\n`, last, "the bar stays above the report:\n%q", out)
	require.Regexp(t, `node/web01\s+web\s+unchanged`, last)
}

// TestApplyCountsWhereItStopped: `strata apply` of several documents prints each object as it
// is applied and, when one fails, says how many were applied, which failed and how many were
// not tried.
func TestApplyCountsWhereItStopped(t *testing.T) {
	t.Parallel()
	env := progressServer(t)
	file := filepath.Join(t.TempDir(), "nodes.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`kind: Node
metadata: {name: ap01}
spec: {org: acme}
---
kind: Node
metadata: {name: ap02}
spec: {org: nope}
---
kind: Node
metadata: {name: ap03}
spec: {org: acme}
`), 0o600))
	stdout, stderr, err := cliStreams(t, env, "apply", "-f", file)
	require.Error(t, err)
	require.Regexp(t, `^Node/ap01 applied \(resourceVersion \d+, schema revision \d+\)\n$`, stdout)
	require.Contains(t, stderr, "error: Node/ap02 (document 2 of 3): ")
	require.True(t, strings.HasSuffix(stderr, "\n1 applied, 1 failed, 1 not tried\n"), stderr)
	_, err = cli(t, env, "node", "get", "ap03")
	require.Error(t, err, "not tried")
}
