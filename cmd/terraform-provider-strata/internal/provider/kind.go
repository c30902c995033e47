package provider

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-jsontypes/jsontypes"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/stratahq/strata/client"
)

// kindResource is strata_kind: a user kind in the schema registry (PUT /v1/kinds/{kind}),
// imported by its name. Each change of the schema registers a new revision, which the
// registry checks against the stored objects; a change it classifies as needing consent
// is refused until an acknowledge block names it (path and rule, as the refusal lists).
// The registry keeps every revision and has no delete, so destroying the resource only
// forgets it.
type kindResource struct{ configured }

var (
	_ resource.ResourceWithConfigure   = (*kindResource)(nil)
	_ resource.ResourceWithImportState = (*kindResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*kindResource)(nil)
)

func newKindResource() resource.Resource { return &kindResource{} }

type kindModel struct {
	ID          types.String         `tfsdk:"id"`
	Name        types.String         `tfsdk:"name"`
	Scope       types.String         `tfsdk:"scope"`
	Schema      jsontypes.Normalized `tfsdk:"schema"`
	Acknowledge []kindAckModel       `tfsdk:"acknowledge"`
	Revision    types.Int64          `tfsdk:"revision"`
}

type kindAckModel struct {
	Path types.String `tfsdk:"path"`
	Rule types.String `tfsdk:"rule"`
}

func (r *kindResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_kind"
}

func (r *kindResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A user kind: its scope and the JSON Schema of its objects' spec. Destroying it removes it from the state only (the registry keeps every revision).",
		Attributes: map[string]schema.Attribute{
			"id":   idAttribute("the kind's name"),
			"name": nameAttribute("kind"),
			"scope": schema.StringAttribute{
				Required:      true,
				Description:   "org (objects live in an org) or global; it cannot change, so changing it replaces the resource (which the registry then refuses).",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"schema": schema.StringAttribute{
				CustomType:  jsontypes.NormalizedType{},
				Required:    true,
				Description: "The JSON Schema (2020-12, strata's structural subset) of spec, as a JSON string (use jsonencode).",
			},
			"revision": schema.Int64Attribute{
				Computed:    true,
				Description: "The registry's current revision of the kind as last read; an update is refused when another revision was registered since.",
			},
		},
		Blocks: map[string]schema.Block{
			"acknowledge": schema.ListNestedBlock{
				Description: "A change of the schema accepted knowingly: path and rule as the registry's refusal names them.",
				NestedObject: schema.NestedBlockObject{
					Attributes: map[string]schema.Attribute{
						"path": schema.StringAttribute{Required: true, Description: "The change's path, e.g. /properties/size."},
						"rule": schema.StringAttribute{Required: true, Description: "The change's rule (or ack name)."},
					},
				},
			},
		},
	}
}

func (m kindModel) request() client.KindRequest {
	req := client.KindRequest{Scope: m.Scope.ValueString(), Schema: []byte(m.Schema.ValueString())}
	for _, a := range m.Acknowledge {
		req.Acknowledge = append(req.Acknowledge, client.KindAck{Path: a.Path.ValueString(), Rule: a.Rule.ValueString()})
	}
	return req
}

// kindRefused explains a refused registration with its report: each change that needs an
// acknowledgement or was rejected, and the way forward the registry gives.
func kindRefused(diags *diag.Diagnostics, kind string, err error) {
	var e *client.Error
	if !errors.As(err, &e) || e.Problem.Report == nil {
		apiError(diags, "Registering kind "+kind, err)
		return
	}
	var b strings.Builder
	b.WriteString(err.Error())
	for _, f := range e.Problem.Report.Changes {
		if f.Acknowledged || f.Earlier || f.Verdict == "accept" {
			continue
		}
		fmt.Fprintf(&b, "\n\n%s (rule %s, %s): %s", f.Path, f.Rule, f.Verdict, f.Message)
		if f.WayForward != "" {
			fmt.Fprintf(&b, "\n  %s", f.WayForward)
		}
		if f.Verdict != "reject" {
			rule := f.Ack // the acknowledgement's name, when the finding has one
			if rule == "" {
				rule = f.Rule
			}
			fmt.Fprintf(&b, "\n  to accept it: acknowledge { path = %q rule = %q }", f.Path, rule)
		}
	}
	diags.AddError("Registering kind "+kind+" was refused", b.String())
}

func reportWarnings(diags *diag.Diagnostics, kind string, res client.KindResult) {
	for _, a := range res.Report.RedundantAcks {
		diags.AddWarning("Kind "+kind+": acknowledgement not needed", fmt.Sprintf("acknowledge { path = %q rule = %q }: %s", a.Path, a.Rule, a.Reason))
	}
}

func (r *kindResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan kindModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := plan.Name.ValueString()
	// A registration of an existing kind would silently become its next revision. The
	// registry has no delete, so a kind Terraform destroyed (forgot) is still there when the
	// configuration is applied again: that one, with the very schema and scope configured,
	// is taken as it is; any other is imported first.
	if k, err := r.c.Kind(ctx, name); err == nil {
		if k.Builtin || k.Scope != plan.Scope.ValueString() || !sameJSON(string(k.Schema), plan.Schema.ValueString()) {
			resp.Diagnostics.AddError("Kind "+name+" already exists", "Its registered schema or scope differs from the configuration's. Import it to manage it: terraform import <address> "+name)
			return
		}
		plan.ID = plan.Name
		plan.Revision = types.Int64Value(int64(k.Revision))
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		return
	} else if !isNotFound(err) {
		apiError(&resp.Diagnostics, "Reading kind "+name, err)
		return
	}
	res, err := r.c.KindApply(ctx, name, plan.request(), false)
	if err != nil {
		kindRefused(&resp.Diagnostics, name, err)
		return
	}
	reportWarnings(&resp.Diagnostics, name, res)
	plan.ID = plan.Name
	plan.Revision = types.Int64Value(int64(res.Revision))
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *kindResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state kindModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	k, err := r.c.Kind(ctx, state.ID.ValueString())
	if isNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		apiError(&resp.Diagnostics, "Reading kind "+state.ID.ValueString(), err)
		return
	}
	if k.Builtin {
		resp.Diagnostics.AddError("Kind "+k.Name+" is built in", "Built-in kinds (Org, Node, Group) are not managed as strata_kind; use strata_org, strata_node and strata_group.")
		return
	}
	state.Name = types.StringValue(k.Name)
	state.Scope = types.StringValue(k.Scope)
	state.Schema = readJSON(k.Schema, state.Schema, sameJSON)
	state.Revision = types.Int64Value(int64(k.Revision))
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *kindResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state kindModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := state.ID.ValueString()
	// The registry takes no precondition, so the revision read at refresh is checked here:
	// a revision registered by someone else since is an error, not silently superseded.
	cur, err := r.c.Kind(ctx, name)
	if err != nil {
		apiError(&resp.Diagnostics, "Reading kind "+name, err)
		return
	}
	if int64(cur.Revision) != state.Revision.ValueInt64() {
		conflictError(&resp.Diagnostics, "Kind "+name, "revision "+strconv.FormatInt(state.Revision.ValueInt64(), 10),
			fmt.Errorf("the registry is at revision %d", cur.Revision))
		return
	}
	res, err := r.c.KindApply(ctx, name, plan.request(), false)
	if err != nil {
		kindRefused(&resp.Diagnostics, name, err)
		return
	}
	reportWarnings(&resp.Diagnostics, name, res)
	plan.ID = state.ID
	plan.Revision = types.Int64Value(int64(res.Revision))
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// ModifyPlan keeps the state's schema text when it is the same JSON as the configuration's,
// and the revision when nothing the registry stores changes.
func (r *kindResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || req.State.Raw.IsNull() {
		return
	}
	var plan, state kindModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.Schema = planJSON(plan.Schema, state.Schema, sameJSON)
	if plan.Schema.Equal(state.Schema) && plan.Scope.Equal(state.Scope) {
		plan.Revision = state.Revision
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

func (r *kindResource) Delete(ctx context.Context, _ resource.DeleteRequest, resp *resource.DeleteResponse) {
	resp.Diagnostics.AddWarning("The kind stays registered",
		"strata's registry keeps every revision of a kind and has no delete: the kind was removed from the Terraform state only. Its objects, if any remain, still follow its schema.")
}

func (r *kindResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
}
