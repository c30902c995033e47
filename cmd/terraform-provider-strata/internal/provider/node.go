package provider

import (
	"context"
	"encoding/json"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// nodeResource is strata_node: a node (a Salt minion, /v1/nodes/{node}) in an org, imported
// by its name. Its org is spec.org; moving it to another org is an in-place update (which
// drops its static memberships of the old org's groups, as the API does).
type nodeResource struct{ configured }

var (
	_ resource.ResourceWithConfigure   = (*nodeResource)(nil)
	_ resource.ResourceWithImportState = (*nodeResource)(nil)
)

func newNodeResource() resource.Resource { return &nodeResource{} }

type nodeModel struct {
	ID              types.String `tfsdk:"id"`
	Name            types.String `tfsdk:"name"`
	Org             types.String `tfsdk:"org"`
	Labels          types.Map    `tfsdk:"labels"`
	Annotations     types.Map    `tfsdk:"annotations"`
	ResourceVersion types.String `tfsdk:"resource_version"`
}

func (r *nodeResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_node"
}

func (r *nodeResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A node: a Salt minion, named by its minion id, in one org.",
		Attributes: map[string]schema.Attribute{
			"id":   idAttribute("the node's name"),
			"name": nameAttribute("node"),
			"org": schema.StringAttribute{
				Required:    true,
				Description: "The org the node belongs to (spec.org). Changing it moves the node (scope orgs:attach on both orgs).",
			},
			"labels":           labelsAttribute(),
			"annotations":      annotationsAttribute(),
			"resource_version": resourceVersionAttribute(),
		},
	}
}

func (r *nodeResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan nodeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	spec, _ := json.Marshal(map[string]string{"org": plan.Org.ValueString()})
	obj := newObject(ctx, "Node", plan.Name.ValueString(), plan.Labels, plan.Annotations, spec, &resp.Diagnostics)
	out, err := r.c.Nodes().Create(ctx, obj)
	if err != nil {
		apiError(&resp.Diagnostics, "Creating node "+plan.Name.ValueString(), err)
		return
	}
	plan.ID = plan.Name
	plan.ResourceVersion = types.StringValue(out.Metadata.ResourceVersion)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *nodeResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state nodeModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	out, err := r.c.Nodes().Get(ctx, state.ID.ValueString())
	if isNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		apiError(&resp.Diagnostics, "Reading node "+state.ID.ValueString(), err)
		return
	}
	spec, err := specMap(out.Spec)
	if err != nil {
		apiError(&resp.Diagnostics, "Reading node "+state.ID.ValueString(), err)
		return
	}
	state.Name = types.StringValue(out.Metadata.Name)
	org, _ := spec["org"].(string)
	state.Org = types.StringValue(org)
	state.Labels = mapValue(ctx, out.Metadata.Labels, state.Labels, &resp.Diagnostics)
	state.Annotations = mapValue(ctx, out.Metadata.Annotations, state.Annotations, &resp.Diagnostics)
	state.ResourceVersion = types.StringValue(out.Metadata.ResourceVersion)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *nodeResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state nodeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	rv := state.ResourceVersion.ValueString()
	patch := map[string]any{"metadata": metaPatch(ctx, state.Labels, plan.Labels, state.Annotations, plan.Annotations, rv, &resp.Diagnostics)}
	if !plan.Org.Equal(state.Org) {
		patch["spec"] = map[string]any{"org": plan.Org.ValueString()}
	}
	out, err := patchObject(ctx, r.c.Nodes(), state.ID.ValueString(), patch)
	if isConcurrentChange(err) {
		conflictError(&resp.Diagnostics, "Node "+state.ID.ValueString(), rv, err)
		return
	}
	if err != nil {
		apiError(&resp.Diagnostics, "Updating node "+state.ID.ValueString(), err)
		return
	}
	plan.ID = state.ID
	plan.ResourceVersion = types.StringValue(out.Metadata.ResourceVersion)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *nodeResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state nodeModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	deleteObject(ctx, r.c.Nodes(), "Node", state.ID.ValueString(), state.ResourceVersion.ValueString(), &resp.Diagnostics)
}

func (r *nodeResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
}
