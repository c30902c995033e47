package cli

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/client"
)

func init() {
	extraCommands = append(extraCommands, newNodeCmd, newGroupCmd)
}

func newNodeCmd(g *globals) *cobra.Command {
	var org string
	return newKindCmd(g, kindCLI{
		noun: "node", plural: "nodes", kind: "Node",
		specFlags: func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&org, "org", "", "the org the node belongs to (spec.org)")
		},
		spec: func() (map[string]any, error) {
			if org == "" {
				return map[string]any{}, nil
			}
			return map[string]any{"org": org}, nil
		},
		extra: func(g *globals, _ *string) []*cobra.Command {
			return []*cobra.Command{newNodeApplyCmd(g), newNodeRenameCmd(g)}
		},
	})
}

// newNodeApplyCmd streams an NDJSON inventory to POST /v1/nodes:apply, drawing progress on
// stderr, and prints the failed lines and the summary.
func newNodeApplyCmd(g *globals) *cobra.Command {
	var file string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or update many nodes from an NDJSON file (one node per line; - for stdin)",
		Long: "Each line is a node object, e.g.\n" +
			`  {"metadata":{"name":"web01","labels":{"env":"prod"}},"spec":{"org":"acme"},"groups":["web"]}` + "\n" +
			"A line's \"groups\", when present, is the node's complete list of static group memberships.\n" +
			"Applying the same file twice changes nothing the second time. Bad lines are reported; the good ones are applied.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var in io.Reader = os.Stdin
			var size int64
			if file != "-" {
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				defer f.Close()
				if st, err := f.Stat(); err == nil {
					size = st.Size()
				}
				in = f
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			var sent atomic.Int64
			counted := &countingReader{r: in, n: &sent}
			var done int64
			var failed []client.ApplyResult
			prog := g.newProgress(size, "lines applied", quiet)
			sum, err := c.NodeApply(cmd.Context(), counted, func(r client.ApplyResult) {
				done++
				if r.Result == "error" {
					failed = append(failed, r)
				}
				prog.set(sent.Load(), done)
			})
			prog.finish()
			if err != nil {
				return err
			}
			printFailedLines(g.stderr, failed)
			if err := g.print(sum, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%d lines: %d created, %d updated, %d unchanged, %d errors\n", sum.Lines, sum.Created, sum.Updated, sum.Unchanged, sum.Errors)
				return err
			}); err != nil {
				return err
			}
			if sum.Errors > 0 {
				return fmt.Errorf("%d of %d lines failed", sum.Errors, sum.Lines)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "NDJSON file to apply (- for stdin)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress (a bar on a terminal, a line of counts every 5 s otherwise)")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// printFailedLines prints one line per failed input line, in input order (batches commit
// out of order): its number, the node's name when the line gave one, and the reason once —
// the field errors when there are any (the detail only summarizes them), else the detail.
func printFailedLines(w io.Writer, failed []client.ApplyResult) {
	slices.SortFunc(failed, func(a, b client.ApplyResult) int { return a.Line - b.Line })
	for _, f := range failed {
		where := fmt.Sprintf("line %d", f.Line)
		if f.Name != "" {
			where += " (" + f.Name + ")"
		}
		var reasons []string
		if f.Problem != nil {
			for _, e := range f.Problem.Errors {
				if e.Field != "" {
					reasons = append(reasons, e.Field+": "+e.Message)
				} else {
					reasons = append(reasons, e.Message)
				}
			}
			if len(reasons) == 0 {
				reasons = append(reasons, f.Problem.Detail)
			}
		}
		fmt.Fprintf(w, "%s: %s\n", where, strings.Join(reasons, "; "))
	}
}

func newGroupCmd(g *globals) *cobra.Command {
	var priority int
	var selector string
	var setPriority bool
	return newKindCmd(g, kindCLI{
		noun: "group", plural: "groups", kind: "Group", inOrg: true,
		specFlags: func(cmd *cobra.Command) {
			cmd.Flags().IntVar(&priority, "priority", 0, "spec.priority: higher wins when pillars of groups conflict")
			cmd.Flags().StringVar(&selector, "node-selector", "", "spec.selector: the org's nodes whose labels match are members")
			cmd.PreRun = func(cmd *cobra.Command, _ []string) { setPriority = cmd.Flags().Changed("priority") }
		},
		spec: func() (map[string]any, error) {
			m := map[string]any{}
			if setPriority {
				m["priority"] = priority
			}
			if selector != "" {
				m["selector"] = selector
			}
			return m, nil
		},
		extra: func(g *globals, org *string) []*cobra.Command {
			groups := func() (*client.Resources, error) {
				c, err := g.client()
				if err != nil {
					return nil, err
				}
				return c.Groups(*org), nil
			}
			members := &cobra.Command{
				Use:   "members GROUP",
				Short: "List a group's members (static and selected by its selector)",
				Args:  cobra.ExactArgs(1),
				RunE: func(cmd *cobra.Command, args []string) error {
					r, err := groups()
					if err != nil {
						return err
					}
					ms, err := r.Members(cmd.Context(), args[0])
					if err != nil {
						return err
					}
					return g.printList(ms, func(w io.Writer) error {
						t := newTable(w, "NODE", "STATIC", "SELECTED")
						for _, m := range ms {
							t.row(m.Node, fmt.Sprint(m.Static), fmt.Sprint(m.Selected))
						}
						return t.flush()
					})
				},
			}
			// membership builds add-member and remove-member, which differ only in the call.
			membership := func(use, short string, change func(r *client.Resources, cmd *cobra.Command, group, node string) error) *cobra.Command {
				return &cobra.Command{
					Use:   use + " GROUP NODE...",
					Short: short,
					Args:  cobra.MinimumNArgs(2),
					RunE: func(cmd *cobra.Command, args []string) error {
						r, err := groups()
						if err != nil {
							return err
						}
						for _, n := range args[1:] {
							if err := change(r, cmd, args[0], n); err != nil {
								return fmt.Errorf("%s: %w", n, err)
							}
						}
						return nil
					},
				}
			}
			add := membership("add-member", "Make nodes static members of a group", func(r *client.Resources, cmd *cobra.Command, g, n string) error {
				return r.AddMember(cmd.Context(), g, n)
			})
			remove := membership("remove-member", "End nodes' static membership of a group", func(r *client.Resources, cmd *cobra.Command, g, n string) error {
				return r.RemoveMember(cmd.Context(), g, n)
			})
			return []*cobra.Command{members, add, remove}
		},
	})
}

// newNodeRenameCmd renames a node (a Salt minion whose id changed) in place.
func newNodeRenameCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rename OLD NEW",
		Short: "Rename a node (its minion id changed): labels, memberships, pillars and their history follow it",
		Long: "Rename a node in place, in one transaction: its labels, annotations, static group memberships,\n" +
			"pillars and pillar history follow it. Watchers see the old name DELETED and the new one ADDED.\n" +
			"Needs nodes:write on both names and orgs:attach on the node's org. On the Salt side, accept\n" +
			"the minion's key under the new id (docs/salt.md: rename the node first, then the key, so the\n" +
			"minion never renders as unknown).",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			obj, err := c.Nodes().Rename(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			return g.print(obj, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "node %s renamed to %s\n", args[0], obj.Metadata.Name)
				return err
			})
		},
	}
}
