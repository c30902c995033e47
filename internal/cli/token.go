package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/client"
)

func newTokenCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Manage API tokens (admin)"}

	var scopes []string
	var expiresIn time.Duration
	var quiet bool
	create := &cobra.Command{
		Use:   "create NAME --scope SCOPE...",
		Short: "Create a token; its secret is printed once",
		Long: `Create a token; its secret is printed once and never stored.

Scopes are "admin" or family:verb:name, for example orgs:read:acme, orgs:write:*,
pillars:render:*, projects:write:net, state:write:net, state:force-unlock:net.
Pillar and resource scopes name their target kind: pillars:write:node/web*,
pillars:read:org/acme, pillars:write:group/acme/*, pillars:read:global,
resources:write:org/acme, resources:read:global/tenant1. A node operator placing
nodes in org acme also needs orgs:attach:acme (docs/api.md).

state:read-outputs:PROJECT is for terraform_remote_state in other configurations: the
token reads the project's states with their root outputs (sensitive ones included) and no
resources, and can do nothing else (docs/terraform.md).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(scopes) == 0 {
				return errors.New("give at least one --scope, e.g. --scope 'pillars:read:org/acme' (or --scope admin)")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			req := client.TokenCreateRequest{Name: args[0], Scopes: scopes}
			if expiresIn > 0 {
				t := time.Now().Add(expiresIn).UTC()
				req.ExpiresAt = &t
			}
			tok, err := c.TokenCreate(cmd.Context(), req)
			if err != nil {
				return err
			}
			if quiet {
				_, err := fmt.Fprintln(g.stdout, tok.Secret)
				return err
			}
			return g.print(tok, func(w io.Writer) error {
				fmt.Fprintf(w, "id:     %s\nscopes: %s\nsecret: %s\n(the secret is shown only now)\n", tok.ID, strings.Join(tok.Scopes, " "), tok.Secret)
				return nil
			})
		},
	}
	create.Flags().StringArrayVar(&scopes, "scope", nil, "scope to grant (repeatable), e.g. state:write:net, or state:read-outputs:net for terraform_remote_state")
	create.Flags().DurationVar(&expiresIn, "expires-in", 0, "expire the token after this long (e.g. 720h); default never")
	create.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the secret, for scripts: export TF_HTTP_PASSWORD=$(strata token create … -q)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List tokens",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			toks, err := c.TokenList(cmd.Context())
			if err != nil {
				return err
			}
			return g.printList(toks, func(w io.Writer) error {
				t := newTable(w, "ID", "NAME", "SCOPES", "CREATED", "EXPIRES", "REVOKED")
				for _, tok := range toks {
					t.row(tok.ID, tok.Name, strings.Join(tok.Scopes, " "), tok.CreatedAt.Format(time.RFC3339), fmtTime(tok.ExpiresAt), fmtTime(tok.RevokedAt))
				}
				return t.flush()
			})
		},
	}

	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.TokenRevoke(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "token %s revoked\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func newAuditCmd(g *globals) *cobra.Command {
	var (
		opts        client.AuditListOptions
		follow, all bool
		after       string
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the audit log, newest first (admin); --follow streams it as it is written",
		Long: `Show the audit log, newest first (admin).

--all pages through the whole log (no page cap) for an export. --follow streams records as
they are written, oldest first, never skipping one whatever order transactions commit in: with
-o json one JSON object per line (for a SIEM), each with a "cursor"; --after CURSOR resumes
after the record that carried it. Ctrl-C ends it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if follow {
				return c.AuditFollow(cmd.Context(), after, opts.Action, func(r client.AuditRecord) error {
					if g.output == "json" {
						b, err := json.Marshal(r)
						if err != nil {
							return err
						}
						_, err = fmt.Fprintf(g.stdout, "%s\n", b)
						return err
					}
					_, err := fmt.Fprintf(g.stdout, "%d\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.At.Format(time.RFC3339), r.Actor, r.Action, r.Target, r.RemoteAddr)
					return err
				})
			}
			var list client.AuditList
			if all {
				o := opts
				o.Limit = 1000
				for {
					page, err := c.AuditList(cmd.Context(), o)
					if err != nil {
						return err
					}
					list.Items = append(list.Items, page.Items...)
					if page.Continue == "" {
						break
					}
					o.Continue, o.Before = page.Continue, 0
				}
			} else if list, err = c.AuditList(cmd.Context(), opts); err != nil {
				return err
			}
			return g.print(list, func(w io.Writer) error {
				t := newTable(w, "ID", "AT", "ACTOR", "ACTION", "TARGET", "FROM")
				for _, r := range list.Items {
					t.row(strconv.FormatInt(r.ID, 10), r.At.Format(time.RFC3339), r.Actor, r.Action, r.Target, r.RemoteAddr)
				}
				return t.flush()
			})
		},
	}
	cmd.Flags().IntVar(&opts.Limit, "limit", 50, "how many records")
	cmd.Flags().Int64Var(&opts.Before, "before", 0, "only records older than this id")
	cmd.Flags().StringVar(&opts.Action, "action", "", "only actions starting with this (e.g. token., state.)")
	cmd.Flags().BoolVar(&all, "all", false, "the whole log, every page (for an export)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "stream records as they are written (with -o json: one JSON object per line)")
	cmd.Flags().StringVar(&after, "after", "", "with --follow: resume after the record with this cursor")
	cmd.MarkFlagsMutuallyExclusive("all", "follow")
	return cmd
}
