package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPillarTreeSymlinks is finding 8(e) of issue 27, through the real binary: `strata
// pillar import DIR` followed symbolic links in the tree (a key.sls pointing at ~/.ssh/id_rsa
// uploaded the key as a row, or quoted it in the error), `strata pillar export --force`
// wrote through links it found in DIR (overwriting their targets), and export checked that
// DIR was empty before creating it, a window in which links could be planted. Now links in
// an import tree are refused, naming the path, unless --follow-symlinks; export creates each
// file exclusively and never through a link, replaces (with --force) a link by a file, and
// refuses a DIR or a directory inside it that is a link. Seen failing before the fix (the
// key uploaded, the link's target overwritten).
func TestPillarTreeSymlinks(t *testing.T) {
	t.Parallel()
	c := newCLIEnv(t)
	c.run("org", "create", "acme")
	outside := t.TempDir()
	const keyMaterial = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ-private"
	key := filepath.Join(outside, "id_rsa")
	require.NoError(t, os.WriteFile(key, []byte("-----BEGIN OPENSSH PRIVATE KEY-----\n"+keyMaterial+"\n-----END OPENSSH PRIVATE KEY-----\n"), 0o600))

	globalRows := func() []any {
		var rows struct {
			Items []any `json:"items"`
		}
		require.NoError(t, json.Unmarshal([]byte(c.run("-o", "json", "pillar", "list", "--global")), &rows))
		return rows.Items
	}

	// A linked file in the tree.
	tree := filepath.Join(t.TempDir(), "tree")
	require.NoError(t, os.MkdirAll(tree, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(tree, "top.sls"), []byte("base:\n  '*':\n    - common\n    - key\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(tree, "common.sls"), []byte("ntp: pool.example\n"), 0o600))
	require.NoError(t, os.Symlink(key, filepath.Join(tree, "key.sls")))
	for _, dry := range []bool{true, false} {
		args := []string{"pillar", "import", tree, "-q"}
		if dry {
			args = append(args, "--dry-run")
		}
		out, errOut, err := cliStreams(t, c.env, args...)
		require.Error(t, err, out)
		require.Contains(t, errOut, filepath.Join(tree, "key.sls"))
		require.Contains(t, errOut, "symbolic link")
		require.Contains(t, errOut, "--follow-symlinks")
		require.NotContains(t, out+errOut, keyMaterial)
	}
	require.Empty(t, globalRows(), "nothing was imported")

	// A linked directory in the tree.
	linkedDir := filepath.Join(t.TempDir(), "tree2")
	require.NoError(t, os.MkdirAll(linkedDir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(linkedDir, "top.sls"), []byte("base:\n  '*':\n    - sub.app\n"), 0o600))
	elsewhere := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(elsewhere, "app.sls"), []byte("app: {port: 80}\n"), 0o600))
	require.NoError(t, os.Symlink(elsewhere, filepath.Join(linkedDir, "sub")))
	_, errOut, err := cliStreams(t, c.env, "pillar", "import", linkedDir, "-q")
	require.Error(t, err)
	require.Contains(t, errOut, filepath.Join(linkedDir, "sub"))
	require.Contains(t, errOut, "symbolic link")
	require.Empty(t, globalRows())

	// --follow-symlinks is the operator's explicit choice: links are followed, a directory
	// loop is refused instead of walked forever.
	require.NoError(t, os.Symlink(linkedDir, filepath.Join(elsewhere, "loop")))
	_, errOut, err = cliStreams(t, c.env, "pillar", "import", linkedDir, "-q", "--follow-symlinks")
	require.Error(t, err)
	require.Contains(t, errOut, "loop")
	require.NoError(t, os.Remove(filepath.Join(elsewhere, "loop")))
	c.run("pillar", "import", linkedDir, "-q", "--follow-symlinks")
	require.Len(t, globalRows(), 1)

	// Export: a fresh DIR, owner-only files.
	exp := filepath.Join(t.TempDir(), "exp")
	c.run("pillar", "export", exp, "-q")
	fi, err := os.Lstat(filepath.Join(exp, "top.sls"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode())

	// --force replaces a link planted in DIR by a file; the link's target is untouched.
	victim := filepath.Join(outside, "authorized_keys")
	require.NoError(t, os.WriteFile(victim, []byte("ssh-ed25519 AAAA mine\n"), 0o600))
	require.NoError(t, os.Remove(filepath.Join(exp, "top.sls")))
	require.NoError(t, os.Symlink(victim, filepath.Join(exp, "top.sls")))
	_, errOut, err = cliStreams(t, c.env, "pillar", "export", exp, "-q")
	require.Error(t, err, "without --force a DIR that is not empty is refused")
	require.Contains(t, errOut, "is not empty")
	c.run("pillar", "export", exp, "-q", "--force")
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, "ssh-ed25519 AAAA mine\n", string(b), "export wrote through a link")
	fi, err = os.Lstat(filepath.Join(exp, "top.sls"))
	require.NoError(t, err)
	require.True(t, fi.Mode().IsRegular(), "the link is replaced by the file")

	// A directory of the tree that is a link is refused, even with --force: nothing is
	// written into its target.
	target := t.TempDir()
	require.NoError(t, os.RemoveAll(filepath.Join(exp, "strata")))
	require.NoError(t, os.Symlink(target, filepath.Join(exp, "strata")))
	_, errOut, err = cliStreams(t, c.env, "pillar", "export", exp, "-q", "--force")
	require.Error(t, err)
	require.Contains(t, errOut, "symbolic link")
	entries, err := os.ReadDir(target)
	require.NoError(t, err)
	require.Empty(t, entries, "export wrote into a linked directory")

	// DIR itself a link (to an empty directory) is refused: the export names a directory,
	// not a link to one.
	empty := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(empty, link))
	_, errOut, err = cliStreams(t, c.env, "pillar", "export", link, "-q")
	require.Error(t, err)
	require.Contains(t, errOut, "symbolic link")
	entries, err = os.ReadDir(empty)
	require.NoError(t, err)
	require.Empty(t, entries)

	// The sync stream: a link at FILE is replaced with --force, refused without it.
	stream := filepath.Join(t.TempDir(), "pillars.ndjson")
	require.NoError(t, os.Symlink(victim, stream))
	_, errOut, err = cliStreams(t, c.env, "pillar", "export", "--format", "ndjson", stream)
	require.Error(t, err)
	require.Contains(t, errOut, "exists")
	c.run("pillar", "export", "--format", "ndjson", stream, "--force")
	b, err = os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, "ssh-ed25519 AAAA mine\n", string(b), "the stream was written through a link")
	fi, err = os.Lstat(stream)
	require.NoError(t, err)
	require.True(t, fi.Mode().IsRegular())
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// TestPillarHistoryShowsImport (issue 27, 8a): `strata pillar history` tells an entry a sync
// import added — claiming actor alice in 2001 — from the installation's own, naming who
// imported it; -o json carries importedBy and importedAt. Seen failing before the fix.
func TestPillarHistoryShowsImport(t *testing.T) {
	t.Parallel()
	c := newCLIEnv(t)
	c.run("pillar", "set", "app", "--global", "-f", c.write("a.json", `{"port": 80}`))
	stream := c.write("s.ndjson", `{"type":"header","version":1}`+"\n"+
		`{"type":"row","target":"global","category":"app","data":{"port":80},"history":[{"revision":1,"old":null,"new":{"port":1},"actor":"alice","at":"2001-02-03T04:05:06Z"}]}`+"\n")
	c.run("pillar", "import", "--format", "ndjson", stream)
	out := c.run("pillar", "history", "app", "--global")
	require.Regexp(t, `(?m)^\S+\s+1\s+alice\s+2001-02-03T04:05:06Z\s+created\s+admin \(tok_\w+\) at \d{4}-`, out)
	var hist struct {
		Items []map[string]any `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.run("-o", "json", "pillar", "history", "app", "--global")), &hist))
	require.Len(t, hist.Items, 2)
	var marked int
	for _, h := range hist.Items {
		if h["actor"] == "alice" {
			require.Contains(t, h["importedBy"], "admin")
			require.NotEmpty(t, h["importedAt"])
			marked++
		} else {
			require.NotContains(t, h, "importedBy")
		}
	}
	require.Equal(t, 1, marked)
}
