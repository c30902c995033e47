// Command terraform-provider-strata is strata's Terraform provider: orgs, nodes, groups,
// pillars, kinds and their objects, projects and tokens as Terraform resources, through the
// same public Go client the strata CLI uses. Terraform starts it as a plugin (protocol 6);
// docs/terraform.md says how to use it through dev_overrides without `terraform init`.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/stratahq/strata/cmd/terraform-provider-strata/internal/provider"
)

// version is set by the release build (-ldflags "-X main.version=…").
var version = "dev"

func main() {
	debug := flag.Bool("debug", false, "run the provider for a debugger (prints TF_REATTACH_PROVIDERS)")
	flag.Parse()
	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: provider.Address,
		Debug:   *debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
