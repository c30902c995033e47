package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/pgembed"
)

// TestManPagesForEveryCommand is item 8 of issue 29: `strata docs man DIR` writes one page
// per command of the tree, no more and no fewer, and each page is that command's (its name,
// synopsis and examples). The defaults a page shows are the built-in ones: STRATA_* values
// of the generating machine (a token, a data dir) are not in any page. Not parallel: it
// sets the process environment.
func TestManPagesForEveryCommand(t *testing.T) {
	t.Setenv("STRATA_TOKEN", "strata_manSECRETaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	t.Setenv("STRATA_DATA_DIR", "/srv/packagerSECRET")
	dir := filepath.Join(t.TempDir(), "man1")
	var out, errb bytes.Buffer
	require.Equal(t, 0, Main(context.Background(), []string{"docs", "man", dir}, &out, &errb), errb.String())

	root := newRoot(io.Discard, io.Discard)
	root.InitDefaultCompletionCmd()
	want := map[string]*cobra.Command{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c == root || c.IsAvailableCommand() {
			want[strings.ReplaceAll(c.CommandPath(), " ", "-")+".1"] = c
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	require.Greater(t, len(want), 90)
	require.Contains(t, out.String(), "man pages written to")

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	got := map[string]bool{}
	for _, e := range entries {
		got[e.Name()] = true
		require.Contains(t, want, e.Name(), "a page for a command that is not in the tree")
	}
	for name, c := range want {
		require.True(t, got[name], "no man page for %q", c.CommandPath())
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		page := string(b)
		require.Contains(t, page, ".TH \""+strings.ToUpper(strings.TrimSuffix(name, ".1"))+"\" \"1\"", name)
		require.Contains(t, page, ".SH NAME\n"+strings.TrimSuffix(name, ".1")+" - ", "%s: NAME names the command", name)
		require.Contains(t, page, "\\fB"+c.UseLine(), "%s: the synopsis is the command's", name)
		require.NotContains(t, page, "SECRET", "%s shows the generating machine's environment", name)
		if c.Example != "" {
			require.Contains(t, page, ".SH EXAMPLE", name)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "strata.1"))
	require.NoError(t, err)
	require.Contains(t, string(b), "<data-dir>/admin-token", "angle brackets survive the Markdown renderer")
	require.Contains(t, string(b), `\fB--data-dir\fP="`+pgembed.DefaultDataDir()+`"`, "the built-in default, not STRATA_DATA_DIR's")
}
