package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/stratahq/strata/client"
)

// tokenResource is strata_token: an API token. Tokens cannot be changed, so every change
// replaces it (a new secret). It is not importable: the server shows a token's secret once,
// in the answer that created it, so an imported token would have none.
type tokenResource struct{ configured }

var (
	_ resource.ResourceWithConfigure      = (*tokenResource)(nil)
	_ resource.ResourceWithValidateConfig = (*tokenResource)(nil)
)

func newTokenResource() resource.Resource { return &tokenResource{} }

type tokenModel struct {
	ID        types.String `tfsdk:"id"`
	Name      types.String `tfsdk:"name"`
	Scopes    types.List   `tfsdk:"scopes"`
	ExpiresAt types.String `tfsdk:"expires_at"`
	Secret    types.String `tfsdk:"secret"`
}

func (r *tokenResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_token"
}

func (r *tokenResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "An API token (creating one needs admin). Any change replaces it. Not importable: its secret is shown only when it is created.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:      true,
				Description:   "The token's id.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "The token's name, unique among live tokens."},
			"scopes": schema.ListAttribute{
				ElementType:   types.StringType,
				Required:      true,
				PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplace()},
				Description:   "Scopes such as nodes:read:* or pillars:write:org/acme.",
			},
			"expires_at": schema.StringAttribute{
				Optional:      true,
				PlanModifiers: replace,
				Description:   "When the token stops working (RFC 3339); unset: never. An expired token disappears from the state, so the next apply creates a new one.",
			},
			"secret": schema.StringAttribute{
				Computed:      true,
				Sensitive:     true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
				Description:   "The token's secret, known only to the apply that created it. Stored in plain text in Terraform's state.",
			},
		},
	}
}

// ValidateConfig refuses an expires_at that is not an RFC 3339 time at plan time, naming the
// attribute, rather than in the middle of an apply.
func (r *tokenResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var at types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("expires_at"), &at)...)
	if resp.Diagnostics.HasError() || at.IsNull() || at.IsUnknown() {
		return
	}
	if _, err := parseExpiry(at.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("expires_at"), "Invalid expires_at", err.Error())
	}
}

// parseExpiry parses expires_at, explaining the format when it is not one.
func parseExpiry(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("an RFC 3339 time, e.g. 2027-01-31T00:00:00Z: %w", err)
	}
	return t, nil
}

func (r *tokenResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan tokenModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	in := client.TokenCreateRequest{Name: plan.Name.ValueString(), Scopes: stringsOf(ctx, plan.Scopes, &resp.Diagnostics)}
	if !plan.ExpiresAt.IsNull() {
		t, err := parseExpiry(plan.ExpiresAt.ValueString())
		if err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("expires_at"), "Invalid expires_at", err.Error())
			return
		}
		in.ExpiresAt = &t
	}
	out, err := r.c.TokenCreate(ctx, in)
	if err != nil {
		apiError(&resp.Diagnostics, "Creating token "+in.Name, err)
		return
	}
	plan.ID = types.StringValue(out.ID)
	plan.Secret = types.StringValue(out.Secret)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// Read finds the token in the list (there is no GET of one token); a revoked or expired one
// is gone.
func (r *tokenResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state tokenModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	tokens, err := r.c.TokenList(ctx)
	if err != nil {
		apiError(&resp.Diagnostics, "Listing tokens", err)
		return
	}
	for _, t := range tokens {
		if t.ID != state.ID.ValueString() {
			continue
		}
		if t.RevokedAt != nil || (t.ExpiresAt != nil && !t.ExpiresAt.After(time.Now())) {
			break
		}
		state.Name = types.StringValue(t.Name)
		v, d := types.ListValueFrom(ctx, types.StringType, t.Scopes)
		resp.Diagnostics.Append(d...)
		state.Scopes = v
		resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
		return
	}
	resp.State.RemoveResource(ctx)
}

func (r *tokenResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	// Every attribute requires replacement; nothing is ever updated in place.
	resp.Diagnostics.AddError("Tokens cannot be updated", "Every change replaces a token; this is a bug in the provider.")
}

func (r *tokenResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state tokenModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.c.TokenRevoke(ctx, state.ID.ValueString()); err != nil && !isNotFound(err) {
		apiError(&resp.Diagnostics, "Revoking token "+state.Name.ValueString(), err)
	}
}
