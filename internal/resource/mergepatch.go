package resource

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/jsondepth"
)

// patchMembers are the members a merge patch of an object may hold: those of api.Object
// and, under metadata, of api.ObjectMeta — exactly what PUT's strict decoding accepts.
var patchMembers = map[string]map[string]bool{
	"": {"kind": true, "metadata": true, "spec": true, "status": true}, // status is ignored: the server writes it
	"metadata": {"name": true, "uid": true, "org": true, "labels": true, "annotations": true,
		"resourceVersion": true, "schemaRevision": true, "createdAt": true, "updatedAt": true},
}

// checkPatchMembers refuses a merge patch that names a member an object does not have, one
// 400 entry per member, as PUT refuses unknown fields: merged blindly, a typo such as
// "metdata" would be dropped on decoding and the patch would silently do nothing. Members of
// spec are the kind's to judge (its schema refuses unknown fields).
func checkPatchMembers(patch []byte) (patchMembersOf, error) {
	var pm patchMembersOf
	if err := json.Unmarshal(patch, &pm.top); err != nil {
		return pm, fault.Invalid("", "the merge patch must be a JSON object: %v", err)
	}
	var fields []fault.FieldError
	for _, k := range slices.Sorted(maps.Keys(pm.top)) {
		if !patchMembers[""][k] {
			fields = append(fields, fault.FieldError{Field: "/" + pointerToken(k), Message: "unknown field"})
		}
	}
	if raw, ok := pm.top["metadata"]; ok && json.Unmarshal(raw, &pm.meta) == nil {
		for _, k := range slices.Sorted(maps.Keys(pm.meta)) {
			if !patchMembers["metadata"][k] {
				fields = append(fields, fault.FieldError{Field: "/metadata/" + pointerToken(k), Message: "unknown field"})
			}
		}
	}
	if len(fields) == 0 {
		return pm, nil
	}
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Field
	}
	return pm, fault.InvalidFields("unknown fields in the merge patch: "+strings.Join(names, ", "), fields)
}

// patchMembersOf is a merge patch's top-level members and, when its metadata is an object,
// metadata's, as checkPatchMembers read them (parseMetadataPatch reads them again from here).
type patchMembersOf struct {
	top, meta map[string]json.RawMessage
}

// pointerToken escapes one JSON pointer reference token (RFC 6901).
func pointerToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// MaxPatchDepth bounds a merge patch's nesting, so a hostile patch cannot exhaust the stack:
// an object patch's members (the spec) nest at most jsondepth.Max levels, as stored values
// do, so the patch itself one level more.
const MaxPatchDepth = jsondepth.Max + 1

// MergePatch applies an RFC 7396 JSON merge patch to doc. Numbers are carried as their
// original text (json.Number), so large integers keep their precision.
func MergePatch(doc, patch []byte) ([]byte, error) {
	target, err := decodeJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("document: %w", err)
	}
	p, err := decodeJSON(patch)
	if err != nil {
		return nil, fmt.Errorf("merge patch: %w", err)
	}
	if err := checkPatchDepth(p); err != nil {
		return nil, err
	}
	return json.Marshal(mergeValue(target, p))
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

// checkPatchDepth refuses a patch nesting deeper than MaxPatchDepth with the 422 of
// jsondepth.Check, naming the pointer: each member of an object patch is held to the limit of
// a stored value.
func checkPatchDepth(p any) error {
	m, ok := p.(map[string]any)
	if !ok {
		return jsondepth.Check(p, "")
	}
	for k, c := range m {
		if err := jsondepth.Check(c, "/"+pointerToken(k)); err != nil {
			return err
		}
	}
	return nil
}

// mergeValue is RFC 7396's MergePatch(Target, Patch).
func mergeValue(target, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(tm, k)
			continue
		}
		tm[k] = mergeValue(tm[k], v)
	}
	return tm
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// metadataPatch is a merge patch that only sets or removes labels and annotations, and may
// carry the resourceVersion it expects: the label PATCH automation sends most. apply gives
// the object mergePatchObject gives for it, from the maps directly, without encoding the
// object to JSON, decoding it, merging, encoding and decoding again (a fifth of a label
// PATCH's CPU in strata, docs/benchmarks.md). TestMetadataPatchIsAMergePatch holds the two
// to the same result.
type metadataPatch struct {
	labels, annotations stringsPatch
	resourceVersion     string
}

// stringsPatch is the merge patch of a map of strings: set (false: the patch does not name
// the map), and then either null (remove the map) or the keys to set (a nil value removes
// the key).
type stringsPatch struct {
	set, null bool
	keys      map[string]*string
}

// parseMetadataPatch reads a patch, given as checkPatchMembers read it, as a metadataPatch;
// false when it is anything else (then mergePatchObject applies it, with its errors).
func parseMetadataPatch(pm patchMembersOf) (metadataPatch, bool) {
	var mp metadataPatch
	if len(pm.top) != 1 || pm.top["metadata"] == nil || pm.meta == nil {
		return mp, false
	}
	for k, raw := range pm.meta {
		var ok bool
		switch k {
		case "labels":
			mp.labels, ok = parseStringsPatch(raw)
		case "annotations":
			mp.annotations, ok = parseStringsPatch(raw)
		case "resourceVersion":
			var rv *string
			ok = json.Unmarshal(raw, &rv) == nil
			if rv != nil {
				mp.resourceVersion = *rv
			}
		}
		if !ok {
			return mp, false
		}
	}
	return mp, true
}

func parseStringsPatch(raw json.RawMessage) (stringsPatch, bool) {
	p := stringsPatch{set: true}
	if json.Unmarshal(raw, &p.keys) != nil {
		return p, false
	}
	p.null = p.keys == nil
	return p, true
}

// apply is mergePatchObject(cur, patch) for the patch mp was read from.
func (mp metadataPatch) apply(cur api.Object) api.Object {
	return api.Object{
		Kind: cur.Kind,
		Metadata: api.ObjectMeta{
			Name:            cur.Metadata.Name,
			Org:             cur.Metadata.Org,
			ResourceVersion: mp.resourceVersion,
			Labels:          mp.labels.apply(cur.Metadata.Labels),
			Annotations:     mp.annotations.apply(cur.Metadata.Annotations),
		},
		Spec: cur.Spec,
	}
}

// apply returns a new map (cur is left as it is: it may be the list index's copy).
func (p stringsPatch) apply(cur map[string]string) map[string]string {
	switch {
	case !p.set:
		return maps.Clone(cur)
	case p.null:
		return nil
	}
	out := make(map[string]string, len(cur)+len(p.keys))
	maps.Copy(out, cur)
	for k, v := range p.keys {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = *v
		}
	}
	return out
}
