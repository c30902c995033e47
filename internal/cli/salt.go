package cli

import (
	"fmt"
	"io"

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
	return cmd
}
