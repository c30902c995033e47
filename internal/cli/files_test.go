package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
}

// TestSLSFilesSymlinks (issue 27, 8e): a pillar tree is listed without following links —
// a link anywhere in it is an error naming it — unless follow; with follow, a directory
// linked twice is read twice and a loop is an error; DIR itself may be a link (the operator
// named it).
func TestSLSFilesSymlinks(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	tree := filepath.Join(base, "tree")
	writeFile(t, filepath.Join(tree, "top.sls"), "base: {}\n")
	writeFile(t, filepath.Join(tree, "a", "init.sls"), "a: 1\n")
	writeFile(t, filepath.Join(tree, "README"), "not read\n")
	shared := filepath.Join(base, "shared")
	writeFile(t, filepath.Join(shared, "s.sls"), "s: 1\n")

	rels := func(fs []treeFile) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.rel)
		}
		return out
	}
	files, err := slsFiles(tree, false)
	require.NoError(t, err)
	require.Equal(t, []string{"a/init.sls", "top.sls"}, rels(files))

	rootLink := filepath.Join(base, "link-to-tree")
	require.NoError(t, os.Symlink(tree, rootLink))
	files, err = slsFiles(rootLink, false)
	require.NoError(t, err, "DIR as named may be a link")
	require.Equal(t, []string{"a/init.sls", "top.sls"}, rels(files))

	// Even a link the import would not read is refused: the rule is simple to state.
	require.NoError(t, os.Symlink(filepath.Join(base, "nowhere"), filepath.Join(tree, "dangling")))
	_, err = slsFiles(tree, false)
	require.ErrorContains(t, err, filepath.Join(tree, "dangling")+" is a symbolic link")
	require.NoError(t, os.Remove(filepath.Join(tree, "dangling")))

	require.NoError(t, os.Symlink(shared, filepath.Join(tree, "one")))
	require.NoError(t, os.Symlink(shared, filepath.Join(tree, "a", "two")))
	_, err = slsFiles(tree, false)
	require.ErrorContains(t, err, "--follow-symlinks")
	files, err = slsFiles(tree, true)
	require.NoError(t, err)
	require.Equal(t, []string{"a/init.sls", "a/two/s.sls", "one/s.sls", "top.sls"}, rels(files), "a directory linked twice is no loop")

	require.NoError(t, os.Symlink(tree, filepath.Join(shared, "back")))
	_, err = slsFiles(tree, true)
	require.ErrorContains(t, err, "loop")
}

// TestTreeReaderNoFollow: a file swapped for a link after the tree was listed is refused
// when read, and a link in a directory of the path cannot lead out of the tree.
func TestTreeReaderNoFollow(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	tree := filepath.Join(base, "tree")
	writeFile(t, filepath.Join(tree, "top.sls"), "base: {}\n")
	writeFile(t, filepath.Join(tree, "d", "x.sls"), "x: 1\n")
	writeFile(t, filepath.Join(base, "secret", "x.sls"), "PRIVATE\n")
	r, err := openTree(tree, false)
	require.NoError(t, err)
	defer r.close()
	b, err := r.read("d/x.sls")
	require.NoError(t, err)
	require.Equal(t, "x: 1\n", string(b))

	require.NoError(t, os.Remove(filepath.Join(tree, "top.sls")))
	require.NoError(t, os.Symlink(filepath.Join(base, "secret", "x.sls"), filepath.Join(tree, "top.sls")))
	_, err = r.read("top.sls")
	require.ErrorContains(t, err, "is a symbolic link")
	_, err = r.exists("top.sls")
	require.ErrorContains(t, err, "is a symbolic link")

	require.NoError(t, os.RemoveAll(filepath.Join(tree, "d")))
	require.NoError(t, os.Symlink(filepath.Join(base, "secret"), filepath.Join(tree, "d")))
	_, err = r.read("d/x.sls")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "PRIVATE")
	ok, err := r.exists("nodegroups.json")
	require.NoError(t, err)
	require.False(t, ok)
}

// TestExportDir: an export makes DIR (and missing parents) or takes an existing empty one;
// a non-empty one only with force; never a link; files are created owner-only and
// exclusively, so a file that appears meanwhile fails the export instead of being written
// over, and with force a link is replaced, its target untouched.
func TestExportDir(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	nested := filepath.Join(base, "x", "y", "tree")
	e, err := openExportDir(nested, false)
	require.NoError(t, err)
	require.NoError(t, e.write("strata/global/app.sls", []byte("a: 1\n")))
	require.NoError(t, e.close())
	fi, err := os.Stat(filepath.Join(nested, "strata", "global", "app.sls"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	fi, err = os.Stat(filepath.Join(nested, "strata"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	_, err = openExportDir(nested, false)
	require.ErrorContains(t, err, "is not empty")

	empty := filepath.Join(base, "empty")
	require.NoError(t, os.Mkdir(empty, 0o700))
	e, err = openExportDir(empty, false)
	require.NoError(t, err)
	// Something planted after the check is not written over (nor through).
	victim := filepath.Join(base, "victim")
	writeFile(t, victim, "mine")
	require.NoError(t, os.Symlink(victim, filepath.Join(empty, "top.sls")))
	require.ErrorContains(t, e.write("top.sls", []byte("theirs")), "appeared while the export")
	e.abandon()
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, "mine", string(b))

	e, err = openExportDir(empty, true)
	require.NoError(t, err)
	require.NoError(t, e.write("top.sls", []byte("theirs")))
	require.NoError(t, e.close())
	b, err = os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, "mine", string(b))
	fi, err = os.Lstat(filepath.Join(empty, "top.sls"))
	require.NoError(t, err)
	require.True(t, fi.Mode().IsRegular())

	// An abandoned export removes the DIR it made, and only that.
	fresh := filepath.Join(base, "fresh")
	e, err = openExportDir(fresh, false)
	require.NoError(t, err)
	e.abandon()
	_, err = os.Stat(fresh)
	require.ErrorIs(t, err, os.ErrNotExist)

	file := filepath.Join(base, "file")
	writeFile(t, file, "")
	_, err = openExportDir(file, true)
	require.ErrorContains(t, err, "not a directory")
}

// TestCreateExclusive: the sync stream's FILE is new, or with force replaces what is there
// (a link: the link), owner-only; a directory is refused.
func TestCreateExclusive(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	p := filepath.Join(base, "s.ndjson")
	f, err := createExclusive(p, false)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = createExclusive(p, false)
	require.ErrorContains(t, err, "exists")
	victim := filepath.Join(base, "victim")
	writeFile(t, victim, "mine")
	require.NoError(t, os.Remove(p))
	require.NoError(t, os.Symlink(victim, p))
	_, err = createExclusive(p, false)
	require.ErrorContains(t, err, "exists")
	f, err = createExclusive(p, true)
	require.NoError(t, err)
	_, err = f.WriteString("stream")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, "mine", string(b))
	fi, err := os.Lstat(p)
	require.NoError(t, err)
	require.True(t, fi.Mode().IsRegular())
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	_, err = createExclusive(base, true)
	require.ErrorContains(t, err, "is a directory")
}

// TestWritePrivateNeverWritesThroughALink (issue 27, 8e): `state decrypt --out` writes a
// decrypted state, so a link planted at its path is replaced, its target left untouched, and
// a file that was there with a wider mode ends up owner-only.
func TestWritePrivateNeverWritesThroughALink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	writeFile(t, victim, "untouched\n")
	out := filepath.Join(dir, "out.tfstate")
	require.NoError(t, os.Symlink(victim, out))

	require.NoError(t, writePrivate(out, []byte("plain state\n")))
	got, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, "untouched\n", string(got), "the link's target was written through")
	fi, err := os.Lstat(out)
	require.NoError(t, err)
	require.True(t, fi.Mode().IsRegular(), "the link was not replaced by a file")
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	wide := filepath.Join(dir, "wide")
	require.NoError(t, os.WriteFile(wide, []byte("old"), 0o644))
	require.NoError(t, os.Chmod(wide, 0o644))
	require.NoError(t, writePrivate(wide, []byte("new")))
	fi, err = os.Stat(wide)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	got, err = os.ReadFile(wide)
	require.NoError(t, err)
	require.Equal(t, "new", string(got))
}
