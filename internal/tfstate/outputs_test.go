package tfstate

import (
	"context"
	"crypto/md5"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/fault"
)

// fullState is a version 4 state with a resource holding a secret, outputs of every shape
// (a sensitive one, a number too large for float64, an object), check results, and a
// top-level field no Terraform writes today.
const fullState = `{
  "version": 4,
  "terraform_version": "1.11.4",
  "serial": 7,
  "lineage": "4b1c3d2e-0000-4000-8000-000000000001",
  "outputs": {
    "endpoint": {"value": "db.internal:5432", "type": "string"},
    "password": {"value": "out-pw", "type": "string", "sensitive": true},
    "big": {"value": 12345678901234567890123, "type": "number"},
    "obj": {"value": {"a": [1, "<b>&"]}, "type": ["object", {"a": ["tuple", ["number", "string"]]}], "extra": "dropped"}
  },
  "resources": [{"mode": "managed", "type": "terraform_data", "name": "db", "provider": "provider[\"terraform.io/builtin/terraform\"]",
    "instances": [{"schema_version": 0, "attributes": {"id": "i-1", "input": {"value": "s3cr3t-in-resource", "type": "string"}}}]}],
  "check_results": [{"object_kind": "resource", "config_addr": "terraform_data.db", "status": "pass", "objects": [{"object_addr": "s3cr3t-in-check", "status": "pass"}]}],
  "future_field": "s3cr3t-in-future-field"
}`

// TestOutputsOnly: the outputs-only document keeps version, terraform_version, serial,
// lineage and every root output (value, type, sensitive as stored; numbers with all their
// digits) and nothing else: no resource, no check result, no unknown field.
func TestOutputsOnly(t *testing.T) {
	t.Parallel()
	out, err := OutputsOnly([]byte(fullState))
	require.NoError(t, err)
	require.NotContains(t, string(out), "s3cr3t")
	require.Contains(t, string(out), "12345678901234567890123")

	var got map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(out, &got))
	require.ElementsMatch(t, []string{"version", "terraform_version", "serial", "lineage", "outputs", "resources", "check_results"}, keys(got))
	require.JSONEq(t, `4`, string(got["version"]))
	require.JSONEq(t, `"1.11.4"`, string(got["terraform_version"]))
	require.JSONEq(t, `7`, string(got["serial"]))
	require.JSONEq(t, `"4b1c3d2e-0000-4000-8000-000000000001"`, string(got["lineage"]))
	require.JSONEq(t, `[]`, string(got["resources"]))
	require.JSONEq(t, `null`, string(got["check_results"]))
	require.JSONEq(t, `{
    "endpoint": {"value": "db.internal:5432", "type": "string"},
    "password": {"value": "out-pw", "type": "string", "sensitive": true},
    "big": {"value": 12345678901234567890123, "type": "number"},
    "obj": {"value": {"a": [1, "<b>&"]}, "type": ["object", {"a": ["tuple", ["number", "string"]]}]}
  }`, string(got["outputs"]))
	m := parseState(out)
	require.True(t, m.Readable)
	require.False(t, m.HasResources)

	// A state without outputs (or with null) is still a valid document with an empty object.
	for _, outputs := range []string{``, `"outputs": null,`, `"outputs": {},`} {
		in := `{"version": 4, "terraform_version": "1.11.4", "serial": 1, "lineage": "l", ` + outputs + ` "resources": []}`
		out, err := OutputsOnly([]byte(in))
		require.NoError(t, err, in)
		require.NoError(t, json.Unmarshal(out, &got))
		require.JSONEq(t, `{}`, string(got["outputs"]), in)
	}
}

func keys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestOutputsOnlyRefuses: what strata cannot read as a version 4 state is refused with a
// 422 naming the reason, never passed through: OpenTofu's client-side encrypted states
// (with or without a readable serial and lineage), other formats, other JSON.
func TestOutputsOnlyRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, why string }{
		{`{"meta": {"key_provider.pbkdf2.k": "eyJzYWx0Ijoi"}, "encrypted_data": "s3cr3tcipher", "encryption_version": "v0"}`, "encrypted"},
		{`{"version": 4, "serial": 1, "lineage": "l", "encrypted_data": "s3cr3tcipher", "outputs": {}}`, "encrypted"},
		{`{"version": 3, "serial": 1, "lineage": "l", "modules": [{"path": ["root"], "outputs": {}, "resources": {"s3cr3t": {}}}]}`, "format version 4"},
		{`{"version": "4", "serial": 1, "lineage": "l", "outputs": {}}`, "format version 4"},
		{`{"version": 4, "lineage": "l", "outputs": {}}`, "serial and lineage"},
		{`{"version": 4, "serial": 1, "lineage": "l", "terraform_version": 1, "outputs": {}}`, "terraform_version"},
		{`{"version": 4, "serial": 1, "lineage": "l", "outputs": ["s3cr3t"]}`, "outputs"},
		{`{"version": 4, "serial": 1, "lineage": "l", "outputs": {"x": {"type": "string"}}}`, "without a value"},
		{`s3cr3t binary`, "not a JSON object"},
		{`["s3cr3t"]`, "not a JSON object"},
	} {
		out, err := OutputsOnly([]byte(c.in))
		require.Nil(t, out, c.in)
		var fe *fault.Error
		require.ErrorAs(t, err, &fe, c.in)
		require.Equal(t, fault.KindUnprocessable, fe.Kind, c.in)
		require.Contains(t, fe.Detail, c.why, c.in)
		require.Contains(t, fe.Detail, "state:read", "the detail names the scope that reads it")
		require.NotContains(t, fe.Detail, "s3cr3t")
	}
}

// TestStateGetOutputs: the service reads the current state and answers the outputs-only
// document with the MD5 of those bytes (the Content-MD5 the http layer sends), while
// StateGet still answers the stored bytes.
func TestStateGetOutputs(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{noKeeper: true})
	ctx := context.Background()
	b.project(t, "p")
	_, err := b.svc.StateWrite(ctx, b.actor, "p", "w", WriteRequest{Body: []byte(fullState)})
	require.NoError(t, err)

	st, err := b.svc.StateGetOutputs(ctx, "p", "w")
	require.NoError(t, err)
	require.Equal(t, md5.Sum(st.Data), st.MD5)
	require.NotContains(t, string(st.Data), "s3cr3t")
	require.Contains(t, string(st.Data), `"password"`)
	full, err := b.svc.StateGet(ctx, "p", "w")
	require.NoError(t, err)
	require.Equal(t, fullState, string(full.Data))

	_, err = b.svc.StateGetOutputs(ctx, "p", "nope")
	requireKind(t, err, fault.KindNotFound)
	enc := `{"meta": {"k": "v"}, "encrypted_data": "s3cr3tcipher", "encryption_version": "v0"}`
	_, err = b.svc.StateWrite(ctx, b.actor, "p", "enc", WriteRequest{Body: []byte(enc)})
	require.NoError(t, err)
	_, err = b.svc.StateGetOutputs(ctx, "p", "enc")
	fe := requireKind(t, err, fault.KindUnprocessable)
	require.True(t, strings.Contains(fe.Detail, "encrypted"), fe.Detail)
}
