package kind_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/resource"
)

// benchSchema is a 20-field kind with the usual constraints, the shape BenchmarkAdmit of
// package schema also measures.
var benchSchema = func() string {
	props := map[string]any{}
	for i := range 16 {
		props[fmt.Sprintf("s%02d", i)] = map[string]any{"type": "string", "maxLength": 64, "pattern": "^[a-z0-9-]*$"}
	}
	props["size"] = map[string]any{"type": "integer", "minimum": 1, "maximum": 1000}
	props["ratio"] = map[string]any{"type": "number"}
	props["engine"] = map[string]any{"type": "string", "enum": []string{"postgres", "mysql"}}
	props["tags"] = map[string]any{"type": "array", "maxItems": 10, "items": map[string]any{"type": "string"}}
	b, _ := json.Marshal(map[string]any{"type": "object", "required": []string{"engine"}, "properties": props})
	return string(b)
}()

func benchSpec(i int) string {
	m := map[string]any{"engine": "postgres", "size": 1 + i%1000, "ratio": 0.5, "tags": []string{"a", "b"}}
	for j := range 16 {
		m[fmt.Sprintf("s%02d", j)] = fmt.Sprintf("value-%d", (i+j)%97)
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// benchWrites replaces one object of kind again and again with changing specs: the cost
// of a write through the generic path, schema pipeline included.
func benchWrites(b *testing.B, kind, org string) {
	r := setup(b)
	ctx := context.Background()
	if kind == "Database" {
		_, err := r.kinds.Register(ctx, admin, "Database", api.KindRequest{Scope: "org", Schema: json.RawMessage(benchSchema)}, false)
		require.NoError(b, err)
	}
	ref := resource.Ref{Kind: kind, Org: org, Name: "bench"}
	_, err := r.res.Create(ctx, ref, obj(benchSpec(0)))
	require.NoError(b, err)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := r.res.Replace(ctx, ref, obj(benchSpec(i+1))); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteValidated: a 20-field object of a user kind (full write pipeline and
// ratcheting validation against the stored object).
func BenchmarkWriteValidated(b *testing.B) { benchWrites(b, "Database", "acme") }

// BenchmarkWriteFreeForm: the same spec as an org's (a free-form schema): the baseline
// the validation cost is measured against.
func BenchmarkWriteFreeForm(b *testing.B) { benchWrites(b, resource.KindOrg, "") }

var benchQueries = db.MustParseQueries(fstest.MapFS{"bench.sql": {Data: []byte(`
-- name: BenchInsertObjects
INSERT INTO {{schema}}.resources (kind, org, name, spec, schema_revision, resource_version)
SELECT 'Database', 'acme', 'db-' || g, $2::jsonb || jsonb_build_object('size', 1 + g % 1000), 1, 0
FROM generate_series(1, $1::int) g;
`)}}, "bench.sql")

// BenchmarkRegisterScan100k: the data-aware check of a registration over 100,000 stored
// objects — a dry run of tightening size's maximum to 500, which validates every stored
// spec with the new revision and lists the ≈ 50,000 that exceed it.
func BenchmarkRegisterScan100k(b *testing.B) {
	r := setup(b)
	ctx := context.Background()
	_, err := r.kinds.Register(ctx, admin, "Database", api.KindRequest{Scope: "org", Schema: json.RawMessage(benchSchema)}, false)
	require.NoError(b, err)
	_, err = r.d.Exec(ctx, benchQueries.Get("BenchInsertObjects"), 100000, benchSpec(1))
	require.NoError(b, err)
	var tight map[string]any
	require.NoError(b, json.Unmarshal([]byte(benchSchema), &tight))
	tight["properties"].(map[string]any)["size"].(map[string]any)["maximum"] = 500
	next, _ := json.Marshal(tight)
	b.ResetTimer()
	for b.Loop() {
		res, err := r.kinds.Register(ctx, admin, "Database", api.KindRequest{Schema: next}, true)
		if err != nil {
			b.Fatal(err)
		}
		if res.Report.Scanned != 100000 || res.Report.Changes[0].Impact.Count != 50000 {
			b.Fatalf("scanned %d, impact %+v", res.Report.Scanned, res.Report.Changes[0].Impact)
		}
	}
}
