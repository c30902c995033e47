package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-jsontypes/jsontypes"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/stratahq/strata/client"
)

// nodePillarDataSource is strata_node_pillar: a node's merged pillar, exactly as
// GET /v1/nodes/{node}/pillar answers it (what Salt receives).
type nodePillarDataSource struct{ configuredDS }

var _ datasource.DataSourceWithConfigure = (*nodePillarDataSource)(nil)

func newNodePillarDataSource() datasource.DataSource { return &nodePillarDataSource{} }

type nodePillarModel struct {
	Node types.String         `tfsdk:"node"`
	Data jsontypes.Normalized `tfsdk:"data"`
}

func (d *nodePillarDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_node_pillar"
}

func (d *nodePillarDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A node's merged pillar: global, org, group and node rows folded as Salt merges them.",
		Attributes: map[string]schema.Attribute{
			"node": schema.StringAttribute{Required: true, Description: "The node's name."},
			"data": schema.StringAttribute{
				CustomType:  jsontypes.NormalizedType{},
				Computed:    true,
				Sensitive:   true,
				Description: "The merged pillar as a JSON string (jsondecode it). Sensitive: a token with pillars:read-secrets sees secret categories unmasked.",
			},
		},
	}
}

func (d *nodePillarDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m nodePillarModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if d.c == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	body, err := d.c.PillarRender(ctx, m.Node.ValueString(), false)
	if err != nil {
		apiError(&resp.Diagnostics, "Rendering the pillar of node "+m.Node.ValueString(), err)
		return
	}
	m.Data = jsontypes.NewNormalizedValue(string(body))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// nodesDataSource is strata_nodes: the names of the nodes a label selector matches, in one
// org or all the token may read.
type nodesDataSource struct{ configuredDS }

var _ datasource.DataSourceWithConfigure = (*nodesDataSource)(nil)

func newNodesDataSource() datasource.DataSource { return &nodesDataSource{} }

type nodesModel struct {
	Selector types.String `tfsdk:"selector"`
	Org      types.String `tfsdk:"org"`
	Names    types.List   `tfsdk:"names"`
}

func (d *nodesDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_nodes"
}

func (d *nodesDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The nodes a label selector matches.",
		Attributes: map[string]schema.Attribute{
			"selector": schema.StringAttribute{Optional: true, Description: "A label selector, e.g. \"role=web,env in (prod)\"; unset: every node."},
			"org":      schema.StringAttribute{Optional: true, Description: "Only the nodes of this org."},
			"names":    schema.ListAttribute{ElementType: types.StringType, Computed: true, Description: "The matching nodes' names, in name order."},
		},
	}
}

func (d *nodesDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m nodesModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if d.c == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	list, err := d.c.Nodes().ListAll(ctx, client.ListOptions{LabelSelector: m.Selector.ValueString(), Org: m.Org.ValueString()})
	if err != nil {
		apiError(&resp.Diagnostics, "Listing nodes", err)
		return
	}
	names := make([]string, 0, len(list.Items))
	for _, o := range list.Items {
		names = append(names, o.Metadata.Name)
	}
	v, diags := types.ListValueFrom(ctx, types.StringType, names)
	resp.Diagnostics.Append(diags...)
	m.Names = v
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
