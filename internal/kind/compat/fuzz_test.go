package compat_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stratahq/strata/internal/kind/compat"
)

// fuzzSchema decodes arbitrary bytes into something Diff accepts: a JSON object as is, any
// other JSON value as the schema of a property (so odd values reach every comparison).
func fuzzSchema(data []byte) (map[string]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if m, ok := v.(map[string]any); ok {
		return m, true
	}
	return map[string]any{"type": "object", "properties": map[string]any{"p": v}}, true
}

func FuzzDiff(f *testing.F) {
	seeds := []string{
		obj(`"size":{"type":"string"}`),
		obj(`"size":{"type":"integer","default":1}`, "size"),
		obj(`"size":{"type":["string","null"],"x-removed":true}`),
		obj(`"capacity":{"type":"string","x-aliases":["size"]}`),
		obj(`"n":{"type":"number","maximum":1e400,"minimum":-1.5,"multipleOf":0.5,"enum":[1,2.0,"x",null]}`),
		obj(`"n":{"type":"integer","maximum":1e-999999999,"multipleOf":0}`),
		obj(`"cfg":{"type":"object","x-preserve-unknown-fields":true,"properties":{"p":{"type":"integer"}}}`),
		obj(`"l":{"type":"array","x-list-map-keys":["k"],"items":{"type":"object","required":["k"],"properties":{"k":{"type":"string"}}}}`),
		obj(`"m":{"type":"object","additionalProperties":{"type":"string","pattern":"^a"},"maxProperties":3}`),
		obj(`"n":{"type":"integer","anyOf":[{"minimum":1}],"not":{"const":3},"x-user-only":true}`),
		`{"type":7,"properties":[],"required":{},"items":1,"additionalProperties":"x","enum":3}`,
		`{"properties":{"a":{"properties":{"a":{"properties":{"a":{"type":"object"}}}}}}}`,
		obj(`"l":{"type":"array","items":{"type":"string"},"contains":{"const":"a"},"minContains":1}`),
		`[1,2]`, `null`, `"s"`, `{}`,
	}
	for i, a := range seeds {
		f.Add([]byte(a), []byte(seeds[(i+1)%len(seeds)]))
		f.Add([]byte(a), []byte(a))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		old, ok1 := fuzzSchema(a)
		new, ok2 := fuzzSchema(b)
		if !ok1 || !ok2 {
			return
		}
		if self := compat.Diff(old, old); len(self) != 0 {
			t.Fatalf("Diff(x, x) = %+v", self)
		}
		first := compat.Diff(old, new)
		if second := compat.Diff(old, new); !reflect.DeepEqual(first, second) {
			t.Fatalf("Diff is not deterministic:\n%+v\n%+v", first, second)
		}
		impacts := map[int]compat.Impact{}
		var acks []compat.Ack
		for i, c := range first {
			if i%2 == 0 {
				impacts[i] = compat.Impact{Count: i, Sample: []string{"o"}}
			}
			acks = append(acks, compat.Ack{Path: c.Path, Rule: c.Ack})
			if c.Rule == "" || c.Row < 1 || c.Row > 21 || c.IfClean == "" || c.IfAffected == "" || c.Message == "" {
				t.Fatalf("incomplete change %+v", c)
			}
			if (c.IfClean == compat.Reject || c.IfAffected == compat.Reject) && c.WayForward == "" {
				t.Fatalf("a possible rejection without a way forward: %+v", c)
			}
			_ = c.Counts(c.Path, "type")
			for _, spec := range []any{old, new} {
				compat.HasValue(spec, c.Path)
				compat.Lacks(spec, c.Path)
			}
		}
		r := compat.Decide(first, impacts, acks)
		if len(r.Changes) < len(first) {
			t.Fatalf("Decide lost findings")
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatal(err)
		}
	})
}
