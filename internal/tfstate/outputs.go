package tfstate

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/json"

	"github.com/stratahq/strata/internal/fault"
)

// This file serves outputs-only reads (the state:read-outputs scope): a downstream
// configuration's `data "terraform_remote_state"` needs an upstream state's root outputs,
// and nothing else, but the http backend protocol has only "GET the state". So strata
// answers such a token with a state document of its own making: the stored state's version,
// terraform_version, serial and lineage, its root outputs as stored, and no resources.
// Terraform reads it as a valid state, so terraform_remote_state works unchanged, while the
// resources' attributes (the secrets of every resource) never leave the server.
//
// Sensitive outputs are included, with their "sensitive" flag: terraform_remote_state hands
// them to the downstream as sensitive values (Terraform requires the downstream to mark any
// output that uses them sensitive too), which is what a downstream reading outputs asks for.
// An upstream that must not share a value should not make it an output.
//
// The document is built by listing what it keeps (allowlist), never by deleting what it
// drops, so a field a future Terraform adds to the state never leaks through.

// outputsOnlyStateVersion is the state format outputs-only reads understand (Terraform 0.12
// and later, OpenTofu). Older formats keep outputs and resources per module.
const outputsOnlyStateVersion = 4

// outputV4 is one root output of a version 4 state, as Terraform writes it.
type outputV4 struct {
	Value     json.RawMessage `json:"value"`
	Type      json.RawMessage `json:"type,omitempty"`
	Sensitive bool            `json:"sensitive,omitempty"`
}

// outputsOnlyDoc is the document an outputs-only read answers. Field order follows
// Terraform's own state files.
type outputsOnlyDoc struct {
	Version          json.RawMessage     `json:"version"`
	TerraformVersion json.RawMessage     `json:"terraform_version,omitempty"`
	Serial           json.RawMessage     `json:"serial"`
	Lineage          json.RawMessage     `json:"lineage"`
	Outputs          map[string]outputV4 `json:"outputs"`
	Resources        []struct{}          `json:"resources"`
	CheckResults     *struct{}           `json:"check_results"`
}

// StateGetOutputs returns the workspace's current state reduced to its root outputs (see
// OutputsOnly), with the MD5 of the reduced bytes, which is what Content-MD5 must carry.
func (s *Service) StateGetOutputs(ctx context.Context, project, workspace string) (State, error) {
	st, err := s.StateGet(ctx, project, workspace)
	if err != nil {
		return State{}, err
	}
	data, err := OutputsOnly(st.Data)
	if err != nil {
		return State{}, err
	}
	return State{Data: data, MD5: md5.Sum(data)}, nil
}

// OutputsOnly returns a valid version 4 state holding data's version, terraform_version,
// serial, lineage and root outputs (each output's value, type and sensitive flag as stored)
// and no resources or check results. A payload that is not a version 4 Terraform state, such
// as an OpenTofu client-side encrypted state, is refused (KindUnprocessable): strata cannot
// see its outputs, and passing it through would hand over everything it protects.
func OutputsOnly(data []byte) ([]byte, error) {
	refuse := func(why string) error {
		return fault.New(fault.KindUnprocessable, "this workspace's state %s, so an outputs-only token (state:read-outputs) cannot read it; a token with state:read gets the stored state as it is", why)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, refuse("is not a JSON object")
	}
	if _, ok := top["encrypted_data"]; ok {
		return nil, refuse("is encrypted by the client (OpenTofu state encryption)")
	}
	var version int
	if err := json.Unmarshal(top["version"], &version); err != nil || version != outputsOnlyStateVersion {
		return nil, refuse("is not a Terraform state of format version 4")
	}
	m := parseState(data)
	if !m.Readable {
		return nil, refuse("has no readable serial and lineage")
	}
	doc := outputsOnlyDoc{
		Version:   top["version"],
		Serial:    top["serial"],
		Lineage:   top["lineage"],
		Outputs:   map[string]outputV4{},
		Resources: []struct{}{},
	}
	if tv, ok := top["terraform_version"]; ok {
		var s string
		if json.Unmarshal(tv, &s) != nil {
			return nil, refuse("has a terraform_version that is not a string")
		}
		doc.TerraformVersion = tv
	}
	if raw, ok := top["outputs"]; ok && !bytes.Equal(raw, []byte("null")) {
		if err := json.Unmarshal(raw, &doc.Outputs); err != nil {
			return nil, refuse("has outputs strata cannot read")
		}
	}
	for name, o := range doc.Outputs {
		if len(o.Value) == 0 {
			return nil, refuse("has output " + name + " without a value")
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
