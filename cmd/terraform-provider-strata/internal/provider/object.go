package provider

import (
	"context"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-jsontypes/jsontypes"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/stratahq/strata/client"
)

// objectResource is strata_object: an object of a user kind, in an org
// (/v1/orgs/{org}/resources/{kind}/{name}) or global (/v1/resources/{kind}/{name}), imported
// as <Kind>/<org>/<name> or <Kind>/<name>. Its spec is what the configuration writes; the
// kind's schema may fill in defaults and normalize numbers, which are not drift (covers).
type objectResource struct{ configured }

var (
	_ resource.ResourceWithConfigure   = (*objectResource)(nil)
	_ resource.ResourceWithImportState = (*objectResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*objectResource)(nil)
)

func newObjectResource() resource.Resource { return &objectResource{} }

type objectModel struct {
	ID              types.String         `tfsdk:"id"`
	Kind            types.String         `tfsdk:"kind"`
	Org             types.String         `tfsdk:"org"`
	Name            types.String         `tfsdk:"name"`
	Labels          types.Map            `tfsdk:"labels"`
	Annotations     types.Map            `tfsdk:"annotations"`
	Spec            jsontypes.Normalized `tfsdk:"spec"`
	ResourceVersion types.String         `tfsdk:"resource_version"`
}

func (r *objectResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_object"
}

func (r *objectResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "An object of a user kind (strata_kind); its spec is validated by the kind's schema.",
		Attributes: map[string]schema.Attribute{
			"id": idAttribute("<Kind>/<org>/<name>, or <Kind>/<name> for a global kind"),
			"kind": schema.StringAttribute{
				Required:      true,
				Description:   "The kind's name (e.g. Database); changing it replaces the object.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"org": schema.StringAttribute{
				Optional:      true,
				Description:   "The org, for kinds of scope org; unset for global kinds. Changing it replaces the object.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"name":        nameAttribute("object"),
			"labels":      labelsAttribute(),
			"annotations": annotationsAttribute(),
			"spec": schema.StringAttribute{
				CustomType:  jsontypes.NormalizedType{},
				Required:    true,
				Description: "The spec, a JSON object (use jsonencode). Keys the kind's schema fills in (defaults) are the server's: only what the configuration sets is compared, and a key taken out of the configuration is removed.",
			},
			"resource_version": resourceVersionAttribute(),
		},
	}
}

func (m objectModel) resources(c *client.Client) *client.Resources {
	return c.Objects(m.Kind.ValueString(), m.Org.ValueString())
}

func (m objectModel) id() string {
	if m.Org.IsNull() || m.Org.ValueString() == "" {
		return m.Kind.ValueString() + "/" + m.Name.ValueString()
	}
	return m.Kind.ValueString() + "/" + m.Org.ValueString() + "/" + m.Name.ValueString()
}

func (r *objectResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan objectModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	obj := newObject(ctx, plan.Kind.ValueString(), plan.Name.ValueString(), plan.Labels, plan.Annotations, []byte(plan.Spec.ValueString()), &resp.Diagnostics)
	out, err := plan.resources(r.c).Create(ctx, obj)
	if err != nil {
		apiError(&resp.Diagnostics, "Creating "+plan.id(), err)
		return
	}
	plan.ID = types.StringValue(plan.id())
	plan.ResourceVersion = types.StringValue(out.Metadata.ResourceVersion)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *objectResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state objectModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	out, err := state.resources(r.c).Get(ctx, state.Name.ValueString())
	if isNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		apiError(&resp.Diagnostics, "Reading "+state.id(), err)
		return
	}
	spec := out.Spec
	if len(spec) == 0 {
		spec = []byte("{}")
	}
	state.ID = types.StringValue(state.id())
	prior := state.Spec
	state.Spec = readJSON(spec, prior, covers)
	noteServerText(ctx, resp.Private, "spec", state.Spec, prior, &resp.Diagnostics)
	state.Labels = mapValue(ctx, out.Metadata.Labels, state.Labels, &resp.Diagnostics)
	state.Annotations = mapValue(ctx, out.Metadata.Annotations, state.Annotations, &resp.Diagnostics)
	state.ResourceVersion = types.StringValue(out.Metadata.ResourceVersion)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *objectResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state objectModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	rv := state.ResourceVersion.ValueString()
	obj := newObject(ctx, plan.Kind.ValueString(), plan.Name.ValueString(), plan.Labels, plan.Annotations, []byte(plan.Spec.ValueString()), &resp.Diagnostics)
	obj.Metadata.ResourceVersion = rv
	out, warnings, err := plan.resources(r.c).Put(ctx, obj)
	if isConcurrentChange(err) {
		conflictError(&resp.Diagnostics, state.id(), rv, err)
		return
	}
	if err != nil {
		apiError(&resp.Diagnostics, "Updating "+state.id(), err)
		return
	}
	for _, w := range warnings {
		resp.Diagnostics.AddWarning(state.id(), w)
	}
	plan.ID = state.ID
	plan.ResourceVersion = types.StringValue(out.Metadata.ResourceVersion)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// ModifyPlan keeps the state's spec when it says what the configuration says: exactly, or,
// when the state holds the server's spec (an import; defaults included), when it covers the
// configuration's (jsonvalue.go says why only then); and then the resourceVersion when labels and
// annotations are unchanged too.
func (r *objectResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || req.State.Raw.IsNull() {
		return
	}
	var plan, state objectModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	compare := sameJSON
	if holdsServerText(ctx, req.Private, "spec", state.Spec, &resp.Diagnostics) {
		compare = covers
	}
	plan.Spec = planJSON(plan.Spec, state.Spec, compare)
	if plan.Spec.Equal(state.Spec) && plan.Labels.Equal(state.Labels) && plan.Annotations.Equal(state.Annotations) &&
		plan.Kind.Equal(state.Kind) && plan.Org.Equal(state.Org) && plan.Name.Equal(state.Name) {
		plan.ResourceVersion = state.ResourceVersion
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

func (r *objectResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state objectModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	deleteObject(ctx, state.resources(r.c), state.Kind.ValueString(), state.Name.ValueString(), state.ResourceVersion.ValueString(), &resp.Diagnostics)
}

func (r *objectResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	parts := strings.Split(req.ID, "/")
	for _, p := range parts {
		if p == "" {
			parts = nil
		}
	}
	var kind, org, name string
	switch len(parts) {
	case 2:
		kind, name = parts[0], parts[1]
	case 3:
		kind, org, name = parts[0], parts[1], parts[2]
	default:
		resp.Diagnostics.AddError("Invalid import ID", "An object is imported as <Kind>/<org>/<name> (kinds of scope org) or <Kind>/<name> (global kinds), not "+strconv.Quote(req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("kind"), kind)...)
	if org != "" {
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("org"), org)...)
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
}
