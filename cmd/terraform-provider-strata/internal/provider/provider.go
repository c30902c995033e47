// Package provider is strata's Terraform provider, built on terraform-plugin-framework. Every
// resource talks to strata through the public client package, as the CLI does, so the
// provider can do nothing a token could not do through the API; the server's rules (scopes,
// validation, optimistic concurrency) are the provider's rules.
//
// Conventions shared by every resource: `id` is the import ID; names are immutable
// (RequiresReplace); JSON attributes are strings compared semantically (jsonvalue.go); and
// every update or delete carries the resourceVersion or ETag that the last read returned, so
// a change made by someone else since the refresh is an error, never overwritten.
package provider

import (
	"context"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/stratahq/strata/client"
)

// Address is the provider's registry address: what `required_providers { strata = { source =
// "stratahq/strata" } }` and a dev_overrides entry for "stratahq/strata" resolve to.
const Address = "registry.terraform.io/stratahq/strata"

// Environment variables the provider block falls back to: the CLI's own, so a shell set up
// for `strata` is set up for Terraform too.
const (
	EnvServer = "STRATA_SERVER"
	EnvToken  = "STRATA_TOKEN"
)

// strataProvider is the provider; version is reported to Terraform.
type strataProvider struct {
	version string
}

var _ provider.Provider = (*strataProvider)(nil)

// New returns a constructor of the provider, as providerserver wants it.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &strataProvider{version: version} }
}

type providerModel struct {
	Server types.String `tfsdk:"server"`
	Token  types.String `tfsdk:"token"`
}

func (p *strataProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "strata"
	resp.Version = p.version
}

func (p *strataProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Manages what a strata server holds: orgs, nodes, groups, pillars, kinds and their objects, Terraform projects and tokens.",
		Attributes: map[string]schema.Attribute{
			"server": schema.StringAttribute{
				Optional:    true,
				Description: "The strata server's URL, e.g. http://127.0.0.1:7400. Defaults to $" + EnvServer + ", then " + client.DefaultServer + ".",
			},
			"token": schema.StringAttribute{
				Optional:    true,
				Sensitive:   true,
				Description: "The API token. Defaults to $" + EnvToken + ".",
			},
		},
	}
}

// Configure builds the one client every resource shares. An unknown value (a server URL
// computed by another resource) cannot be connected to yet, so it is an error naming the
// attribute rather than a silent fallback to the environment.
func (p *strataProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if cfg.Server.IsUnknown() {
		resp.Diagnostics.AddAttributeError(path.Root("server"), "Unknown strata server", "The provider's server is not known until apply; set it to a value known at plan time (or use "+EnvServer+").")
	}
	if cfg.Token.IsUnknown() {
		resp.Diagnostics.AddAttributeError(path.Root("token"), "Unknown strata token", "The provider's token is not known until apply; set it to a value known at plan time (or use "+EnvToken+").")
	}
	if resp.Diagnostics.HasError() {
		return
	}
	server := os.Getenv(EnvServer)
	if !cfg.Server.IsNull() {
		server = cfg.Server.ValueString()
	}
	token := os.Getenv(EnvToken)
	if !cfg.Token.IsNull() {
		token = cfg.Token.ValueString()
	}
	if token == "" {
		resp.Diagnostics.AddAttributeError(path.Root("token"), "Missing strata token", "Set the provider's token or the "+EnvToken+" environment variable to an API token (strata token create).")
		return
	}
	c, err := client.New(server, token, nil)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("server"), "Invalid strata server", err.Error())
		return
	}
	c.UserAgent = "terraform-provider-strata/" + p.version
	resp.ResourceData = c
	resp.DataSourceData = c
}

func (p *strataProvider) Resources(_ context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		newOrgResource,
		newNodeResource,
		newGroupResource,
		newPillarResource,
		newCategoryResource,
		newKindResource,
		newObjectResource,
		newProjectResource,
		newTokenResource,
	}
}

func (p *strataProvider) DataSources(_ context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{
		newNodePillarDataSource,
		newNodesDataSource,
	}
}
