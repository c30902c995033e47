package cli

import (
	"github.com/spf13/cobra"

	"github.com/stratahq/strata/internal/server"
)

func init() { extraCommands = append(extraCommands, newOpenAPICmd) }

// newOpenAPICmd writes the API's OpenAPI 3.1 document. It needs no server: the document
// depends only on the release (it is the one GET /v1/openapi.json serves), so a build can
// generate clients in other languages from the binary alone.
func newOpenAPICmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "openapi",
		Short: "Print the HTTP API's OpenAPI 3.1 document (as GET /v1/openapi.json serves it)",
		Long: "Print the HTTP API's OpenAPI 3.1 document, the one GET /v1/openapi.json serves without a token: " +
			"strata openapi > strata.json. It is derived from this release's route table and built-in kinds; " +
			"user-defined kinds are described generically (a kind's schema: strata kind get <Kind>, GET /v1/kinds/{kind}).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := server.OpenAPI(Version)
			if err != nil {
				return err
			}
			_, err = g.stdout.Write(b)
			return err
		},
	}
}
