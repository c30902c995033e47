package compat_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/kind/compat"
)

// schema decodes a JSON schema the way the registry does (numbers as json.Number).
func schema(t testing.TB, doc string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(doc)))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m), doc)
	return m
}

// obj wraps property definitions (and optionally a required list) into a spec schema.
func obj(props string, required ...string) string {
	req, _ := json.Marshal(required)
	if len(required) == 0 {
		req = []byte("[]")
	}
	return `{"type":"object","required":` + string(req) + `,"properties":{` + props + `}}`
}

// want is the part of a Change the rule table fixes.
type want struct {
	Path       string
	Field      string
	Rule       string
	Row        int
	Ack        string
	Check      compat.Check
	Keywords   []string
	IfClean    compat.Verdict
	IfAffected compat.Verdict
}

func project(changes []compat.Change) []want {
	out := []want{}
	for _, c := range changes {
		out = append(out, want{c.Path, c.Field, c.Rule, c.Row, c.Ack, c.Check, c.Keywords, c.IfClean, c.IfAffected})
	}
	return out
}

const (
	A  = compat.Accept
	K  = compat.Acknowledge
	R  = compat.Reject
	NC = compat.NoCheck
	V  = compat.Violations
	P  = compat.Present
	AB = compat.Absent
)

func TestDiffRuleTable(t *testing.T) {
	t.Parallel()
	size := `"size":{"type":"string"}`
	cases := []struct {
		name     string
		old, new string
		want     []want
		// forward lists substrings the WayForward of every possibly rejecting change must name.
		forward []string
	}{
		{name: "identical", old: obj(size), new: obj(size), want: []want{}},
		{name: "documentation only", old: obj(`"size":{"type":"string","description":"a"}`),
			new: obj(`"size":{"type":"string","description":"b","title":"Size","examples":["1"]}`), want: []want{}},

		{name: "row 1 add optional", old: obj(size), new: obj(size + `,"replicas":{"type":"integer"}`),
			want: []want{{"/properties/replicas", "/spec/replicas", "property-added", 1, "", NC, nil, A, A}}},
		{name: "row 1 subtree added once", old: obj(size),
			new:  obj(size + `,"db":{"type":"object","required":["host"],"properties":{"host":{"type":"string"},"port":{"type":"integer","maximum":5}}}`),
			want: []want{{"/properties/db", "/spec/db", "property-added", 1, "", NC, nil, A, A}}},
		{name: "row 2 add inside x-preserve-unknown-fields",
			old: obj(`"cfg":{"type":"object","x-preserve-unknown-fields":true}`),
			new: obj(`"cfg":{"type":"object","x-preserve-unknown-fields":true,"properties":{"port":{"type":"integer","maximum":10,"description":"d"}}}`),
			want: []want{{"/properties/cfg/properties/port", "/spec/cfg/port", "property-added-to-open-object", 2, "", V,
				[]string{"maximum", "type"}, A, R}},
			forward: []string{"`port`", "/spec/cfg/port"}},
		{name: "row 2 add object inside additionalProperties: true also checks unknown keys",
			old: obj(`"cfg":{"type":"object","additionalProperties":true}`),
			new: obj(`"cfg":{"type":"object","additionalProperties":true,"properties":{"tls":{"type":"object","required":["on"],"properties":{"on":{"type":"boolean"}}}}}`),
			want: []want{{"/properties/cfg/properties/tls", "/spec/cfg/tls", "property-added-to-open-object", 2, "", V,
				[]string{"additionalProperties", "properties", "type"}, A, R}},
			forward: []string{"`tls`"}},
		{name: "row 3 add optional with default", old: obj(size), new: obj(size + `,"replicas":{"type":"integer","default":1}`),
			want: []want{{"/properties/replicas", "/spec/replicas", "property-added-with-default", 3, "", NC, nil, A, A}}},
		{name: "row 4 add required with default", old: obj(size), new: obj(size+`,"replicas":{"type":"integer","default":1}`, "replicas"),
			want: []want{{"/properties/replicas", "/spec/replicas", "required-property-added-with-default", 4, "", NC, nil, A, A}}},
		{name: "row 5 add required without default", old: obj(size), new: obj(size+`,"replicas":{"type":"integer"}`, "replicas"),
			want:    []want{{"/properties/replicas", "/spec/replicas", "required-property-added", 5, "newWritesOnly", AB, nil, A, K}},
			forward: []string{"`replicas`"}},
		{name: "row 6 existing optional made required", old: obj(size), new: obj(size, "size"),
			want:    []want{{"/properties/size", "/spec/size", "required-added", 6, "newWritesOnly", AB, nil, A, K}},
			forward: []string{"`size`"}},
		{name: "row 6 made required with a default", old: obj(`"size":{"type":"string","default":"s"}`),
			new:  obj(`"size":{"type":"string","default":"s"}`, "size"),
			want: []want{{"/properties/size", "/spec/size", "required-added", 6, "", NC, nil, A, A}}},
		{name: "row 6 required inside x-preserve-unknown-fields new property",
			old: obj(`"cfg":{"type":"object","x-preserve-unknown-fields":true}`),
			new: obj(`"cfg":{"type":"object","x-preserve-unknown-fields":true,"required":["port"],"properties":{"port":{"type":"integer"}}}`),
			want: []want{
				{"/properties/cfg/properties/port", "/spec/cfg/port", "property-added-to-open-object", 2, "", V, []string{"type"}, A, R},
				{"/properties/cfg/properties/port", "/spec/cfg/port", "required-added", 6, "newWritesOnly", AB, nil, A, K},
			}},
		{name: "row 7 required made optional", old: obj(size, "size"), new: obj(size),
			want: []want{{"/properties/size", "/spec/size", "required-removed", 7, "readersHandleAbsence", NC, nil, K, K}}},
		{name: "row 8 deprecated", old: obj(size), new: obj(`"size":{"type":"string","deprecated":true}`),
			want: []want{{"/properties/size", "/spec/size", "property-deprecated", 8, "", NC, nil, A, A}}},
		{name: "row 8 tombstoned", old: obj(size, "size"), new: obj(`"size":{"type":"string","x-removed":true}`),
			want:    []want{{"/properties/size", "/spec/size", "property-tombstoned", 8, "dropData", P, nil, A, K}},
			forward: []string{"/spec/size"}},
		{name: "row 8 tombstone deleted", old: obj(`"size":{"type":"string","x-removed":true}`), new: obj(``),
			want:    []want{{"/properties/size", "/spec/size", "tombstone-removed", 8, "", NC, nil, R, R}},
			forward: []string{"`size`", "x-removed: true"}},
		{name: "row 8 un-tombstoned", old: obj(`"size":{"type":"string","x-removed":true}`), new: obj(size),
			want:    []want{{"/properties/size", "/spec/size", "tombstone-reverted", 8, "", NC, nil, R, R}},
			forward: []string{"`size`"}},
		{name: "row 8 tombstone schema changed", old: obj(`"size":{"type":"string","x-removed":true}`),
			new:     obj(`"size":{"type":"integer","x-removed":true}`),
			want:    []want{{"/properties/size", "/spec/size", "tombstone-changed", 8, "", NC, nil, R, R}},
			forward: []string{"`size`"}},
		{name: "row 9 rename with alias, identical schema", old: obj(`"size":{"type":"string","maxLength":9}`),
			new:  obj(`"capacity":{"type":"string","maxLength":9,"x-aliases":["size"],"description":"new"}`),
			want: []want{{"/properties/capacity", "/spec/capacity", "property-renamed", 9, "readersUpgraded", NC, nil, K, K}}},
		{name: "row 9 rename with alias, widened schema", old: obj(`"size":{"type":"integer","maximum":9}`, "size"),
			new:  obj(`"capacity":{"type":"number","maximum":10,"x-aliases":["size"]}`, "capacity"),
			want: []want{{"/properties/capacity", "/spec/capacity", "property-renamed", 9, "readersUpgraded", NC, nil, K, K}}},
		{name: "row 9 rename with alias, old name tombstoned", old: obj(size),
			new:  obj(`"size":{"type":"string","x-removed":true},"capacity":{"type":"string","x-aliases":["size"]}`),
			want: []want{{"/properties/capacity", "/spec/capacity", "property-renamed", 9, "readersUpgraded", NC, nil, K, K}}},
		{name: "row 9 rename with alias, incompatible schema", old: obj(`"size":{"type":"number"}`),
			new:     obj(`"capacity":{"type":"integer","x-aliases":["size"]}`),
			want:    []want{{"/properties/capacity", "/spec/capacity", "property-renamed", 9, "", NC, nil, R, R}},
			forward: []string{"`capacity`", "`size`"}},
		{name: "row 9 rename makes it required", old: obj(size), new: obj(`"capacity":{"type":"string","x-aliases":["size"]}`, "capacity"),
			want: []want{
				{"/properties/capacity", "/spec/capacity", "property-renamed", 9, "readersUpgraded", NC, nil, K, K},
				{"/properties/capacity", "/spec/capacity", "required-added", 6, "newWritesOnly", AB, nil, A, K},
			}},
		{name: "row 9 alias removed", old: obj(`"capacity":{"type":"string","x-aliases":["size"]}`), new: obj(`"capacity":{"type":"string"}`),
			want:    []want{{"/properties/capacity", "/spec/capacity", "alias-removed", 9, "", NC, nil, R, R}},
			forward: []string{"`size`", "`capacity`"}},
		{name: "row 9 alias revives a tombstone", old: obj(`"size":{"type":"string","x-removed":true}`),
			new: obj(`"size":{"type":"string","x-removed":true},"capacity":{"type":"string","x-aliases":["size"]}`),
			want: []want{
				{"/properties/capacity", "/spec/capacity", "alias-revives-tombstone", 8, "", NC, nil, R, R},
				{"/properties/capacity", "/spec/capacity", "property-added", 1, "", NC, nil, A, A},
			},
			forward: []string{"`size`"}},
		{name: "row 10 property removed without alias", old: obj(size + `,"replicas":{"type":"integer"}`), new: obj(size),
			want:    []want{{"/properties/replicas", "/spec/replicas", "property-removed", 10, "", NC, nil, R, R}},
			forward: []string{"`replicas`", "x-removed: true", "name stays reserved"}},
		{name: "row 10 rename without alias is a removal plus an addition", old: obj(size), new: obj(`"capacity":{"type":"string"}`),
			want: []want{
				{"/properties/capacity", "/spec/capacity", "property-added", 1, "", NC, nil, A, A},
				{"/properties/size", "/spec/size", "property-removed", 10, "", NC, nil, R, R},
			}},
		{name: "row 11 integer to number", old: obj(`"n":{"type":"integer"}`), new: obj(`"n":{"type":"number"}`),
			want: []want{{"/properties/n", "/spec/n", "type-widened", 11, "readersUpgradedFirst", NC, nil, K, K}}},
		{name: "row 11 add null", old: obj(size), new: obj(`"size":{"type":["string","null"]}`),
			want: []want{{"/properties/size", "/spec/size", "type-widened", 11, "readersUpgradedFirst", NC, nil, K, K}}},
		{name: "row 11 add a type to an array", old: obj(`"v":{"type":["string","null"]}`), new: obj(`"v":{"type":["string","null","boolean"]}`),
			want: []want{{"/properties/v", "/spec/v", "type-widened", 11, "readersUpgradedFirst", NC, nil, K, K}}},
		{name: "row 12 number to integer", old: obj(`"n":{"type":"number"}`), new: obj(`"n":{"type":"integer"}`),
			want:    []want{{"/properties/n", "/spec/n", "type-narrowed", 12, "", V, []string{"type"}, A, R}},
			forward: []string{"/spec/n", "migrate"}},
		{name: "row 12 remove null", old: obj(`"v":{"type":["string","null"]}`), new: obj(`"v":{"type":"string"}`),
			want:    []want{{"/properties/v", "/spec/v", "type-narrowed", 12, "", V, []string{"type"}, A, R}},
			forward: []string{"/spec/v"}},
		{name: "row 13 string to integer", old: obj(size), new: obj(`"size":{"type":"integer"}`),
			want:    []want{{"/properties/size", "/spec/size", "type-changed", 13, "", NC, nil, R, R}},
			forward: []string{"`size`", "integer", "string", "deprecated: true", "x-removed"}},
		{name: "row 13 object to scalar reported once", old: obj(`"db":{"type":"object","properties":{"host":{"type":"string"}}}`),
			new:     obj(`"db":{"type":"string","maxLength":4}`),
			want:    []want{{"/properties/db", "/spec/db", "type-changed", 13, "", NC, nil, R, R}},
			forward: []string{"`db`", "object", "string"}},
		{name: "row 13 array to object", old: obj(`"l":{"type":"array","items":{"type":"string"}}`), new: obj(`"l":{"type":"object"}`),
			want: []want{{"/properties/l", "/spec/l", "type-changed", 13, "", NC, nil, R, R}}, forward: []string{"`l`"}},
		{name: "row 14 enum value added", old: obj(`"m":{"type":"string","enum":["a","b"]}`), new: obj(`"m":{"type":"string","enum":["a","b","c"]}`),
			want: []want{{"/properties/m", "/spec/m", "enum-value-added", 14, "readersHandleNewValue", NC, nil, K, K}}},
		{name: "row 14 enum value added to open enum", old: obj(`"m":{"type":"string","enum":["a"],"x-enum-open":true}`),
			new:  obj(`"m":{"type":"string","enum":["a","c"],"x-enum-open":true}`),
			want: []want{{"/properties/m", "/spec/m", "enum-value-added", 14, "", NC, nil, A, A}}},
		{name: "row 15 enum value removed", old: obj(`"m":{"type":"string","enum":["a","b"]}`), new: obj(`"m":{"type":"string","enum":["a"]}`),
			want: []want{{"/properties/m", "/spec/m", "enum-value-removed", 15, "", V, []string{"enum"}, A, A}}},
		{name: "row 15 enum reordered and renumbered is no change", old: obj(`"m":{"type":"number","enum":[1,2.0]}`),
			new: obj(`"m":{"type":"number","enum":[2,1.0]}`), want: []want{}},
		{name: "row 16 maximum tightened", old: obj(`"n":{"type":"integer","maximum":10}`), new: obj(`"n":{"type":"integer","maximum":5}`),
			want: []want{{"/properties/n", "/spec/n", "maximum-tightened", 16, "", V, []string{"maximum"}, A, A}}},
		{name: "row 16 maximum added", old: obj(`"n":{"type":"integer"}`), new: obj(`"n":{"type":"integer","maximum":5}`),
			want: []want{{"/properties/n", "/spec/n", "maximum-tightened", 16, "", V, []string{"maximum"}, A, A}}},
		{name: "row 16 equal numbers in another spelling", old: obj(`"n":{"type":"number","maximum":10}`), new: obj(`"n":{"type":"number","maximum":1.0e1}`),
			want: []want{}},
		{name: "row 16 minimum and exclusiveMinimum", old: obj(`"n":{"type":"integer","minimum":1}`), new: obj(`"n":{"type":"integer","minimum":2,"exclusiveMinimum":0}`),
			want: []want{
				{"/properties/n", "/spec/n", "exclusiveMinimum-tightened", 16, "", V, []string{"exclusiveMinimum"}, A, A},
				{"/properties/n", "/spec/n", "minimum-tightened", 16, "", V, []string{"minimum"}, A, A},
			}},
		{name: "row 16 string constraints", old: obj(`"s":{"type":"string","minLength":1}`),
			new: obj(`"s":{"type":"string","minLength":2,"maxLength":9,"pattern":"^a","format":"email"}`),
			want: []want{
				{"/properties/s", "/spec/s", "format-added", 16, "", V, []string{"format"}, A, A},
				{"/properties/s", "/spec/s", "maxLength-tightened", 16, "", V, []string{"maxLength"}, A, A},
				{"/properties/s", "/spec/s", "minLength-tightened", 16, "", V, []string{"minLength"}, A, A},
				{"/properties/s", "/spec/s", "pattern-added", 16, "", V, []string{"pattern"}, A, A},
			}},
		{name: "row 16 pattern changed and const added", old: obj(`"s":{"type":"string","pattern":"^a"}`), new: obj(`"s":{"type":"string","pattern":"^b","const":"b"}`),
			want: []want{
				{"/properties/s", "/spec/s", "const-added", 16, "", V, []string{"const"}, A, A},
				{"/properties/s", "/spec/s", "pattern-changed", 16, "", V, []string{"pattern"}, A, A},
			}},
		{name: "row 16 multipleOf tightened", old: obj(`"n":{"type":"number","multipleOf":2}`), new: obj(`"n":{"type":"number","multipleOf":3}`),
			want: []want{{"/properties/n", "/spec/n", "multipleOf-tightened", 16, "", V, []string{"multipleOf"}, A, A}}},
		{name: "row 16 enum restriction added", old: obj(`"m":{"type":"string"}`), new: obj(`"m":{"type":"string","enum":["a"]}`),
			want: []want{{"/properties/m", "/spec/m", "enum-added", 16, "", V, []string{"enum"}, A, A}}},
		{name: "row 17 container constraints", old: obj(`"l":{"type":"array","items":{"type":"string"},"maxItems":5}`),
			new: obj(`"l":{"type":"array","items":{"type":"string"},"maxItems":3,"minItems":1,"uniqueItems":true}`),
			want: []want{
				{"/properties/l", "/spec/l", "maxItems-tightened", 17, "", V, []string{"maxItems"}, A, A},
				{"/properties/l", "/spec/l", "minItems-tightened", 17, "", V, []string{"minItems"}, A, A},
				{"/properties/l", "/spec/l", "uniqueItems-added", 17, "", V, []string{"uniqueItems"}, A, A},
			}},
		{name: "row 17 map constraints", old: obj(`"m":{"type":"object","additionalProperties":{"type":"string"}}`),
			new:  obj(`"m":{"type":"object","additionalProperties":{"type":"string"},"maxProperties":3}`),
			want: []want{{"/properties/m", "/spec/m", "maxProperties-tightened", 17, "", V, []string{"maxProperties"}, A, A}}},
		{name: "row 17 additionalProperties closed", old: obj(`"m":{"type":"object","additionalProperties":true}`), new: obj(`"m":{"type":"object"}`),
			want: []want{{"/properties/m", "/spec/m", "additionalProperties-tightened", 17, "", V, []string{"additionalProperties"}, A, A}}},
		{name: "row 17 x-preserve-unknown-fields removed", old: obj(`"m":{"type":"object","x-preserve-unknown-fields":true}`),
			new:  obj(`"m":{"type":"object","additionalProperties":{"type":"string"}}`),
			want: []want{{"/properties/m", "/spec/m", "preserve-unknown-fields-removed", 17, "", V, []string{"additionalProperties"}, A, A}}},
		{name: "row 17 x-list-map-keys changed", old: obj(`"l":{"type":"array","x-list-map-keys":["name"],"items":{"type":"object","properties":{"name":{"type":"string"}}}}`),
			new:     obj(`"l":{"type":"array","x-list-map-keys":["id"],"items":{"type":"object","properties":{"name":{"type":"string"}}}}`),
			want:    []want{{"/properties/l", "/spec/l", "list-map-keys-changed", 17, "", NC, nil, R, R}},
			forward: []string{"`l`"}},
		{name: "row 18 maximum raised", old: obj(`"n":{"type":"integer","maximum":5}`), new: obj(`"n":{"type":"integer","maximum":10}`),
			want: []want{{"/properties/n", "/spec/n", "maximum-loosened", 18, "readersHandleWiderValues", NC, nil, K, K}}},
		{name: "row 18 maximum raised on a user-only field", old: obj(`"n":{"type":"integer","maximum":5}`),
			new:  obj(`"n":{"type":"integer","maximum":10,"x-user-only":true}`),
			want: []want{{"/properties/n", "/spec/n", "maximum-loosened", 18, "", NC, nil, A, A}}},
		{name: "row 18 user-only is inherited", old: obj(`"o":{"type":"object","properties":{"n":{"type":"integer","minimum":5}}}`),
			new:  obj(`"o":{"type":"object","x-user-only":true,"properties":{"n":{"type":"integer"}}}`),
			want: []want{{"/properties/o/properties/n", "/spec/o/n", "minimum-loosened", 18, "", NC, nil, A, A}}},
		{name: "row 18 loosenings", old: obj(`"s":{"type":"string","pattern":"^a","enum":["a"],"multipleOf":4}`),
			new: obj(`"s":{"type":"string","multipleOf":2}`),
			want: []want{
				{"/properties/s", "/spec/s", "enum-removed", 18, "readersHandleWiderValues", NC, nil, K, K},
				{"/properties/s", "/spec/s", "multipleOf-loosened", 18, "readersHandleWiderValues", NC, nil, K, K},
				{"/properties/s", "/spec/s", "pattern-removed", 18, "readersHandleWiderValues", NC, nil, K, K},
			}},
		{name: "row 18 additionalProperties opened", old: obj(`"m":{"type":"object"}`), new: obj(`"m":{"type":"object","x-preserve-unknown-fields":true}`),
			want: []want{{"/properties/m", "/spec/m", "preserve-unknown-fields-added", 18, "readersHandleWiderValues", NC, nil, K, K}}},
		{name: "row 19 default changed", old: obj(`"n":{"type":"integer","default":1}`), new: obj(`"n":{"type":"integer","default":2}`),
			want:    []want{{"/properties/n", "/spec/n", "default-changed", 19, "", NC, nil, R, R}},
			forward: []string{"`n`", "1"}},
		{name: "row 19 same default in another spelling", old: obj(`"o":{"type":"object","default":{"a":1,"b":[1.0]}}`),
			new: obj(`"o":{"type":"object","default":{"b":[1],"a":1.00}}`), want: []want{}},
		{name: "row 20 default added", old: obj(`"n":{"type":"integer"}`), new: obj(`"n":{"type":"integer","default":3}`),
			want: []want{{"/properties/n", "/spec/n", "default-added", 20, "defaultEqualsAbsentBehaviour", NC, nil, K, K}}},
		{name: "row 21 default removed", old: obj(`"n":{"type":"integer","default":3}`), new: obj(`"n":{"type":"integer"}`),
			want:    []want{{"/properties/n", "/spec/n", "default-removed", 21, "", AB, nil, A, R}},
			forward: []string{"`n`", "3"}},
		{name: "combinator added", old: obj(`"n":{"type":"integer"}`), new: obj(`"n":{"type":"integer","anyOf":[{"minimum":1},{"maximum":-1}]}`),
			want: []want{{"/properties/n", "/spec/n", "anyOf-added", 16, "", V, []string{"anyOf"}, A, A}}},
		{name: "combinator removed", old: obj(`"n":{"type":"integer","not":{"const":0}}`), new: obj(`"n":{"type":"integer"}`),
			want: []want{{"/properties/n", "/spec/n", "not-removed", 18, "readersHandleWiderValues", NC, nil, K, K}}},
		{name: "combinator tightened", old: obj(`"n":{"type":"integer","allOf":[{"minimum":1}]}`), new: obj(`"n":{"type":"integer","allOf":[{"minimum":1},{"maximum":9}]}`),
			want: []want{{"/properties/n", "/spec/n", "allOf-tightened", 16, "", V, []string{"allOf"}, A, A}}},
		{name: "combinator changed unclassified", old: obj(`"n":{"type":"integer","oneOf":[{"minimum":1}]}`), new: obj(`"n":{"type":"integer","oneOf":[{"minimum":2}]}`),
			want: []want{{"/properties/n", "/spec/n", "oneOf-changed", 18, "readersHandleWiderValues", V, []string{"oneOf"}, K, K}}},
		{name: "keyword outside the subset changed", old: obj(`"l":{"type":"array","items":{"type":"string"},"contains":{"const":"a"}}`),
			new:  obj(`"l":{"type":"array","items":{"type":"string"},"contains":{"const":"b"}}`),
			want: []want{{"/properties/l", "/spec/l", "contains-changed", 18, "readersHandleWiderValues", V, []string{"contains"}, K, K}}},
		{name: "nested through items and properties", old: obj(`"a":{"type":"array","items":{"type":"object","properties":{"b":{"type":"integer","maximum":9}}}}`),
			new:  obj(`"a":{"type":"array","items":{"type":"object","properties":{"b":{"type":"integer","maximum":3}}}}`),
			want: []want{{"/properties/a/items/properties/b", "/spec/a/*/b", "maximum-tightened", 16, "", V, []string{"maximum"}, A, A}}},
		{name: "nested through additionalProperties", old: obj(`"m":{"type":"object","additionalProperties":{"type":"number"}}`),
			new:  obj(`"m":{"type":"object","additionalProperties":{"type":"integer"}}`),
			want: []want{{"/properties/m/additionalProperties", "/spec/m/*", "type-narrowed", 12, "", V, []string{"type"}, A, R}}},
		{name: "escaped names", old: obj(`"a/b":{"type":"string"}`), new: obj(`"a/b":{"type":"integer"}`),
			want: []want{{"/properties/a~1b", "/spec/a~1b", "type-changed", 13, "", NC, nil, R, R}}},
	}
	rows := map[int]bool{}
	for _, tc := range cases {
		for _, w := range tc.want {
			rows[w.Row] = true
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Empty(t, compat.Diff(schema(t, tc.old), schema(t, tc.old)), "Diff(old, old)")
			require.Empty(t, compat.Diff(schema(t, tc.new), schema(t, tc.new)), "Diff(new, new)")
			got := compat.Diff(schema(t, tc.old), schema(t, tc.new))
			require.Equal(t, tc.want, project(got))
			for _, c := range got {
				require.NotEmpty(t, c.Message, c.Rule)
				if c.IfClean == compat.Reject || c.IfAffected == compat.Reject {
					require.NotEmpty(t, c.WayForward, c.Rule)
					for _, s := range tc.forward {
						require.Contains(t, c.WayForward, s, c.Rule)
					}
				}
			}
		})
	}
	for row := 1; row <= 21; row++ {
		require.True(t, rows[row], "no case for row %d (row 22, transition rules, does not apply)", row)
	}
}

func TestDiffSortedAndTypeChangeWayForward(t *testing.T) {
	t.Parallel()
	old := schema(t, obj(`"size":{"type":"string"},"b":{"type":"integer","maximum":3},"a":{"type":"integer"}`, "a"))
	new := schema(t, obj(`"size":{"type":"integer"},"b":{"type":"integer","maximum":1,"minimum":0},"a":{"type":"integer"}`))
	got := compat.Diff(old, new)
	var keys []string
	for _, c := range got {
		keys = append(keys, c.Path+" "+c.Rule)
	}
	require.Equal(t, []string{
		"/properties/a required-removed",
		"/properties/b maximum-tightened",
		"/properties/b minimum-tightened",
		"/properties/size type-changed",
	}, keys)
	require.Equal(t, "keep `size` as string; add a new field (e.g. `sizeV2`) of type integer, mark `size` "+
		"deprecated: true, and remove it later with x-removed: true", got[3].WayForward)
}

func TestCounts(t *testing.T) {
	t.Parallel()
	c := compat.Change{Path: "/properties/n", Check: compat.Violations, Keywords: []string{"anyOf", "additionalProperties"}}
	require.True(t, c.Counts("/properties/n", "anyOf"))
	require.True(t, c.Counts("/properties/n/anyOf/0", "minimum"))
	require.True(t, c.Counts("/properties/n", "additionalProperties"))
	require.True(t, c.Counts("/properties/n/properties/unknown", "additionalProperties"))
	require.False(t, c.Counts("/properties/n", "maximum"))
	require.False(t, c.Counts("/properties/n/properties/x/properties/y", "additionalProperties"))
	require.False(t, c.Counts("/properties/nn", "anyOf"))
	require.False(t, c.Counts("/properties/n/anyOfX/1", "anyOf"))
	c.Check = compat.Present
	require.False(t, c.Counts("/properties/n", "anyOf"))
}
