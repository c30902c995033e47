package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

func init() {
	extraCommands = append(extraCommands, newSaltCmd)
}

// newSaltCmd is `strata salt`: the pieces a Salt master needs.
func newSaltCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "salt", Short: "Connect Salt masters to strata's pillars"}
	cmd.AddCommand(&cobra.Command{
		Use:   "credentials",
		Short: "Create the database role Salt's postgres ext_pillar uses and print a master config",
		Long: "Creates (or gives a new password to) the login role strata_salt, which may only execute\n" +
			"strata.node_pillars, and prints a master configuration for Salt's postgres ext_pillar.\n" +
			"The password is shown only now. Prefer the http_json ext_pillar (docs/salt.md).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			creds, err := c.SaltCredentials(cmd.Context())
			if err != nil {
				return err
			}
			return g.print(creds, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "# Salt master configuration (e.g. /etc/salt/master.d/strata.conf)\n%s", creds.MasterConfig)
				return err
			})
		},
	})
	cmd.AddCommand(newSaltConfigCmd(g))
	return cmd
}

// saltConfig is what `strata salt config` prints: the pieces that connect a Salt master (or a
// masterless minion) to this server.
type saltConfig struct {
	// TokenCommand creates the token the ext_pillar sends; it may only render pillars.
	TokenCommand string `json:"tokenCommand"`
	// Master is the http_json ext_pillar block for /etc/salt/master.d/strata.conf.
	Master string `json:"master"`
	// Minion is the same for a masterless minion (salt-call --local), in
	// /etc/salt/minion.d/strata.conf.
	Minion string `json:"minion"`
	// Postgres says how to get the postgres ext_pillar block, which needs a database role.
	Postgres string `json:"postgres"`
}

// newSaltConfigCmd is `strata salt config`: ready-made ext_pillar blocks with this server's
// URL, as `project backend-config` prints Terraform's.
func newSaltConfigCmd(g *globals) *cobra.Command {
	var tokenName string
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print the ext_pillar configuration for a Salt master or masterless minion",
		Long: "Prints the http_json ext_pillar block for a Salt master (and for a masterless minion run with\n" +
			"salt-call --local) with the URL of this server (--server), and the command that creates the\n" +
			"token it needs. Nothing is created. For Salt's postgres ext_pillar, `strata salt credentials`\n" +
			"creates its database role and prints its block.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.serverSettings(); err != nil { // the context's server, when it names one
				return err
			}
			server := strings.TrimRight(g.server, "/")
			block := fmt.Sprintf(`ext_pillar:
  - http_json:
      url: %s/v1/salt/pillar/%%s
      username: salt
      password: TOKEN   # the secret %s printed
# strata answers within --salt-render-timeout (10 s); Salt's own default wait is an hour.
http_request_timeout: 30
`, server, "`strata token create "+tokenName+"`")
			c := saltConfig{
				TokenCommand: fmt.Sprintf("strata --server %s token create %s --scope 'pillars:render:node/*' --scope 'pillars:read-secrets:node/*'", server, tokenName),
				Master:       block,
				Minion:       block,
				Postgres:     fmt.Sprintf("strata --server %s salt credentials   # creates the role strata_salt and prints its block (the password once)", server),
			}
			return g.print(c, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, `# 1. A token that may only render pillars, secret categories included (Salt gets their
#    plaintext or an _errors text, never masked values; the secret is printed once):
#      %s
#
# 2. A Salt master: /etc/salt/master.d/strata.conf
%s
# 3. A masterless minion (salt-call --local): /etc/salt/minion.d/strata.conf
%s
# Check it: salt-call pillar.items (a failure shows strata's text under _errors), or ask as
# Salt does: curl -s -u "salt:$TOKEN" %s/v1/salt/pillar/MINION
#
# Salt's postgres ext_pillar instead (docs/salt.md says why http_json is preferred):
#      %s
`, c.TokenCommand, c.Master, c.Minion, server, c.Postgres)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&tokenName, "token-name", "salt-master", "the name of the token in the printed `token create` command")
	return cmd
}
