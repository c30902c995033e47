package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// orgResource is strata_org: an org (/v1/orgs/{org}), imported by its name.
type orgResource struct{ configured }

var (
	_ resource.ResourceWithConfigure   = (*orgResource)(nil)
	_ resource.ResourceWithImportState = (*orgResource)(nil)
)

func newOrgResource() resource.Resource { return &orgResource{} }

type orgModel struct {
	ID              types.String `tfsdk:"id"`
	Name            types.String `tfsdk:"name"`
	Labels          types.Map    `tfsdk:"labels"`
	Annotations     types.Map    `tfsdk:"annotations"`
	ResourceVersion types.String `tfsdk:"resource_version"`
}

func (r *orgResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_org"
}

func (r *orgResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "An org: the unit nodes, groups and org-scoped objects live in. Deleting it while nodes, groups or objects remain in it is refused.",
		Attributes: map[string]schema.Attribute{
			"id":               idAttribute("the org's name"),
			"name":             nameAttribute("org"),
			"labels":           labelsAttribute(),
			"annotations":      annotationsAttribute(),
			"resource_version": resourceVersionAttribute(),
		},
	}
}

func (r *orgResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan orgModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	obj := newObject(ctx, "Org", plan.Name.ValueString(), plan.Labels, plan.Annotations, nil, &resp.Diagnostics)
	out, err := r.c.Orgs().Create(ctx, obj)
	if err != nil {
		apiError(&resp.Diagnostics, "Creating org "+plan.Name.ValueString(), err)
		return
	}
	plan.ID = plan.Name
	plan.ResourceVersion = types.StringValue(out.Metadata.ResourceVersion)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *orgResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state orgModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	out, err := r.c.Orgs().Get(ctx, state.ID.ValueString())
	if isNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		apiError(&resp.Diagnostics, "Reading org "+state.ID.ValueString(), err)
		return
	}
	state.Name = types.StringValue(out.Metadata.Name)
	state.Labels = mapValue(ctx, out.Metadata.Labels, state.Labels, &resp.Diagnostics)
	state.Annotations = mapValue(ctx, out.Metadata.Annotations, state.Annotations, &resp.Diagnostics)
	state.ResourceVersion = types.StringValue(out.Metadata.ResourceVersion)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *orgResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state orgModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	rv := state.ResourceVersion.ValueString()
	patch := map[string]any{"metadata": metaPatch(ctx, state.Labels, plan.Labels, state.Annotations, plan.Annotations, rv, &resp.Diagnostics)}
	out, err := patchObject(ctx, r.c.Orgs(), state.ID.ValueString(), patch)
	if isConcurrentChange(err) {
		conflictError(&resp.Diagnostics, "Org "+state.ID.ValueString(), rv, err)
		return
	}
	if err != nil {
		apiError(&resp.Diagnostics, "Updating org "+state.ID.ValueString(), err)
		return
	}
	plan.ID = state.ID
	plan.ResourceVersion = types.StringValue(out.Metadata.ResourceVersion)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *orgResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state orgModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	deleteObject(ctx, r.c.Orgs(), "Org", state.ID.ValueString(), state.ResourceVersion.ValueString(), &resp.Diagnostics)
}

func (r *orgResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
}
