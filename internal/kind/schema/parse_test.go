package schema_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/kind/schema"
)

func TestParseRefusesWhatIsOutsideTheStructuralSubset(t *testing.T) {
	t.Parallel()
	obj := func(props string) string { return `{"type": "object", "properties": {` + props + `}}` }
	deep := `{"type": "string"}`
	for range schema.MaxDepth + 1 {
		deep = `{"type": "object", "properties": {"a": ` + deep + `}}`
	}
	cases := []struct {
		name, doc, field, reason string
	}{
		{"not JSON", `{"type": `, "", "not valid JSON"},
		{"trailing data", `{"type": "object"} {}`, "", "data after the schema"},
		{"not an object", `[1]`, "", "must be a JSON object"},
		{"root not object", `{"type": "string"}`, "/type", `must be "type": "object"`},
		{"root without type", `{"properties": {}}`, "/type", "needs a type"},
		{"other draft", `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}`, "/$schema", "2020-12"},
		{"untyped property", obj(`"size": {"minimum": 1}`), "/properties/size/type", "needs a type"},
		{"unknown type", obj(`"size": {"type": "int"}`), "/properties/size/type", "unknown type"},
		{"only null", obj(`"size": {"type": "null"}`), "/properties/size/type", "only"},
		{"untyped items", obj(`"l": {"type": "array", "items": {}}`), "/properties/l/items/type", "needs a type"},
		{"array without items", obj(`"l": {"type": "array"}`), "/properties/l/items", "needs an items"},
		{"untyped additionalProperties", obj(`"m": {"type": "object", "additionalProperties": {"minLength": 1}}`), "/properties/m/additionalProperties/type", "needs a type"},
		{"$ref", obj(`"a": {"$ref": "#/$defs/x"}`), "/properties/a/$ref", "not supported in kind schemas: $ref"},
		{"$defs", `{"type": "object", "$defs": {}}`, "/$defs", "not supported"},
		{"$id", `{"type": "object", "$id": "https://example.com/s"}`, "/$id", "not supported"},
		{"patternProperties", obj(`"m": {"type": "object", "patternProperties": {}}`), "/properties/m/patternProperties", "not supported"},
		{"if", obj(`"m": {"type": "object", "if": {}}`), "/properties/m/if", "not supported"},
		{"unevaluatedProperties", `{"type": "object", "unevaluatedProperties": false}`, "/unevaluatedProperties", "not supported"},
		{"dependentSchemas", `{"type": "object", "dependentSchemas": {}}`, "/dependentSchemas", "not supported"},
		{"unknown extension", obj(`"a": {"type": "string", "x-foo": 1}`), "/properties/a/x-foo", "not supported"},
		{"boolean property schema", obj(`"a": true`), "/properties/a", "schema object"},
		{"properties not an object", `{"type": "object", "properties": []}`, "/properties", "object of schemas"},
		{"type in combinator", obj(`"a": {"type": "string", "anyOf": [{"type": "integer"}]}`), "/properties/a/anyOf/0/type", "not allowed inside"},
		{"default in combinator", obj(`"a": {"type": "string", "allOf": [{"default": "x"}]}`), "/properties/a/allOf/0/default", "not allowed inside"},
		{"property only in combinator", obj(`"a": {"type": "object", "oneOf": [{"properties": {"b": {"minimum": 1}}}]}`), "/properties/a/oneOf/0/properties/b", "not declared outside"},
		{"required only in combinator", obj(`"a": {"type": "object", "not": {"required": ["b"]}}`), "/properties/a/not/required/0", "not declared outside"},
		{"empty anyOf", obj(`"a": {"type": "string", "anyOf": []}`), "/properties/a/anyOf", "non-empty"},
		{"required undefined in closed object", `{"type": "object", "required": ["x"]}`, "/required/0", "not defined"},
		{"required tombstone", `{"type": "object", "required": ["x"], "properties": {"x": {"type": "string", "x-removed": true}}}`, "/required/0", "removed"},
		{"x-removed not bool", obj(`"a": {"type": "string", "x-removed": "yes"}`), "/properties/a/x-removed", "true or false"},
		{"x-removed on items", obj(`"l": {"type": "array", "items": {"type": "string", "x-removed": true}}`), "/properties/l/items/x-removed", "only allowed on a property"},
		{"x-assert-formats below root", obj(`"a": {"type": "string", "x-assert-formats": true}`), "/properties/a/x-assert-formats", "root"},
		{"x-preserve not bool", obj(`"a": {"x-preserve-unknown-fields": 1}`), "/properties/a/x-preserve-unknown-fields", "true or false"},
		{"preserve and closed", obj(`"a": {"type": "object", "x-preserve-unknown-fields": true, "additionalProperties": false}`), "/properties/a/additionalProperties", "contradicts"},
		{"alias is a property", obj(`"a": {"type": "string", "x-aliases": ["b"]}, "b": {"type": "string"}`), "/properties/a/x-aliases/0", "name of a current property"},
		{"alias shared", obj(`"a": {"type": "string", "x-aliases": ["c"]}, "b": {"type": "string", "x-aliases": ["c"]}`), "/properties/b/x-aliases/0", "already an alias"},
		{"alias twice", obj(`"a": {"type": "string", "x-aliases": ["c", "c"]}`), "/properties/a/x-aliases/1", "twice"},
		{"list map key not required", obj(`"l": {"type": "array", "x-list-map-keys": ["k"], "items": {"type": "object", "properties": {"k": {"type": "string"}}}}`), "/properties/l/x-list-map-keys/0", "must be required"},
		{"list map key not scalar", obj(`"l": {"type": "array", "x-list-map-keys": ["k"], "items": {"type": "object", "required": ["k"], "properties": {"k": {"type": "object"}}}}`), "/properties/l/x-list-map-keys/0", "scalar"},
		{"list map key missing", obj(`"l": {"type": "array", "x-list-map-keys": ["k"], "items": {"type": "object"}}`), "/properties/l/x-list-map-keys/0", "not a property"},
		{"list map keys on scalars", obj(`"l": {"type": "array", "x-list-map-keys": ["k"], "items": {"type": "string"}}`), "/properties/l/x-list-map-keys", "items are objects"},
		{"bad pattern", obj(`"a": {"type": "string", "pattern": "(["}`), "/properties/a/pattern", "does not compile"},
		{"bad pattern in combinator", obj(`"a": {"type": "string", "allOf": [{"pattern": "(["}]}`), "/properties/a/allOf/0/pattern", "does not compile"},
		{"invalid default", obj(`"a": {"type": "integer", "maximum": 3, "default": 5}`), "/properties/a/default", "maximum: 5 is greater than 3"},
		{"default of wrong type", obj(`"a": {"type": "integer", "default": "x"}`), "/properties/a/default", "type: expected integer"},
		{"default with unknown field", obj(`"a": {"type": "object", "properties": {"b": {"type": "string"}}, "default": {"c": "x"}}`), "/properties/a/default", "does not define"},
		{"default missing nested required", obj(`"a": {"type": "object", "required": ["b"], "properties": {"b": {"type": "string"}}, "default": {}}`), "/properties/a/default", "missing"},
		{"metaschema: minimum not a number", obj(`"a": {"type": "integer", "minimum": "1"}`), "/properties/a/minimum", "not a valid JSON Schema"},
		{"metaschema: negative maxLength", obj(`"a": {"type": "string", "maxLength": -1}`), "/properties/a/maxLength", "not a valid JSON Schema"},
		{"huge exponent", obj(`"a": {"type": "integer", "maximum": 1e99999999}`), "/properties/a/maximum", "out of range"},
		{"too deep", deep, strings.Repeat("/properties/a", schema.MaxDepth+1), "deeper than"},
		{"too large", `{"type": "object", "description": "` + strings.Repeat("x", schema.MaxDocumentBytes) + `"}`, "", "at most"},
		{"JSON too deep", strings.Repeat("[", 200) + strings.Repeat("]", 200), strings.Repeat("/0", 128), "deeper than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := schema.Parse([]byte(tc.doc))
			require.Nil(t, s)
			k, f := fields(t, err)
			require.Equal(t, fault.KindUnprocessable, k)
			require.Contains(t, f, tc.field, "fields: %v", f)
			require.Contains(t, f[tc.field], tc.reason)
		})
	}
}

func TestParseAcceptsTheSubset(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	require.Equal(t, "object", s.Doc()["type"])
	// Doc is a copy: changing it does not change the schema.
	s.Doc()["type"] = "string"
	require.Equal(t, "object", s.Doc()["type"])

	for _, doc := range []string{
		`{"type": "object"}`,
		`{"type": "object", "x-preserve-unknown-fields": true}`,
		`{"type": "object", "properties": {"free": {"x-preserve-unknown-fields": true}}}`,
		`{"type": "object", "properties": {"a": {"type": ["integer", "null"], "default": null}}}`,
		`{"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "integer"}},
			"anyOf": [{"required": ["b"]}, {"properties": {"b": {"minimum": 3}}}]}}}`,
		`{"type": "object", "properties": {"e": {"type": "string", "enum": ["a"], "x-enum-open": true, "deprecated": true}}}`,
	} {
		_, err := schema.Parse([]byte(doc))
		require.NoError(t, err, doc)
	}
}
