package provider

import (
	"context"
	"encoding/json"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/stratahq/strata/client"
)

// The attributes every object resource (org, node, group, objects of user kinds) shares:
// the API's metadata under the API's member names.

func idAttribute(format string) schema.StringAttribute {
	return schema.StringAttribute{
		Computed:      true,
		Description:   "The import ID: " + format + ".",
		PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
	}
}

func nameAttribute(what string) schema.StringAttribute {
	return schema.StringAttribute{
		Required:      true,
		Description:   "The " + what + "'s name; changing it replaces the " + what + ".",
		PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
	}
}

func labelsAttribute() schema.MapAttribute {
	return schema.MapAttribute{
		ElementType: types.StringType,
		Optional:    true,
		Description: "metadata.labels. Labels set by anyone else show as a change in the plan (which removes them).",
	}
}

func annotationsAttribute() schema.MapAttribute {
	return schema.MapAttribute{
		ElementType: types.StringType,
		Optional:    true,
		Description: "metadata.annotations, compared like labels.",
	}
}

func resourceVersionAttribute() schema.StringAttribute {
	return schema.StringAttribute{
		Computed:    true,
		Description: "metadata.resourceVersion as last read: every update and delete carries it, so a change made since the refresh is refused instead of overwritten.",
	}
}

// metaPatch is the merge patch (RFC 7396) of metadata that turns the state's labels and
// annotations into the plan's, with the state's resourceVersion as its precondition: keys
// the plan drops are null, keys it sets carry their value. Only the difference travels, so
// what Terraform does not manage (a node's other spec keys) stays as it is.
func metaPatch(ctx context.Context, stateLabels, planLabels, stateAnn, planAnn types.Map, rv string, diags *diag.Diagnostics) map[string]any {
	meta := map[string]any{"resourceVersion": rv}
	if l := mapDiff(mapOf(ctx, stateLabels, diags), mapOf(ctx, planLabels, diags)); len(l) > 0 {
		meta["labels"] = l
	}
	if a := mapDiff(mapOf(ctx, stateAnn, diags), mapOf(ctx, planAnn, diags)); len(a) > 0 {
		meta["annotations"] = a
	}
	return meta
}

// mapDiff is the merge patch from old to new.
func mapDiff(old, new map[string]string) map[string]any {
	out := map[string]any{}
	for k := range old {
		if _, ok := new[k]; !ok {
			out[k] = nil
		}
	}
	for k, v := range new {
		if ov, ok := old[k]; !ok || ov != v {
			out[k] = v
		}
	}
	return out
}

// patchObject sends a merge patch; its metadata.resourceVersion makes it conditional.
func patchObject(ctx context.Context, r *client.Resources, name string, patch map[string]any) (client.Object, error) {
	b, err := json.Marshal(patch)
	if err != nil {
		return client.Object{}, err
	}
	return r.Patch(ctx, name, b)
}

// newObject is the object a create sends.
func newObject(ctx context.Context, kind, name string, labels, annotations types.Map, spec json.RawMessage, diags *diag.Diagnostics) client.Object {
	return client.Object{
		Kind: kind,
		Metadata: client.ObjectMeta{
			Name:        name,
			Labels:      mapOf(ctx, labels, diags),
			Annotations: mapOf(ctx, annotations, diags),
		},
		Spec: spec,
	}
}

// specMap decodes an object's spec (empty: an empty map).
func specMap(spec json.RawMessage) (map[string]any, error) {
	m := map[string]any{}
	if len(spec) == 0 {
		return m, nil
	}
	v, err := decodeJSON(spec)
	if err != nil {
		return nil, err
	}
	if mm, ok := v.(map[string]any); ok {
		return mm, nil
	}
	return m, nil
}

// deleteObject deletes an object at the resourceVersion Terraform read; one already gone is
// fine (the goal of a delete).
func deleteObject(ctx context.Context, r *client.Resources, kind, name, rv string, diags *diag.Diagnostics) {
	err := r.Delete(ctx, name, client.DeleteOptions{ResourceVersion: rv})
	switch {
	case err == nil, isNotFound(err):
	case client.IsConflict(err) && rv != "":
		// 409 is also an org that still holds nodes; the server's detail says which.
		diags.AddError("Deleting "+kind+" "+name+" was refused",
			"The delete carried the resourceVersion Terraform read ("+rv+"). The server refused it: "+err.Error()+
				"\n\nIf the object changed since Terraform read it:"+refreshFirst)
	default:
		apiError(diags, "Deleting "+kind+" "+name, err)
	}
}
