package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/client"
)

func init() {
	extraCommands = append(extraCommands, newPillarCmd)
}

// newPillarCmd is `strata pillar`: rows of a target (--global, --org [--group], --node), a
// node's merged pillar and its explanation, and a category's history.
func newPillarCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "pillar", Short: "Manage pillars (layered configuration for Salt)"}
	var t client.PillarTarget
	target := func(c *cobra.Command) {
		c.Flags().BoolVar(&t.Global, "global", false, "the global target")
		c.Flags().StringVar(&t.Org, "org", "", "an org (with --group: a group of it)")
		c.Flags().StringVar(&t.Group, "group", "", "a group of --org")
		c.Flags().StringVar(&t.Node, "node", "", "a node")
	}
	printJSON := func(v any) error {
		return g.print(v, func(w io.Writer) error {
			b, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(w, string(b))
			return err
		})
	}

	var file, ifMatch string
	set := &cobra.Command{
		Use:   "set CATEGORY -f FILE",
		Short: "Store a JSON object as a target's category (- for stdin)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var b []byte
			var err error
			if file == "-" {
				b, err = io.ReadAll(os.Stdin)
			} else {
				b, err = os.ReadFile(file)
			}
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			p, err := c.PillarSet(cmd.Context(), t, args[0], b, ifMatch)
			if err != nil {
				return err
			}
			return g.print(p, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s %s revision %d (ETag %s)\n", p.Target, p.Category, p.Revision, p.ETag)
				return err
			})
		},
	}
	target(set)
	set.Flags().StringVarP(&file, "filename", "f", "", "file holding the JSON object (- for stdin)")
	set.Flags().StringVar(&ifMatch, "if-match", "", "store only if the row is still at this ETag")
	_ = set.MarkFlagRequired("filename")

	get := &cobra.Command{
		Use:   "get CATEGORY",
		Short: "Show a target's category",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			p, err := c.PillarGet(cmd.Context(), t, args[0])
			if err != nil {
				return err
			}
			return printJSON(p)
		},
	}
	target(get)

	del := &cobra.Command{
		Use:   "delete CATEGORY",
		Short: "Delete a target's category",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			return c.PillarDelete(cmd.Context(), t, args[0], ifMatch)
		},
	}
	target(del)
	del.Flags().StringVar(&ifMatch, "if-match", "", "delete only if the row is still at this ETag")

	list := &cobra.Command{
		Use:   "list",
		Short: "List a target's categories",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ps, err := c.PillarList(cmd.Context(), t)
			if err != nil {
				return err
			}
			return g.print(ps, func(w io.Writer) error {
				tb := newTable(w, "CATEGORY", "REVISION", "UPDATED BY", "UPDATED AT")
				for _, p := range ps {
					tb.row(p.Category, fmt.Sprint(p.Revision), p.UpdatedBy, p.UpdatedAt.Format("2006-01-02T15:04:05Z"))
				}
				return tb.flush()
			})
		},
	}
	target(list)

	render := func(use, short string, explain bool) *cobra.Command {
		return &cobra.Command{
			Use:   use + " NODE",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := g.client()
				if err != nil {
					return err
				}
				body, err := c.PillarRender(cmd.Context(), args[0], explain)
				if err != nil {
					return err
				}
				var v any
				if err := json.Unmarshal(body, &v); err != nil {
					return err
				}
				return printJSON(v)
			},
		}
	}

	var before int64
	history := &cobra.Command{
		Use:   "history CATEGORY",
		Short: "Show a category's changes, newest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			hs, err := c.PillarHistory(cmd.Context(), t, args[0], before, 100)
			if err != nil {
				return err
			}
			return g.print(hs, func(w io.Writer) error {
				tb := newTable(w, "ID", "REVISION", "ACTOR", "AT", "CHANGE")
				for _, h := range hs {
					what := "updated"
					switch {
					case len(h.Old) == 0 || string(h.Old) == "null":
						what = "created"
					case len(h.New) == 0 || string(h.New) == "null":
						what = "deleted"
					}
					tb.row(fmt.Sprint(h.ID), fmt.Sprint(h.Revision), h.Actor, h.At.Format("2006-01-02T15:04:05Z"), what)
				}
				return tb.flush()
			})
		},
	}
	target(history)
	history.Flags().Int64Var(&before, "before", 0, "continue below this history entry id")

	cmd.AddCommand(set, get, del, list,
		render("render", "Show a node's merged pillar", false),
		render("explain", "Show a node's merged pillar and where each value came from", true),
		history)
	return cmd
}
