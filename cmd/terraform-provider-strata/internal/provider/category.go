package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/stratahq/strata/client"
)

// categoryResource is strata_pillar_category: a pillar category's properties (the kind its
// rows follow, whether they are secret), imported by the category's name. The properties
// apply at every target; the rows are strata_pillar resources.
type categoryResource struct{ configured }

var (
	_ resource.ResourceWithConfigure   = (*categoryResource)(nil)
	_ resource.ResourceWithImportState = (*categoryResource)(nil)
)

func newCategoryResource() resource.Resource { return &categoryResource{} }

type categoryModel struct {
	ID     types.String `tfsdk:"id"`
	Name   types.String `tfsdk:"name"`
	Kind   types.String `tfsdk:"kind"`
	Secret types.Bool   `tfsdk:"secret"`
	ETag   types.String `tfsdk:"etag"`
}

// noProperties is the ETag of a category that has rows but no properties.
const noProperties = `"none"`

func (r *categoryResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pillar_category"
}

func (r *categoryResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A pillar category's properties: the user kind its rows follow (a typed category) and whether its rows are secret (stored encrypted, masked for readers without pillars:read-secrets).",
		Attributes: map[string]schema.Attribute{
			"id":   idAttribute("the category's name"),
			"name": nameAttribute("category"),
			"kind": schema.StringAttribute{
				Optional:    true,
				Description: "A user kind whose schema every row of the category must follow.",
			},
			"secret": schema.BoolAttribute{
				Optional:    true,
				Computed:    true,
				Default:     booldefault.StaticBool(false),
				Description: "Store every row encrypted and mask it for readers without pillars:read-secrets. Turning it off needs pillars:read-secrets:*.",
			},
			"etag": schema.StringAttribute{
				Computed:    true,
				Description: "The properties' ETag as last read, sent as If-Match with every change.",
			},
		},
	}
}

func (m categoryModel) request() client.PillarCategoryRequest {
	return client.PillarCategoryRequest{Kind: m.Kind.ValueString(), Secret: m.Secret.ValueBool()}
}

func (r *categoryResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan categoryModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := plan.Name.ValueString()
	ifMatch := ""
	cur, err := r.c.PillarCategoryGet(ctx, name)
	switch {
	case err == nil && cur.ETag != noProperties:
		resp.Diagnostics.AddError("Category "+name+" already has properties", "Import it to manage it: terraform import <address> "+name)
		return
	case err == nil:
		ifMatch = cur.ETag // rows but no properties yet: only if that is still so
	case !isNotFound(err):
		apiError(&resp.Diagnostics, "Reading category "+name, err)
		return
	}
	out, err := r.c.PillarCategorySetIf(ctx, name, plan.request(), ifMatch)
	if isConcurrentChange(err) {
		conflictError(&resp.Diagnostics, "Category "+name, ifMatch, err)
		return
	}
	if err != nil {
		apiError(&resp.Diagnostics, "Setting the properties of category "+name, err)
		return
	}
	plan.ID = plan.Name
	plan.ETag = types.StringValue(out.ETag)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *categoryResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state categoryModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	out, err := r.c.PillarCategoryGet(ctx, state.ID.ValueString())
	if isNotFound(err) || (err == nil && out.ETag == noProperties) {
		resp.State.RemoveResource(ctx) // the properties are gone (rows may remain)
		return
	}
	if err != nil {
		apiError(&resp.Diagnostics, "Reading category "+state.ID.ValueString(), err)
		return
	}
	state.Name = types.StringValue(out.Category)
	if out.Kind == "" {
		state.Kind = types.StringNull()
	} else {
		state.Kind = types.StringValue(out.Kind)
	}
	state.Secret = types.BoolValue(out.Secret)
	state.ETag = types.StringValue(out.ETag)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *categoryResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state categoryModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := state.ID.ValueString()
	out, err := r.c.PillarCategorySetIf(ctx, name, plan.request(), state.ETag.ValueString())
	if isConcurrentChange(err) {
		conflictError(&resp.Diagnostics, "Category "+name, state.ETag.ValueString(), err)
		return
	}
	if err != nil {
		apiError(&resp.Diagnostics, "Setting the properties of category "+name, err)
		return
	}
	plan.ID = state.ID
	plan.ETag = types.StringValue(out.ETag)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// Delete removes the properties; the category's rows stay, untyped. A secret category must
// be made plain first (the API refuses to drop the properties of one), which would store its
// rows unencrypted: so that is done only when it has no rows left, and refused otherwise.
func (r *categoryResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state categoryModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := state.ID.ValueString()
	cur, err := r.c.PillarCategoryGet(ctx, name)
	if isNotFound(err) || (err == nil && cur.ETag == noProperties) {
		return
	}
	if err != nil {
		apiError(&resp.Diagnostics, "Reading category "+name, err)
		return
	}
	if cur.ETag != state.ETag.ValueString() {
		deleteConflictError(&resp.Diagnostics, "the properties of category "+name, state.ETag.ValueString(), errEtag(cur.ETag))
		return
	}
	if cur.Secret {
		if cur.Rows > 0 {
			resp.Diagnostics.AddError("Category "+name+" still has secret rows",
				"Removing a secret category's properties would first store its rows unencrypted, so it is done only once the category has no rows. Delete its strata_pillar rows first (or keep the category).")
			return
		}
		if _, err := r.c.PillarCategorySetIf(ctx, name, client.PillarCategoryRequest{}, cur.ETag); err != nil {
			apiError(&resp.Diagnostics, "Making category "+name+" plain before removing its properties", err)
			return
		}
	}
	if err := r.c.PillarCategoryDelete(ctx, name); err != nil && !isNotFound(err) {
		apiError(&resp.Diagnostics, "Removing the properties of category "+name, err)
	}
}

func (r *categoryResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
}

type errEtag string

func (e errEtag) Error() string { return "the properties' ETag is now " + string(e) }
