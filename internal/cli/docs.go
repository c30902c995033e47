package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"
)

func init() {
	extraCommands = append(extraCommands, newDocsCmd)
}

// newDocsCmd is `strata docs man DIR`: a man page per command, generated from the command
// tree itself (cobra's generator), so the pages say exactly what --help says and can never
// fall behind it. Packagers run it at build time; users can run it against their own
// binary.
func newDocsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "docs", Short: "Generate documentation from the command tree (man pages)"}
	man := &cobra.Command{
		Use:   "man DIR",
		Short: "Write a man page (section 1) for every command into DIR",
		Long: `Write a man page for every command into DIR (created if missing): strata.1,
strata-node.1, strata-node-create.1 and so on, each with the command's synopsis, flags,
examples and SEE ALSO links. Existing pages of the same names are replaced. The date is
today's, or SOURCE_DATE_EPOCH's for reproducible builds.`,
		Example: `  strata docs man ./man && man -l ./man/strata-node-create.1
  sudo strata docs man /usr/local/share/man/man1 && man strata-state-delete`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			root := builtInTree()
			root.InitDefaultCompletionCmd()
			var n int
			var walk func(c *cobra.Command)
			walk = func(c *cobra.Command) {
				// The footer would otherwise name the generator and today's date in every page.
				c.DisableAutoGenTag = true
				// The generator reads these texts as Markdown, where <data-dir> is an HTML
				// tag that would vanish from the page.
				c.Short, c.Long = escapeMarkdown(c.Short), escapeMarkdown(c.Long)
				c.LocalFlags().VisitAll(func(f *pflag.Flag) { f.Usage = escapeMarkdown(f.Usage) })
				if c.IsAvailableCommand() || c == root {
					n++
				}
				for _, sub := range c.Commands() {
					walk(sub)
				}
			}
			walk(root)
			header := &doc.GenManHeader{Section: "1", Source: "strata " + Version, Manual: "strata manual"}
			if err := doc.GenManTree(root, header, dir); err != nil {
				return err
			}
			abs, err := filepath.Abs(dir)
			if err != nil {
				abs = dir
			}
			fmt.Fprintf(g.stdout, "%d man pages written to %s\n", n, abs)
			return nil
		},
	}
	cmd.AddCommand(man)
	return cmd
}

// builtInTree is the command tree as it is without any STRATA_* variable: the defaults a
// page shows are then the built-in ones, not the generating machine's (its data dir, its
// server, whether it had a token).
func builtInTree() *cobra.Command {
	saved := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "STRATA_") {
			saved[k] = v
			os.Unsetenv(k)
		}
	}
	defer func() {
		for k, v := range saved {
			os.Setenv(k, v)
		}
	}()
	return newRoot(io.Discard, io.Discard)
}

// escapeMarkdown keeps angle brackets (<data-dir>, <token>) as text when cobra's man
// generator renders a description as Markdown.
func escapeMarkdown(s string) string {
	return strings.NewReplacer("<", `\<`, ">", `\>`).Replace(s)
}
