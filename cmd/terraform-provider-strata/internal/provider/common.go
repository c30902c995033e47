package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/stratahq/strata/client"
)

// configured holds the client the provider's Configure handed out. Terraform calls some
// RPCs (validation, early plans) before the provider is configured, with no client: then c
// stays nil, and resources that need it during planning check.
type configured struct {
	c *client.Client
}

func (r *configured) configure(data any, diags *diag.Diagnostics) {
	if data == nil {
		return
	}
	c, ok := data.(*client.Client)
	if !ok {
		diags.AddError("Unexpected provider data", fmt.Sprintf("expected *client.Client, got %T; this is a bug in the provider", data))
		return
	}
	r.c = c
}

// Configure receives the client for a resource.
func (r *configured) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.configure(req.ProviderData, &resp.Diagnostics)
}

// configuredDS is configured for data sources.
type configuredDS struct {
	c *client.Client
}

// Configure receives the client for a data source.
func (d *configuredDS) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	(*configured)(d).configure(req.ProviderData, &resp.Diagnostics)
}

// apiError adds err as an error diagnostic: the server's problem (the field and reason it
// names) is the detail, so the user reads the server's own words.
func apiError(diags *diag.Diagnostics, summary string, err error) {
	diags.AddError(summary, err.Error())
}

// conflictError explains a refused conditional write: the object changed on the server since
// Terraform last read it. Retrying automatically would overwrite that change, which is what
// the condition exists to prevent, so the user re-plans against the current object instead.
func conflictError(diags *diag.Diagnostics, what, version string, err error) {
	diags.AddError(what+" changed on the server since Terraform read it",
		fmt.Sprintf("The write carried the version Terraform read (%s) and the server refused it, because another change was made since: %v\n\n"+
			"Run terraform plan (or apply) again: the refresh reads the current object and the plan shows what would change.", version, err))
}

// refreshFirst is the way forward after a refused delete. Terraform hands Delete the state as
// it was stored, not as a later plan's refresh reads it, so applying again would carry the
// same stale version and be refused again: the state is refreshed first.
const refreshFirst = "\n\nTerraform sends a delete the version stored in its state, which a plain re-run does not update for a resource it deletes: " +
	"run terraform apply -refresh-only to store the current object, then apply (or destroy) again; its plan shows the object as it is now."

// deleteConflictError explains a refused conditional delete (refreshFirst).
func deleteConflictError(diags *diag.Diagnostics, what, version string, err error) {
	diags.AddError("Deleting "+what+" was refused",
		fmt.Sprintf("The delete carried the version Terraform read (%s) and the server refused it, because another change was made since: %v", version, err)+refreshFirst)
}

// isConcurrentChange reports the server's refusals of a stale precondition: 409 for a
// resourceVersion, 412 for an If-Match ETag.
func isConcurrentChange(err error) bool {
	return client.IsConflict(err) || client.IsPreconditionFailed(err)
}

// isNotFound reports a 404, which Read turns into removal from state (the next plan creates
// the object again).
func isNotFound(err error) bool { return client.IsNotFound(err) }

// mapValue turns labels or annotations read from the server into the attribute's value. An
// object without any is null when the prior value was null (the configuration did not set
// the attribute), so not setting labels and having none is no difference; otherwise it is
// the map, which Terraform compares with the configuration: labels added or changed by
// someone else show in the plan.
func mapValue(ctx context.Context, m map[string]string, prior types.Map, diags *diag.Diagnostics) types.Map {
	if len(m) == 0 && (prior.IsNull() || prior.IsUnknown()) {
		return types.MapNull(types.StringType)
	}
	if m == nil {
		m = map[string]string{}
	}
	v, d := types.MapValueFrom(ctx, types.StringType, m)
	diags.Append(d...)
	return v
}

// mapOf is the map an attribute holds (empty when null).
func mapOf(ctx context.Context, v types.Map, diags *diag.Diagnostics) map[string]string {
	out := map[string]string{}
	if v.IsNull() || v.IsUnknown() {
		return out
	}
	diags.Append(v.ElementsAs(ctx, &out, false)...)
	return out
}

// stringsOf is the list or set of strings an attribute holds.
func stringsOf(ctx context.Context, v interface {
	IsNull() bool
	IsUnknown() bool
	Elements() []attr.Value
}, diags *diag.Diagnostics) []string {
	out := []string{}
	if v.IsNull() || v.IsUnknown() {
		return out
	}
	for _, e := range v.Elements() {
		s, ok := e.(types.String)
		if !ok {
			diags.AddError("Unexpected element", fmt.Sprintf("expected a string, got %T; this is a bug in the provider", e))
			continue
		}
		out = append(out, s.ValueString())
	}
	return out
}

// notConfigured is the error of a CRUD call made before the provider was configured.
func notConfigured(diags *diag.Diagnostics) {
	diags.AddError("Provider not configured", "The strata provider has no client; this is a bug in the provider or in Terraform.")
}
