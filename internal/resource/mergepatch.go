package resource

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxPatchDepth bounds nesting, so a hostile patch cannot exhaust the stack.
const MaxPatchDepth = 100

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
	if err := checkDepth(p, 0); err != nil {
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

func checkDepth(v any, depth int) error {
	if depth > MaxPatchDepth {
		return fmt.Errorf("merge patch nests deeper than %d levels", MaxPatchDepth)
	}
	switch t := v.(type) {
	case map[string]any:
		for _, c := range t {
			if err := checkDepth(c, depth+1); err != nil {
				return err
			}
		}
	case []any:
		for _, c := range t {
			if err := checkDepth(c, depth+1); err != nil {
				return err
			}
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
