package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"

	"github.com/hashicorp/terraform-plugin-framework-jsontypes/jsontypes"
	"github.com/hashicorp/terraform-plugin-framework/diag"
)

// JSON attributes (a pillar's data, a kind's schema, an object's spec) are strings holding
// JSON. The server stores jsonb, which reorders keys and drops whitespace, and a kind's
// schema may fill in defaults and turn 1.0 into 1; comparing the text would show each of
// those as a change. So values are compared as JSON here, numbers by value, and, for data
// a schema may complete (specs, pillar rows), only the keys the configuration sets: a key
// the server added (a default) is the server's and not drift, while every value the
// configuration sets is compared.

// decodeJSON decodes b keeping every digit of numbers.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return v, nil
}

// jsonEqual reports whether a and b are the same JSON value: key order and whitespace do
// not matter, numbers compare by value (1 equals 1.0).
func jsonEqual(a, b any) bool {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for k, x := range av {
			y, ok := bv[k]
			if !ok || !jsonEqual(x, y) {
				return false
			}
		}
		return true
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !jsonEqual(av[i], bv[i]) {
				return false
			}
		}
		return true
	case json.Number:
		bv, ok := b.(json.Number)
		if !ok {
			return false
		}
		x, ok1 := new(big.Rat).SetString(av.String())
		y, ok2 := new(big.Rat).SetString(bv.String())
		if !ok1 || !ok2 {
			return av == bv
		}
		return x.Cmp(y) == 0
	default:
		return a == b
	}
}

// project returns server limited to the object keys that user has, recursively: what the
// server holds of what the configuration says. Arrays of equal length are projected element
// by element; anything else is the server's value as it is.
func project(server, user any) any {
	switch uv := user.(type) {
	case map[string]any:
		sv, ok := server.(map[string]any)
		if !ok {
			return server
		}
		out := make(map[string]any, len(uv))
		for k, u := range uv {
			if s, ok := sv[k]; ok {
				out[k] = project(s, u)
			}
		}
		return out
	case []any:
		sv, ok := server.([]any)
		if !ok || len(sv) != len(uv) {
			return server
		}
		out := make([]any, len(sv))
		for i := range sv {
			out[i] = project(sv[i], uv[i])
		}
		return out
	default:
		return server
	}
}

// sameJSON reports whether the texts a and b hold the same JSON value (jsonEqual); text that
// does not parse equals only itself.
func sameJSON(a, b string) bool {
	if a == b {
		return true
	}
	x, err1 := decodeJSON([]byte(a))
	y, err2 := decodeJSON([]byte(b))
	if err1 != nil || err2 != nil {
		return false
	}
	return jsonEqual(x, y)
}

// covers reports whether the server's value server says everything the configuration's
// text user says (project, then jsonEqual): true when the only differences are keys the
// server added.
func covers(server, user string) bool {
	if server == user {
		return true
	}
	s, err1 := decodeJSON([]byte(server))
	u, err2 := decodeJSON([]byte(user))
	if err1 != nil || err2 != nil {
		return false
	}
	return jsonEqual(project(s, u), u)
}

// readJSON is the value a Read stores for a JSON attribute: the prior text when the server
// still holds what it says (compare: sameJSON for exact attributes, covers for ones a schema
// completes), so an unchanged value never shows as a change; otherwise the server's text,
// which the next plan compares with the configuration.
func readJSON(server []byte, prior jsontypes.Normalized, compare func(server, user string) bool) jsontypes.Normalized {
	if !prior.IsNull() && !prior.IsUnknown() && compare(string(server), prior.ValueString()) {
		return prior
	}
	return jsontypes.NewNormalizedValue(string(server))
}

// planJSON is the planned value of a JSON attribute: the state's text when it says the same
// as the configuration (compare as in readJSON). Terraform accepts a planned value equal to
// the prior state in place of the configuration's; without this, an imported object (whose
// state holds the server's text) would plan a whitespace-only update.
func planJSON(planned, state jsontypes.Normalized, compare func(server, user string) bool) jsontypes.Normalized {
	if planned.IsNull() || planned.IsUnknown() || state.IsNull() || state.IsUnknown() {
		return planned
	}
	if compare(state.ValueString(), planned.ValueString()) {
		return state
	}
	return planned
}

// A plan may keep the state's text by "covers" only while that text is the server's own (an
// import, or a Read that found the server no longer says what the configuration said): then
// the keys the state has and the configuration lacks may be defaults the schema filled in.
// Once the state holds the configuration's text, a key it has and the configuration lacks is
// one the user took out, and must be planned (and removed) like any other change, so the
// plan compares exactly. Read records the server's text in the resource's private state
// whenever it stores it; ModifyPlan compares it with the state's text to tell the two apart.

// privateData is the private state of a resource (ReadResponse.Private and
// ModifyPlanRequest.Private are the framework's own type, in an internal package).
type privateData interface {
	GetKey(ctx context.Context, key string) ([]byte, diag.Diagnostics)
	SetKey(ctx context.Context, key string, value []byte) diag.Diagnostics
}

// serverTextKey is the private state key of attribute attr's server text.
func serverTextKey(attr string) string { return "server_text." + attr }

// noteServerText records, after a Read, that attribute attr now holds the server's text
// (when stored differs from prior, readJSON took the server's); a kept prior leaves the
// record as it was.
func noteServerText(ctx context.Context, p privateData, attr string, stored, prior jsontypes.Normalized, diags *diag.Diagnostics) {
	if p == nil || stored.IsNull() || stored.Equal(prior) {
		return
	}
	b, err := json.Marshal(stored.ValueString())
	if err != nil {
		diags.AddError("Recording "+attr, err.Error())
		return
	}
	diags.Append(p.SetKey(ctx, serverTextKey(attr), b)...)
}

// holdsServerText reports whether the state's value of attr is the text a Read took from the
// server (and so may miss nothing the configuration removed, only defaults it never set).
func holdsServerText(ctx context.Context, p privateData, attr string, state jsontypes.Normalized, diags *diag.Diagnostics) bool {
	if p == nil || state.IsNull() || state.IsUnknown() {
		return false
	}
	b, d := p.GetKey(ctx, serverTextKey(attr))
	diags.Append(d...)
	var text string
	if len(b) == 0 || json.Unmarshal(b, &text) != nil {
		return false
	}
	return text == state.ValueString()
}
