package provider

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/stratahq/strata/client"
)

// groupResource is strata_group: a group of an org (/v1/orgs/{org}/groups/{group}) with its
// priority, label selector and static members, imported as org/name.
type groupResource struct{ configured }

var (
	_ resource.ResourceWithConfigure   = (*groupResource)(nil)
	_ resource.ResourceWithImportState = (*groupResource)(nil)
)

func newGroupResource() resource.Resource { return &groupResource{} }

type groupModel struct {
	ID              types.String `tfsdk:"id"`
	Org             types.String `tfsdk:"org"`
	Name            types.String `tfsdk:"name"`
	Priority        types.Int64  `tfsdk:"priority"`
	Selector        types.String `tfsdk:"selector"`
	Members         types.Set    `tfsdk:"members"`
	Labels          types.Map    `tfsdk:"labels"`
	Annotations     types.Map    `tfsdk:"annotations"`
	ResourceVersion types.String `tfsdk:"resource_version"`
}

func (r *groupResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_group"
}

func (r *groupResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A group of an org: its members are its static members and the org's nodes its selector matches; a node's merged pillar takes the groups' rows in priority order.",
		Attributes: map[string]schema.Attribute{
			"id": idAttribute("org/name"),
			"org": schema.StringAttribute{
				Required:      true,
				Description:   "The org the group belongs to; changing it replaces the group.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"name": nameAttribute("group"),
			"priority": schema.Int64Attribute{
				Optional:    true,
				Computed:    true,
				Default:     int64default.StaticInt64(0),
				Description: "spec.priority (32-bit, default 0): a higher priority merges later and wins.",
			},
			"selector": schema.StringAttribute{
				Optional:    true,
				Description: "spec.selector: a label selector over the org's nodes (e.g. \"role=web\"); the nodes it matches are members.",
			},
			"members": schema.SetAttribute{
				ElementType: types.StringType,
				Optional:    true,
				Description: "The static members (node names of the same org). Members added by anyone else show as a change in the plan.",
			},
			"labels":           labelsAttribute(),
			"annotations":      annotationsAttribute(),
			"resource_version": resourceVersionAttribute(),
		},
	}
}

func groupSpec(m groupModel) map[string]any {
	spec := map[string]any{"priority": m.Priority.ValueInt64()}
	if !m.Selector.IsNull() {
		spec["selector"] = m.Selector.ValueString()
	} else {
		spec["selector"] = nil // a merge patch deletes it; a create ignores the null
	}
	return spec
}

func (r *groupResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan groupModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	org, name := plan.Org.ValueString(), plan.Name.ValueString()
	spec := groupSpec(plan)
	if spec["selector"] == nil {
		delete(spec, "selector")
	}
	b, _ := json.Marshal(spec)
	groups := r.c.Groups(org)
	obj := newObject(ctx, "Group", name, plan.Labels, plan.Annotations, b, &resp.Diagnostics)
	out, err := groups.Create(ctx, obj)
	if err != nil {
		apiError(&resp.Diagnostics, "Creating group "+org+"/"+name, err)
		return
	}
	plan.ID = types.StringValue(org + "/" + name)
	plan.ResourceVersion = types.StringValue(out.Metadata.ResourceVersion)
	// The group exists from here on: record it even if a member fails, so the next apply
	// continues instead of trying to create it again.
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	if r.syncMembers(ctx, groups, name, nil, stringsOf(ctx, plan.Members, &resp.Diagnostics), &resp.Diagnostics) {
		if out, err = groups.Get(ctx, name); err != nil {
			apiError(&resp.Diagnostics, "Reading group "+org+"/"+name, err)
			return
		}
		plan.ResourceVersion = types.StringValue(out.Metadata.ResourceVersion)
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
}

// syncMembers makes the group's static members want: it adds what is missing from have and
// removes what is extra (have nil: read them first). It reports whether it changed any, since
// a membership change gives the group a new resourceVersion.
func (r *groupResource) syncMembers(ctx context.Context, groups *client.Resources, group string, have, want []string, diags *diag.Diagnostics) bool {
	if have == nil {
		have = []string{}
		if len(want) == 0 {
			return false // a new group has no members to remove
		}
	}
	haveSet := map[string]bool{}
	for _, n := range have {
		haveSet[n] = true
	}
	wantSet := map[string]bool{}
	changed := false
	for _, n := range want {
		wantSet[n] = true
		if !haveSet[n] {
			if err := groups.AddMember(ctx, group, n); err != nil {
				apiError(diags, "Adding node "+n+" to group "+group, err)
				return changed
			}
			changed = true
		}
	}
	for _, n := range have {
		if !wantSet[n] {
			if err := groups.RemoveMember(ctx, group, n); err != nil {
				apiError(diags, "Removing node "+n+" from group "+group, err)
				return changed
			}
			changed = true
		}
	}
	return changed
}

// staticMembers lists the group's static members, sorted.
func staticMembers(ctx context.Context, groups *client.Resources, group string) ([]string, error) {
	ms, err := groups.Members(ctx, group)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, m := range ms {
		if m.Static {
			out = append(out, m.Node)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (r *groupResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state groupModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	org, name, ok := strings.Cut(state.ID.ValueString(), "/")
	if !ok {
		resp.Diagnostics.AddAttributeError(path.Root("id"), "Invalid group id", "A group's id is org/name, not "+strconv.Quote(state.ID.ValueString()))
		return
	}
	groups := r.c.Groups(org)
	out, err := groups.Get(ctx, name)
	if isNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		apiError(&resp.Diagnostics, "Reading group "+org+"/"+name, err)
		return
	}
	members, err := staticMembers(ctx, groups, name)
	if isNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		apiError(&resp.Diagnostics, "Reading the members of group "+org+"/"+name, err)
		return
	}
	spec, err := specMap(out.Spec)
	if err != nil {
		apiError(&resp.Diagnostics, "Reading group "+org+"/"+name, err)
		return
	}
	state.Org = types.StringValue(org)
	state.Name = types.StringValue(out.Metadata.Name)
	state.Priority = types.Int64Value(0)
	if p, ok := spec["priority"].(json.Number); ok {
		if n, err := p.Int64(); err == nil {
			state.Priority = types.Int64Value(n)
		}
	}
	if s, ok := spec["selector"].(string); ok {
		state.Selector = types.StringValue(s)
	} else {
		state.Selector = types.StringNull()
	}
	if len(members) == 0 && state.Members.IsNull() {
		state.Members = types.SetNull(types.StringType)
	} else {
		v, d := types.SetValueFrom(ctx, types.StringType, members)
		resp.Diagnostics.Append(d...)
		state.Members = v
	}
	state.Labels = mapValue(ctx, out.Metadata.Labels, state.Labels, &resp.Diagnostics)
	state.Annotations = mapValue(ctx, out.Metadata.Annotations, state.Annotations, &resp.Diagnostics)
	state.ResourceVersion = types.StringValue(out.Metadata.ResourceVersion)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *groupResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state groupModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	org, name := state.Org.ValueString(), state.Name.ValueString()
	groups := r.c.Groups(org)
	rv := state.ResourceVersion.ValueString()
	patch := map[string]any{
		"metadata": metaPatch(ctx, state.Labels, plan.Labels, state.Annotations, plan.Annotations, rv, &resp.Diagnostics),
		"spec":     groupSpec(plan),
	}
	out, err := patchObject(ctx, groups, name, patch)
	if isConcurrentChange(err) {
		conflictError(&resp.Diagnostics, "Group "+org+"/"+name, rv, err)
		return
	}
	if err != nil {
		apiError(&resp.Diagnostics, "Updating group "+org+"/"+name, err)
		return
	}
	plan.ID = state.ID
	plan.ResourceVersion = types.StringValue(out.Metadata.ResourceVersion)
	// The members the refresh read are the ones the resourceVersion just checked vouches for.
	have := stringsOf(ctx, state.Members, &resp.Diagnostics)
	if r.syncMembers(ctx, groups, name, have, stringsOf(ctx, plan.Members, &resp.Diagnostics), &resp.Diagnostics) {
		if out, err = groups.Get(ctx, name); err != nil {
			apiError(&resp.Diagnostics, "Reading group "+org+"/"+name, err)
		} else {
			plan.ResourceVersion = types.StringValue(out.Metadata.ResourceVersion)
		}
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *groupResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state groupModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	deleteObject(ctx, r.c.Groups(state.Org.ValueString()), "Group", state.Name.ValueString(), state.ResourceVersion.ValueString(), &resp.Diagnostics)
}

func (r *groupResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	org, name, ok := strings.Cut(req.ID, "/")
	if !ok || org == "" || name == "" || strings.Contains(name, "/") {
		resp.Diagnostics.AddError("Invalid import ID", "A group is imported as org/name (e.g. acme/web), not "+strconv.Quote(req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("org"), org)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
}
