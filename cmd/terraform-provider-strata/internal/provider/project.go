package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/stratahq/strata/client"
)

// projectResource is strata_project: a Terraform/OpenTofu state project (a PostgreSQL
// schema), imported by its name. Turning encryption on converts the existing states in
// place; turning it off is not an operation strata has, so it would replace the project,
// which strata refuses while the project holds states.
type projectResource struct{ configured }

var (
	_ resource.ResourceWithConfigure   = (*projectResource)(nil)
	_ resource.ResourceWithImportState = (*projectResource)(nil)
)

func newProjectResource() resource.Resource { return &projectResource{} }

type projectModel struct {
	ID        types.String `tfsdk:"id"`
	Name      types.String `tfsdk:"name"`
	Encrypted types.Bool   `tfsdk:"encrypted"`
}

func (r *projectResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_project"
}

func (r *projectResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A Terraform/OpenTofu state project. Destroying it is refused while it holds states.",
		Attributes: map[string]schema.Attribute{
			"id":   idAttribute("the project's name"),
			"name": nameAttribute("project"),
			"encrypted": schema.BoolAttribute{
				Optional:    true,
				Computed:    true,
				Default:     booldefault.StaticBool(false),
				Description: "Store the project's states encrypted. false → true converts the stored states in place; true → false replaces the project.",
				PlanModifiers: []planmodifier.Bool{boolplanmodifier.RequiresReplaceIf(
					func(_ context.Context, req planmodifier.BoolRequest, resp *boolplanmodifier.RequiresReplaceIfFuncResponse) {
						resp.RequiresReplace = req.StateValue.ValueBool() && !req.PlanValue.ValueBool()
					}, "Decrypting a project is not an operation strata has: it is replaced.", "Decrypting a project is not an operation strata has: it is replaced.")},
			},
		},
	}
}

func (r *projectResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan projectModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := plan.Name.ValueString()
	// PUT adopts an existing project silently; a resource must not take one over unasked.
	if _, err := r.c.ProjectGet(ctx, name); err == nil {
		resp.Diagnostics.AddError("Project "+name+" already exists", "Import it to manage it: terraform import <address> "+name)
		return
	} else if !isNotFound(err) {
		apiError(&resp.Diagnostics, "Reading project "+name, err)
		return
	}
	out, err := r.c.ProjectCreate(ctx, name, client.Project{Encryption: plan.Encrypted.ValueBool()})
	if err != nil {
		apiError(&resp.Diagnostics, "Creating project "+name, err)
		return
	}
	plan.ID = plan.Name
	plan.Encrypted = types.BoolValue(out.Encryption)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *projectResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state projectModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	out, err := r.c.ProjectGet(ctx, state.ID.ValueString())
	if isNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		apiError(&resp.Diagnostics, "Reading project "+state.ID.ValueString(), err)
		return
	}
	state.Name = types.StringValue(out.Name)
	state.Encrypted = types.BoolValue(out.Encryption)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Update can only turn encryption on (off replaces): the conversion runs in batches until
// the server reports it done.
func (r *projectResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state projectModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := state.ID.ValueString()
	if plan.Encrypted.ValueBool() && !state.Encrypted.ValueBool() {
		for {
			res, err := r.c.ProjectEncrypt(ctx, name, 0)
			if err != nil {
				apiError(&resp.Diagnostics, "Encrypting project "+name, err)
				return
			}
			if res.Done {
				break
			}
		}
	}
	plan.ID = state.ID
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *projectResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state projectModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := state.ID.ValueString()
	if err := r.c.ProjectDelete(ctx, name, false); err != nil && !isNotFound(err) {
		apiError(&resp.Diagnostics, "Deleting project "+name, err)
	}
}

func (r *projectResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
}
