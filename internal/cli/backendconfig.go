package cli

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
)

// newBackendConfigCmd prints how terraform reaches one workspace. The HTTP protocol has no
// workspaces, so a workspace is its URL, and address, lock_address and unlock_address must
// all be that URL: changing only address for a second workspace makes terraform lock the
// first one and then have its write refused (docs/terraform.md).
func newBackendConfigCmd(g *globals) *cobra.Command {
	var flags bool
	cmd := &cobra.Command{
		Use:   "backend-config PROJECT WORKSPACE",
		Short: `Print a ready backend "http" block for a workspace (and the backend "pg" alternative)`,
		Long: "Prints a backend \"http\" block whose address, lock_address and unlock_address all point at\n" +
			"PROJECT/WORKSPACE. With --flags it prints the same three settings as -backend-config flags,\n" +
			"for `terraform init` of a directory whose block leaves them out.",
		Example: "  strata project backend-config net default > backend.tf\n" +
			"  terraform init -reconfigure $(strata project backend-config net staging --flags)",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.serverSettings(); err != nil { // the context's server, when it names one
				return err
			}
			if flags {
				fmt.Fprintln(g.stdout, backendFlags(g.server, args[0], args[1]))
				return nil
			}
			fmt.Fprint(g.stdout, backendBlock(g.server, args[0], args[1]))
			return nil
		},
	}
	cmd.Flags().BoolVar(&flags, "flags", false, "print -backend-config flags (address, lock_address, unlock_address) instead of the block")
	return cmd
}

// backendFlags renders a workspace's three addresses as terraform init -backend-config flags.
func backendFlags(server, project, workspace string) string {
	base := strings.TrimRight(server, "/") + "/v1/state/" + url.PathEscape(project) + "/" + url.PathEscape(workspace)
	var out []string
	for _, k := range []string{"address", "lock_address", "unlock_address"} {
		// Not quoted: the line is meant for $(…), which splits words but keeps quotes; an
		// escaped URL holds no blanks.
		out = append(out, "-backend-config="+k+"="+base)
	}
	return strings.Join(out, " ")
}
