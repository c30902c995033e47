package schema_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/kind/schema"
)

// BenchmarkAdmit measures the write pipeline for a valid update of a 20-field object against a
// compiled schema (the registry caches one per revision), for docs/benchmarks.md.
func BenchmarkAdmit(b *testing.B) {
	var props, fields []string
	for i := range 20 {
		switch i % 4 {
		case 0:
			props = append(props, fmt.Sprintf(`"f%d": {"type": "string", "maxLength": 64, "pattern": "^[a-z0-9-]+$"}`, i))
			fields = append(fields, fmt.Sprintf(`"f%d": "value-%d"`, i, i))
		case 1:
			props = append(props, fmt.Sprintf(`"f%d": {"type": "integer", "minimum": 0, "maximum": 100000, "default": 1}`, i))
			fields = append(fields, fmt.Sprintf(`"f%d": %d`, i, i*10))
		case 2:
			props = append(props, fmt.Sprintf(`"f%d": {"type": "string", "enum": ["a", "b", "c"]}`, i))
			fields = append(fields, fmt.Sprintf(`"f%d": "b"`, i))
		case 3:
			props = append(props, fmt.Sprintf(`"f%d": {"type": "object", "properties": {"x": {"type": "boolean"}, "y": {"type": "number"}}}`, i))
			fields = append(fields, fmt.Sprintf(`"f%d": {"x": true, "y": 1.5}`, i))
		}
	}
	s := mustParse(b, `{"type": "object", "properties": {`+strings.Join(props, ",")+`}}`)
	old := s.Present(obj(b, `{`+strings.Join(fields, ",")+`}`))
	spec := obj(b, `{`+strings.Replace(strings.Join(fields, ","), `"value-0"`, `"value-changed"`, 1)+`}`)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := s.Admit(spec, old); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse measures compiling the rich test schema (registration and cache-miss cost).
func BenchmarkParse(b *testing.B) {
	doc := []byte(richSchema)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := schema.Parse(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPresent measures the read pipeline on a stored object of the rich schema.
func BenchmarkPresent(b *testing.B) {
	s := mustParse(b, richSchema)
	stored := obj(b, `{"size": 3, "sizeInBytes": 9, "legacy": "x", "net": {"zone": "a"},
		"ports": [{"name": "a", "port": 80}, {"name": "b", "port": 443}], "tags": ["x", "y"], "labels": {"a": "b"}}`)
	b.ReportAllocs()
	for b.Loop() {
		s.Present(stored)
	}
}
