package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

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
			var lines int64 // the file's lines, so the bar has a total; 0 for stdin (a spinner)
			if file != "-" {
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				defer f.Close()
				if lines, err = countLines(f); err != nil {
					return err
				}
				in = f
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			var failed []client.ApplyResult
			// Progress counts the server's per-line results, each sent once its batch has
			// committed: a line is reported applied only when it is.
			prog := g.newProgress(lines, "lines applied", quiet)
			sum, err := c.NodeApply(cmd.Context(), in, func(r client.ApplyResult) {
				if r.Result == "error" {
					failed = append(failed, r)
				}
				prog.result(r.Result != "error")
			})
			prog.finish()
			if err != nil {
				return err
			}
			printFailedLines(g.stderr, failed)
			if err := g.print(sum, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, applySummaryText(sum))
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
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress (a bar of lines applied on a terminal, a line of counts every 5 s otherwise)")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

// countLines counts f's lines that are not blank (the server reports one result for each)
// and rewinds f.
func countLines(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return 0, err // a FIFO or device is read once, by the apply
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), math.MaxInt32)
	var n int64
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", f.Name(), err)
	}
	_, err = f.Seek(0, io.SeekStart)
	return n, err
}

// applySummaryText puts failures first and never counts them as applied:
// "5 lines: 3 failed, 2 applied (1 created, 1 updated, 0 unchanged)".
func applySummaryText(sum client.ApplySummary) string {
	applied := sum.Created + sum.Updated + sum.Unchanged
	return fmt.Sprintf("%d lines: %d failed, %d applied (%d created, %d updated, %d unchanged)", sum.Lines, sum.Errors, applied, sum.Created, sum.Updated, sum.Unchanged)
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
