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

// pillarResource is strata_pillar: one pillar row, a JSON object per (target, category),
// imported as <target>/<category>. A plain category's row is `data`; a secret category's is
// the sensitive `sensitive_data`, which needs pillars:read-secrets on the target: without it
// the server shows every value as "(secret)", so Terraform could neither see drift nor tell
// its own value from the mask, and a plan refuses to go on, naming the scope.
type pillarResource struct{ configured }

var (
	_ resource.ResourceWithConfigure      = (*pillarResource)(nil)
	_ resource.ResourceWithImportState    = (*pillarResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*pillarResource)(nil)
	_ resource.ResourceWithValidateConfig = (*pillarResource)(nil)
)

func newPillarResource() resource.Resource { return &pillarResource{} }

type pillarModel struct {
	ID            types.String         `tfsdk:"id"`
	Target        types.String         `tfsdk:"target"`
	Category      types.String         `tfsdk:"category"`
	Data          jsontypes.Normalized `tfsdk:"data"`
	SensitiveData jsontypes.Normalized `tfsdk:"sensitive_data"`
	ETag          types.String         `tfsdk:"etag"`
}

func (r *pillarResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pillar"
}

func (r *pillarResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "One pillar row: a JSON object stored for a target (global, an org, a group, a node) under a category.",
		Attributes: map[string]schema.Attribute{
			"id": idAttribute("<target>/<category>, e.g. node/web01/ntp, group/acme/web/ntp, org/acme/ntp, global/ntp"),
			"target": schema.StringAttribute{
				Required:      true,
				Description:   "global, org/<org>, group/<org>/<group> or node/<node>; changing it replaces the row.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"category": schema.StringAttribute{
				Required:      true,
				Description:   "The category; changing it replaces the row.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"data": schema.StringAttribute{
				CustomType:  jsontypes.NormalizedType{},
				Optional:    true,
				Description: "The row of a plain category: a JSON object (use jsonencode). Compared as JSON, not as text.",
			},
			"sensitive_data": schema.StringAttribute{
				CustomType:  jsontypes.NormalizedType{},
				Optional:    true,
				Sensitive:   true,
				Description: "The row of a secret category (exactly one of data and sensitive_data). Needs pillars:read-secrets on the target. Redacted in plans, but stored in plain text in Terraform's state.",
			},
			"etag": schema.StringAttribute{
				Computed:    true,
				Description: "The row's ETag as last read: every write and delete sends it as If-Match, so a change made since the refresh is refused instead of overwritten.",
			},
		},
	}
}

func (r *pillarResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var cfg pillarModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !cfg.Target.IsUnknown() && !cfg.Target.IsNull() {
		if _, err := client.ParsePillarTarget(cfg.Target.ValueString()); err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("target"), "Invalid pillar target", err.Error())
		}
	}
	if cfg.Data.IsUnknown() || cfg.SensitiveData.IsUnknown() {
		return
	}
	if cfg.Data.IsNull() == cfg.SensitiveData.IsNull() {
		resp.Diagnostics.AddAttributeError(path.Root("data"), "Exactly one of data and sensitive_data",
			"Set data for a plain category, sensitive_data for a secret one.")
	}
	for _, a := range []struct {
		name string
		v    jsontypes.Normalized
	}{{"data", cfg.Data}, {"sensitive_data", cfg.SensitiveData}} {
		if a.v.IsNull() {
			continue
		}
		v, err := decodeJSON([]byte(a.v.ValueString()))
		if _, isObject := v.(map[string]any); err != nil || !isObject {
			resp.Diagnostics.AddAttributeError(path.Root(a.name), "A pillar row is a JSON object", "Use jsonencode({...}).")
		}
	}
}

// categoryInfo is what the row's category says about its rows: secret, and the kind it is
// bound to (typed), which fills defaults in, so its rows compare by covers. known is false
// when the token may not read category properties (pillars:read:*): then nothing is assumed.
type categoryInfo struct {
	known  bool
	secret bool
	kind   string
}

func (r *pillarResource) category(ctx context.Context, name string, diags *diag.Diagnostics) categoryInfo {
	pc, err := r.c.PillarCategoryGet(ctx, name)
	switch {
	case err == nil:
		return categoryInfo{known: true, secret: pc.Secret, kind: pc.Kind}
	case isNotFound(err):
		return categoryInfo{known: true}
	case client.IsForbidden(err):
		return categoryInfo{}
	}
	apiError(diags, "Reading the properties of category "+name, err)
	return categoryInfo{}
}

func (ci categoryInfo) compare() func(server, user string) bool {
	if ci.kind != "" {
		return covers
	}
	return sameJSON
}

// checkAttribute refuses data for a secret category and sensitive_data for a plain one.
func (ci categoryInfo) checkAttribute(m pillarModel, diags *diag.Diagnostics) {
	if !ci.known {
		return
	}
	c := m.Category.ValueString()
	if ci.secret && !m.Data.IsNull() {
		diags.AddAttributeError(path.Root("data"), "Category "+c+" is secret",
			"A secret category's row is sensitive_data, so Terraform redacts it in plans; move the value to sensitive_data.")
	}
	if !ci.secret && !m.SensitiveData.IsNull() {
		diags.AddAttributeError(path.Root("sensitive_data"), "Category "+c+" is not secret",
			"sensitive_data is for a secret category's rows (strata_pillar_category with secret = true, applied first); use data for a plain one.")
	}
}

// masked reports whether v holds the mask a reader without read-secrets is shown.
func masked(v any) bool {
	switch x := v.(type) {
	case string:
		return x == "(secret)"
	case map[string]any:
		for _, e := range x {
			if masked(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if masked(e) {
				return true
			}
		}
	}
	return false
}

// needReadSecrets is the error of a secret row the token cannot read.
func needReadSecrets(diags *diag.Diagnostics, target, category string) {
	diags.AddAttributeError(path.Root("sensitive_data"), "Managing secret pillar row "+target+"/"+category+" needs pillars:read-secrets:"+target,
		"The server shows this token every value of the row as \"(secret)\", so Terraform can neither detect drift nor tell its value from the mask. "+
			"Use a token with the scope pillars:read-secrets:"+target+" (or a pattern covering it).")
}

func (r *pillarResource) write(ctx context.Context, m *pillarModel, ifMatch string, diags *diag.Diagnostics) {
	target, err := client.ParsePillarTarget(m.Target.ValueString())
	if err != nil {
		diags.AddAttributeError(path.Root("target"), "Invalid pillar target", err.Error())
		return
	}
	c := m.Category.ValueString()
	ci := r.category(ctx, c, diags)
	ci.checkAttribute(*m, diags)
	if diags.HasError() {
		return
	}
	body := m.Data.ValueString()
	if !m.SensitiveData.IsNull() {
		body = m.SensitiveData.ValueString()
	}
	id := m.Target.ValueString() + "/" + c
	if ifMatch == "" {
		// A create must not take over a row someone else wrote: that row is imported.
		if _, err := r.c.PillarGet(ctx, target, c); err == nil {
			diags.AddError("Pillar row "+id+" already exists", "Import it to manage it: terraform import <address> "+id)
			return
		} else if !isNotFound(err) {
			apiError(diags, "Reading pillar row "+id, err)
			return
		}
	}
	out, err := r.c.PillarSet(ctx, target, c, []byte(body), ifMatch)
	if isConcurrentChange(err) {
		conflictError(diags, "Pillar row "+id, ifMatch, err)
		return
	}
	secretRow := !m.SensitiveData.IsNull()
	if err != nil {
		if secretRow {
			err = withholdSecretValues(err)
		}
		apiError(diags, "Writing pillar row "+id, err)
		return
	}
	m.ID = types.StringValue(id)
	m.ETag = types.StringValue(out.ETag)
	if secretRow && len(out.Warnings) > 0 {
		// A warning names a kept violation and may quote its value, as errors do.
		diags.AddWarning("Pillar row "+id, fmt.Sprintf("The server returned %d warning(s) about this secret row; they are not shown here because they may quote its values. `strata pillar get` with a token that may read secrets shows the row.", len(out.Warnings)))
	} else {
		for _, w := range out.Warnings {
			diags.AddWarning("Pillar row "+id, w)
		}
	}
	if ci.secret {
		// Written, but can this token read it back? Without read-secrets the row could not
		// be managed from here on: say so now rather than at the next plan.
		row, err := r.c.PillarGetRow(ctx, target, c)
		if err == nil && row.Secret {
			if v, _ := decodeJSON(row.Data); masked(v) {
				needReadSecrets(diags, m.Target.ValueString(), c)
			}
		}
	}
}

// withholdSecretValues is the error of a refused write of a secret row as the provider
// reports it. The server explains each refused field, and to a writer that may read secrets
// (which managing the row needs) it quotes the value ("pattern: "hunter2" does not match …");
// Terraform prints diagnostics to the terminal and CI logs, where sensitive_data must never
// appear, so each field keeps its name and keyword and loses the rest, as the server itself
// words it for a writer that may not read the row.
func withholdSecretValues(err error) error {
	var e *client.Error
	if !errors.As(err, &e) || len(e.Problem.Errors) == 0 {
		return err
	}
	out := *e
	out.Problem.Errors = make([]client.FieldError, len(e.Problem.Errors))
	for i, f := range e.Problem.Errors {
		msg := "the value is secret and not shown"
		if keyword, _, ok := strings.Cut(f.Message, ":"); ok && !strings.ContainsAny(keyword, " \"'") {
			msg = keyword + ": " + msg
		}
		if f.Message != "" {
			out.Problem.Detail = strings.ReplaceAll(out.Problem.Detail, f.Message, msg)
		}
		out.Problem.Errors[i] = client.FieldError{Field: f.Field, Message: msg}
	}
	return &out
}

func (r *pillarResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan pillarModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	r.write(ctx, &plan, "", &resp.Diagnostics)
	if !plan.ETag.IsUnknown() && !plan.ETag.IsNull() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
}

func (r *pillarResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state pillarModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	etag := state.ETag.ValueString()
	if etag == "" {
		etag = "*"
	}
	r.write(ctx, &plan, etag, &resp.Diagnostics)
	if !plan.ETag.IsUnknown() && !plan.ETag.IsNull() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
}

func (r *pillarResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state pillarModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ts, c := state.Target.ValueString(), state.Category.ValueString()
	target, err := client.ParsePillarTarget(ts)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("target"), "Invalid pillar target", err.Error())
		return
	}
	row, err := r.c.PillarGetRow(ctx, target, c)
	if isNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		apiError(&resp.Diagnostics, "Reading pillar row "+ts+"/"+c, err)
		return
	}
	ci := r.category(ctx, c, &resp.Diagnostics)
	if row.Secret {
		if v, _ := decodeJSON(row.Data); masked(v) {
			needReadSecrets(&resp.Diagnostics, ts, c)
			return
		}
		prior := state.SensitiveData
		state.SensitiveData = readJSON(row.Data, prior, ci.compare())
		state.Data = jsontypes.NewNormalizedNull()
		noteServerText(ctx, resp.Private, "sensitive_data", state.SensitiveData, prior, &resp.Diagnostics)
	} else {
		prior := state.Data
		state.Data = readJSON(row.Data, prior, ci.compare())
		state.SensitiveData = jsontypes.NewNormalizedNull()
		noteServerText(ctx, resp.Private, "data", state.Data, prior, &resp.Diagnostics)
	}
	state.ID = types.StringValue(ts + "/" + c)
	state.ETag = types.StringValue(row.ETag)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// ModifyPlan keeps the state's text of data and sensitive_data when it says what the
// configuration says (semantic JSON equality does not run at plan time), and then the
// ETag, so an unchanged row plans no update.
func (r *pillarResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || req.State.Raw.IsNull() {
		return
	}
	var plan, state pillarModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	compare := sameJSON
	if r.c != nil && !plan.Category.IsUnknown() {
		compare = r.category(ctx, plan.Category.ValueString(), &resp.Diagnostics).compare()
	}
	// A kind-bound category's row compares by covers only while the state holds the
	// server's text (jsonvalue.go): a key taken out of the configuration is a change.
	compareWith := func(attr string, v jsontypes.Normalized) func(server, user string) bool {
		if holdsServerText(ctx, req.Private, attr, v, &resp.Diagnostics) {
			return compare
		}
		return sameJSON
	}
	plan.Data = planJSON(plan.Data, state.Data, compareWith("data", state.Data))
	plan.SensitiveData = planJSON(plan.SensitiveData, state.SensitiveData, compareWith("sensitive_data", state.SensitiveData))
	if plan.Data.Equal(state.Data) && plan.SensitiveData.Equal(state.SensitiveData) && plan.Target.Equal(state.Target) && plan.Category.Equal(state.Category) {
		plan.ETag = state.ETag
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

func (r *pillarResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state pillarModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	target, err := client.ParsePillarTarget(state.Target.ValueString())
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("target"), "Invalid pillar target", err.Error())
		return
	}
	id := state.Target.ValueString() + "/" + state.Category.ValueString()
	err = r.c.PillarDelete(ctx, target, state.Category.ValueString(), state.ETag.ValueString())
	switch {
	case err == nil, isNotFound(err):
	case isConcurrentChange(err):
		deleteConflictError(&resp.Diagnostics, "pillar row "+id, state.ETag.ValueString(), err)
	default:
		apiError(&resp.Diagnostics, "Deleting pillar row "+id, err)
	}
}

// ImportState splits <target>/<category>: the category is the last segment (categories and
// names hold no "/").
func (r *pillarResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	i := strings.LastIndex(req.ID, "/")
	if i <= 0 || i == len(req.ID)-1 {
		resp.Diagnostics.AddError("Invalid import ID", "A pillar row is imported as <target>/<category> (e.g. node/web01/ntp, org/acme/ntp, global/ntp), not "+strconv.Quote(req.ID))
		return
	}
	target, category := req.ID[:i], req.ID[i+1:]
	if _, err := client.ParsePillarTarget(target); err != nil {
		resp.Diagnostics.AddError("Invalid import ID", "A pillar row is imported as <target>/<category>: "+err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("target"), target)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("category"), category)...)
}
