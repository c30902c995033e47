package db_test

import (
	"context"
	"testing"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pgtest"
)

// BenchmarkResourceVersion measures what the commit-ordered resourceVersion costs: each
// iteration is a small write transaction (a row plus a change record) that draws its version
// either from next_resource_version() (advisory lock, so commits serialize from the draw to
// the commit) or from the bare sequence (no ordering guarantee). Run with -cpu to vary the
// number of concurrent writers; docs/benchmarks.md records the ratio.
func BenchmarkResourceVersion(b *testing.B) {
	for _, mode := range []struct{ name, draw string }{
		{"ordered", "SELECT {{schema}}.next_resource_version()"},
		{"plain-sequence", "SELECT nextval('{{schema}}.resource_version_seq')"},
	} {
		b.Run(mode.name, func(b *testing.B) {
			ctx := context.Background()
			d, err := db.Open(ctx, db.Options{URL: pgtest.NewDatabaseURL(b), MaxConns: 32})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			setup := &db.Query{Name: "BenchSetup", Text: "CREATE TABLE {{schema}}.bench (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v bigint)"}
			if _, err := d.Exec(ctx, setup); err != nil {
				b.Fatal(err)
			}
			insert := &db.Query{Name: "BenchInsert", Text: "INSERT INTO {{schema}}.bench (v) VALUES (0) RETURNING id"}
			draw := &db.Query{Name: "BenchDraw", Text: mode.draw}
			change := &db.Query{Name: "BenchChange", Text: "INSERT INTO {{schema}}.changes (resource_version, kind, name, type, object) VALUES ($1, 'Bench', $2::bigint::text, 'ADDED', '{}')"}
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					err := d.InTx(ctx, func(tx *db.Tx) error {
						var id, rv int64
						if err := tx.QueryRow(ctx, insert).Scan(&id); err != nil {
							return err
						}
						if err := tx.QueryRow(ctx, draw).Scan(&rv); err != nil {
							return err
						}
						_, err := tx.Exec(ctx, change, rv, id)
						return err
					})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
