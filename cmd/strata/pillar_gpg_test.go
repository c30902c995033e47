package main_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/pgtest"
)

// TestPillarImportGPG (issue 22) imports, through the real binary, a Salt tree holding a
// value encrypted with a real GnuPG key: with --gpg-homedir the CLI decrypts it with gpg and
// the dry run marks its row "(secret)" without printing the plaintext (in table and JSON
// output); then the import stores the value Salt's gpg renderer would serve. Without the
// flag the same tree is refused, naming the block's file and line. gpg must be installed
// (.ci/run installs Debian's gnupg): the test fails rather than skip without it.
func TestPillarImportGPG(t *testing.T) {
	t.Parallel()
	_, err := exec.LookPath("gpg")
	require.NoError(t, err, "Debian's gnupg must be installed (apt-get install gnupg)")
	home, err := os.MkdirTemp("", "g") // short: gpg-agent's socket path has a length limit
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = exec.Command("gpgconf", "--homedir", home, "--kill", "gpg-agent").Run()
		_ = os.RemoveAll(home)
	})
	require.NoError(t, os.Chmod(home, 0o700))
	gpg := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command("gpg", append([]string{"--homedir", home, "--batch"}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		require.NoError(t, cmd.Run(), "gpg %v: %s", args, errOut.String())
		return out.String()
	}
	gpg("", "--passphrase", "", "--quick-gen-key", "strata test <t@example.invalid>", "default", "default", "never")
	const plaintext = "correct-horse-battery-staple"
	armored := gpg(plaintext+"\n", "--armor", "--encrypt", "--trust-model", "always", "-r", "t@example.invalid")

	tree := t.TempDir()
	write := func(name, content string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(tree, name)), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(tree, name), []byte(content), 0o600))
	}
	write("top.sls", "base:\n  '*':\n    - common\n    - db\n")
	write("common.sls", "ntp: pool.example\n")
	block := "    " + strings.ReplaceAll(strings.TrimRight(armored, "\n"), "\n", "\n    ")
	write("db.sls", "#!yaml|gpg\npostgres:\n  user: app\n  password: |\n"+block+"\n")

	url := pgtest.NewDatabaseURL(t)
	token := "strata_" + strings.Repeat("pillarGPGtokenXYZ", 3)
	key := filepath.Join(t.TempDir(), "key")
	_, err = cli(t, nil, "keys", "generate", key)
	require.NoError(t, err)
	s := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--database-url", url, "--data-dir", dataDir(t), "--encryption-key-file", key)
	env := []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + token}

	out, errOut, err := cliStreams(t, env, "pillar", "import", tree, "--gpg-homedir", home, "--dry-run")
	require.NoError(t, err, "%s%s", out, errOut)
	require.Regexp(t, `global\s+db \(secret\)\s+created`, out)
	require.Regexp(t, `global\s+common\s+created`, out, "a row without decrypted values is not marked")
	require.Contains(t, out, "dry run: nothing was changed")
	require.NotContains(t, out+errOut, plaintext)

	out, errOut, err = cliStreams(t, env, "-o", "json", "pillar", "import", tree, "--gpg-homedir", home, "--dry-run")
	require.NoError(t, err, "%s%s", out, errOut)
	require.NotContains(t, out+errOut, plaintext)
	var rep struct {
		Rows []struct {
			Category string `json:"category"`
			Secret   bool   `json:"secret"`
		} `json:"rows"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	secret := map[string]bool{}
	for _, r := range rep.Rows {
		secret[r.Category] = r.Secret
	}
	require.Equal(t, map[string]bool{"common": false, "db": true}, secret)

	// Without the flag: refused at the BEGIN line, nothing imported, as before.
	out, errOut, err = cliStreams(t, env, "pillar", "import", tree, "--dry-run")
	require.Error(t, err)
	require.Contains(t, out+errOut, "db.sls:5")
	require.Contains(t, out+errOut, "PGP-encrypted")

	// The import stores what Salt's gpg renderer serves: the plaintext, its newline removed.
	out, errOut, err = cliStreams(t, env, "pillar", "import", tree, "--gpg-homedir", home)
	require.NoError(t, err, "%s%s", out, errOut)
	require.NotContains(t, out+errOut, plaintext)
	out, errOut, err = cliStreams(t, env, "-o", "json", "pillar", "get", "db", "--global")
	require.NoError(t, err, "%s%s", out, errOut)
	require.Contains(t, out, `"password": "`+plaintext+`"`, "the admin token may read secrets")
	// Stored as a secret: the category is secret, a reader sees the mask, the tables no value.
	require.Regexp(t, `db\s+-\s+yes`, run(t, env, "pillar", "category", "get", "db"))
	var tok struct{ Secret string }
	require.NoError(t, json.Unmarshal([]byte(run(t, env, "-o", "json", "token", "create", "reader", "--scope", "pillars:read:*")), &tok))
	masked := run(t, []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + tok.Secret}, "-o", "json", "pillar", "get", "db", "--global")
	require.Contains(t, masked, `"password": "(secret)"`)
	require.NotContains(t, masked, plaintext)
}

func run(t *testing.T, env []string, args ...string) string {
	t.Helper()
	out, errOut, err := cliStreams(t, env, args...)
	require.NoError(t, err, "strata %s: %s%s", strings.Join(args, " "), out, errOut)
	return out
}
