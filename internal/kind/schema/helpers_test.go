package schema_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/kind/schema"
)

// richSchema exercises every feature of the pipelines: defaults (also of a required field), a
// tightened maximum, an alias, a tombstone, a deprecated field, a nested closed object with a
// required field, a map list, an atomic list, integer and number fields, a free-form subtree,
// additionalProperties schemas and a combinator.
const richSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "required": ["replicas"],
  "properties": {
    "replicas": {"type": "integer", "default": 1, "minimum": 0},
    "size": {"type": "integer", "maximum": 10},
    "ratio": {"type": "number"},
    "big": {"type": "integer"},
    "name": {"type": "string", "maxLength": 20},
    "sizeBytes": {"type": "integer", "x-aliases": ["sizeInBytes"]},
    "legacy": {"type": "string", "x-removed": true},
    "old": {"type": "string", "deprecated": true},
    "mode": {"type": "string", "enum": ["fast", "safe"], "default": "safe"},
    "comment": {"type": ["string", "null"], "default": "none"},
    "limits": {
      "type": "object",
      "default": {},
      "properties": {"cpu": {"type": "integer", "default": 1}}
    },
    "net": {
      "type": "object",
      "required": ["zone"],
      "properties": {
        "zone": {"type": "string"},
        "mtu": {"type": "integer", "default": 1500}
      }
    },
    "ports": {
      "type": "array",
      "x-list-map-keys": ["name"],
      "items": {
        "type": "object",
        "required": ["name"],
        "properties": {
          "name": {"type": "string"},
          "port": {"type": "integer", "maximum": 1000},
          "proto": {"type": "string", "default": "tcp"}
        }
      }
    },
    "tags": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 5}},
    "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 8}},
    "extra": {"type": "object", "x-preserve-unknown-fields": true},
    "code": {"type": "string", "allOf": [{"pattern": "^[a-z]+$"}]}
  }
}`

func mustParse(t testing.TB, doc string) *schema.Schema {
	t.Helper()
	s, err := schema.Parse([]byte(doc))
	require.NoError(t, err)
	return s
}

// obj decodes JSON the way strata's HTTP layer and store do: numbers as json.Number.
func obj(t testing.TB, doc string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(doc)))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m))
	return m
}

// fields returns the fault kind and the field → message map of err.
func fields(t testing.TB, err error) (fault.Kind, map[string]string) {
	t.Helper()
	require.Error(t, err)
	var fe *fault.Error
	require.True(t, errors.As(err, &fe), "want *fault.Error, got %T: %v", err, err)
	m := map[string]string{}
	for _, f := range fe.Fields {
		m[f.Field] = f.Message
	}
	return fe.Kind, m
}

func toJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func summarise(vs []schema.Violation) []string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		out = append(out, v.Instance+" "+v.Keyword+" "+v.Schema)
	}
	return out
}
