package schema_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/kind/schema"
)

// FuzzParse feeds arbitrary documents to Parse: it must never panic, and every refusal must be a
// *fault.Error (a 422 with schema pointers), never an uncategorised error that would become a 500.
func FuzzParse(f *testing.F) {
	f.Add([]byte(richSchema))
	f.Add([]byte(`{"type": "object"}`))
	f.Add([]byte(`{"type": "object", "properties": {"a": {"type": "array", "x-list-map-keys": ["k"], "items": {"type": "object", "required": ["k"], "properties": {"k": {"type": "string"}}}}}}`))
	f.Add([]byte(`{"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "integer"}}, "anyOf": [{"required": ["b"]}], "not": {"properties": {"b": {"const": 1}}}}}}`))
	f.Add([]byte(`{"type": "object", "properties": {"a": {"type": "integer", "default": 1.0, "maximum": 1e3}}}`))
	f.Add([]byte(`{"$ref": "http://example.com/x"}`))
	f.Add([]byte(`{"type": "object", "properties": {"a": {"type": "string", "pattern": "\\p{L"}}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		s, err := schema.Parse(doc)
		if err != nil {
			var fe *fault.Error
			if !errors.As(err, &fe) || fe.Kind != fault.KindUnprocessable || len(fe.Fields) == 0 {
				t.Fatalf("Parse error is not a 422 *fault.Error with fields: %T %v", err, err)
			}
			return
		}
		// A schema that parses must run its pipelines on an empty object without panicking.
		spec := s.Present(map[string]any{})
		s.Violations(spec)
		if _, _, err := s.Admit(map[string]any{}, spec); err != nil {
			var fe *fault.Error
			if !errors.As(err, &fe) {
				t.Fatalf("Admit error is not a *fault.Error: %T %v", err, err)
			}
		}
	})
}

// FuzzAdmit feeds a random spec and a random stored object to the pipelines of the rich schema.
// Besides "no panic, only *fault.Error", it checks the pipelines against each other: what Admit
// accepts on create has no Violations, and Admit is deterministic.
func FuzzAdmit(f *testing.F) {
	s, err := schema.Parse([]byte(richSchema))
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"size": 12, "name": "b"}`), []byte(`{"size": 12, "name": "a"}`))
	f.Add([]byte(`{"sizeInBytes": 7, "sizeBytes": 8, "net": {"zone": "a"}}`), []byte(`{"sizeBytes": 8}`))
	f.Add([]byte(`{"net": {"zone": "a"}, "ports": [{"name": "b", "port": 81}, {"name": "a", "port": 2000}]}`),
		[]byte(`{"net": {"zone": "a"}, "ports": [{"name": "a", "port": 2000}, {"name": "b", "port": 80}]}`))
	f.Add([]byte(`{"tags": ["toolong", 1], "labels": {"a": "b"}, "extra": {"x": [1, 2]}, "legacy": "x", "old": "y"}`), []byte(`null`))
	f.Add([]byte(`{"replicas": 1.0, "big": 12345678901234567890, "ratio": 1e400, "code": "ABC"}`), []byte(`{"replicas": "x"}`))
	f.Add([]byte(`{"size": 1e10000000}`), []byte(`{"size": 1e10000000}`))
	f.Add([]byte(`[]`), []byte(`"x"`))
	f.Fuzz(func(t *testing.T, specJSON, oldJSON []byte) {
		spec, ok := decode(specJSON)
		if !ok {
			return
		}
		var old any
		if o, ok := decode(oldJSON); ok && o != nil {
			old = s.Present(o)
			s.Violations(old)
		}
		check := func(err error) {
			if err == nil {
				return
			}
			var fe *fault.Error
			if !errors.As(err, &fe) || (fe.Kind != fault.KindInvalid && fe.Kind != fault.KindUnprocessable) || len(fe.Fields) == 0 {
				t.Fatalf("Admit error is not a 400/422 *fault.Error with fields: %T %v", err, err)
			}
		}
		out, _, err := s.Admit(spec, old)
		check(err)
		out2, _, err2 := s.Admit(spec, old)
		if (err == nil) != (err2 == nil) || mustJSON(t, out) != mustJSON(t, out2) {
			t.Fatalf("Admit is not deterministic")
		}

		created, _, err := s.Admit(spec, nil)
		check(err)
		if err == nil {
			if vs := s.Violations(s.Present(created)); len(vs) > 0 {
				t.Fatalf("Admit accepted %s on create, but Violations reports %v", specJSON, vs)
			}
			// Admitting its own output again is a no-op.
			again, _, err := s.Admit(created, s.Present(created))
			if err != nil || mustJSON(t, again) != mustJSON(t, created) {
				t.Fatalf("re-admitting %s changed it or failed: %v", mustJSON(t, created), err)
			}
		}
	})
}

func decode(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return string(b)
}
