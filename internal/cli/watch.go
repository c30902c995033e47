package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/client"
)

func init() { extraCommands = append(extraCommands, newWatchCmd) }

// resourcesFor resolves a kind named on the command line (any case, singular or plural:
// "node", "Nodes", "org") to the client of its objects and the org filter of its watch:
// kinds inside an org need org; nodes take it as the org whose nodes to watch.
func resourcesFor(ctx context.Context, c *client.Client, kind, org string) (*client.Resources, string, error) {
	res, _, inOrg, err := resolveList(ctx, c, kind, orgListFlags{org: org})
	return res, inOrg, err
}

// newWatchCmd is `strata watch KIND`: the events of a watch, one per line, until
// interrupted.
func newWatchCmd(g *globals) *cobra.Command {
	var org, selector, rv string
	cmd := &cobra.Command{
		Use:   "watch KIND",
		Short: "Stream the changes of a kind (org, node, group) as they happen",
		Long: `Stream the changes of a kind as they happen, until interrupted.

Without --resource-version the stream starts with every current object as ADDED, then the
changes; with it, the changes after that version (a list's resourceVersion, or the last event's).
With -l, an object that stops matching the selector is shown as DELETED and one that starts
matching as ADDED; with --org on nodes, likewise a node that leaves or joins the org. -o json prints each event as one JSON line ({"type": …, "object": …});
the table shows EVENT, NAME, LABELS and RESOURCE VERSION. BOOKMARK events are shown in json
only. A version older than the server's change history fails with HTTP 410: list again.
When the server ends a stream after its lifetime (--watch-max-duration), watch resumes
from the last resourceVersion it printed, without a gap or a repeat; a revoked or expired
token ends it with the server's 401.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch g.output {
			case "table", "", "json":
			default:
				return fmt.Errorf("watch prints -o table or json, not %q", g.output)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			r, inOrg, err := resourcesFor(cmd.Context(), c, args[0], org)
			if err != nil {
				return err
			}
			w, err := r.Watch(cmd.Context(), client.WatchOptions{ResourceVersion: rv, LabelSelector: selector, Org: inOrg})
			if err != nil {
				return err
			}
			defer func() { w.Close() }()
			if g.output != "json" {
				fmt.Fprintf(g.stdout, "%-9s %-32s %-40s %s\n", "EVENT", "NAME", "LABELS", "RESOURCE VERSION")
			}
			last := rv
			for {
				ev, err := w.Next()
				if err != nil {
					if cmd.Context().Err() != nil {
						return nil
					}
					if !errors.Is(err, io.EOF) {
						return err
					}
					// The server ended the stream cleanly (its lifetime, --watch-max-duration):
					// resume after the last version seen, so nothing is missed or repeated.
					w.Close()
					if w, err = r.Watch(cmd.Context(), client.WatchOptions{ResourceVersion: last, LabelSelector: selector, Org: inOrg}); err != nil {
						if cmd.Context().Err() != nil {
							return nil
						}
						return err
					}
					continue
				}
				if v := ev.Object.Metadata.ResourceVersion; v != "" {
					last = v
				}
				if err := printEvent(g, ev); err != nil {
					return err
				}
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&org, "org", "", "the org: of kinds inside an org (group), or whose nodes to watch (node)")
	f.StringVarP(&selector, "selector", "l", "", "label selector, e.g. env=prod,tier in (a,b)")
	f.StringVar(&rv, "resource-version", "", "stream the changes after this resourceVersion instead of starting with every object")
	return cmd
}

// printEvent writes one event as a JSON line or a table row.
func printEvent(g *globals, ev client.Event) error {
	if g.output == "json" {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(g.stdout, string(b))
		return err
	}
	if ev.Type == client.EventBookmark {
		return nil
	}
	_, err := fmt.Fprintf(g.stdout, "%-9s %-32s %-40s %s\n", ev.Type, ev.Object.Metadata.Name, formatMap(ev.Object.Metadata.Labels), ev.Object.Metadata.ResourceVersion)
	return err
}
