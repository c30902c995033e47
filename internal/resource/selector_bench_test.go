package resource_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/metadata"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/resource"
)

// benchData loads size nodes with five labels each into strata's tables and the same data as
// ../shared/bench/anchor-labels.sql into schema cc (the labels table as Cloud Foundry's ADR
// leaves it): k0 (prefix example.com) to k4, value 'v' || ((r * (k + 3)) % 20).
var benchData = []string{
	`INSERT INTO strata.resources (kind, org, name, spec, resource_version) VALUES ('Org', '', 'bench', '{}', 0)`,
	`INSERT INTO strata.resources (kind, org, name, spec, resource_version)
	 SELECT 'Node', '', 'n' || lpad(g::text, 7, '0'), '{"org":"bench"}', 0 FROM generate_series(1, $1::int) g`,
	`INSERT INTO strata.labels (resource_id, key_prefix, key_name, value)
	 SELECT r.id, CASE WHEN k = 0 THEN 'example.com' ELSE '' END, 'k' || k, 'v' || ((substr(r.name, 2)::int * (k + 3)) % 20)
	 FROM strata.resources r, generate_series(0, 4) k WHERE r.kind = 'Node'`,
	`CREATE SCHEMA cc`,
	`CREATE TABLE cc.resources (id bigint PRIMARY KEY, guid text UNIQUE NOT NULL)`,
	`CREATE TABLE cc.labels (id bigserial PRIMARY KEY, resource_id bigint NOT NULL REFERENCES cc.resources(id) ON DELETE CASCADE,
	  key_prefix varchar(253) NOT NULL DEFAULT '', key_name varchar(63) NOT NULL, value varchar(63),
	  created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now(),
	  CONSTRAINT labels_unique UNIQUE (resource_id, key_prefix, key_name))`,
	`CREATE INDEX labels_kv ON cc.labels (key_prefix, key_name, value)`,
	`INSERT INTO cc.resources SELECT g, 'r-' || g FROM generate_series(1, $1::int) g`,
	`INSERT INTO cc.labels (resource_id, key_prefix, key_name, value)
	 SELECT r, CASE WHEN k = 0 THEN 'example.com' ELSE '' END, 'k' || k, 'v' || ((r * (k + 3)) % 20)
	 FROM generate_series(1, $1::int) r, generate_series(0, 4) k`,
	`VACUUM ANALYZE strata.resources, strata.labels, cc.resources, cc.labels`,
}

// BenchmarkSelectorList: strata's list with a label selector (Service.List, a page of 50: the
// counting statement, then the plan it chose) against the naive EXISTS query of
// ../shared/bench/anchor-labels-select.sql on the same data, 8 clients, for the anchor's own
// selector (k1=v<random 0..19>, k2 in (v1,v2,v3): matches nothing) and one that matches 10%.
// STRATA_BENCH_SIZE sets the number of resources (default 100000):
//
//	STRATA_BENCH_SIZE=1000000 go test -run x -bench SelectorList -benchtime 10s ./internal/resource/
func BenchmarkSelectorList(b *testing.B) {
	size := 100000
	if s := os.Getenv("STRATA_BENCH_SIZE"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		size = n
	}
	ctx := context.Background()
	d := pgtest.NewDB(b)
	for i, stmt := range benchData {
		var args []any
		if i == 1 || i == 7 || i == 8 {
			args = []any{size}
		}
		if _, err := d.Exec(ctx, &db.Query{Name: fmt.Sprintf("bench-data-%d", i), Text: stmt}, args...); err != nil {
			b.Fatal(stmt, err)
		}
	}
	svc := resource.NewService(d)
	anchor := &db.Query{Name: "anchor-labels-select", Text: `SELECT r.guid FROM cc.resources r
WHERE EXISTS (SELECT 1 FROM cc.labels l WHERE l.resource_id = r.id AND l.key_prefix = '' AND l.key_name = 'k1' AND l.value = $1)
  AND EXISTS (SELECT 1 FROM cc.labels l WHERE l.resource_id = r.id AND l.key_prefix = '' AND l.key_name = 'k2' AND l.value = ANY ($2::text[]))
LIMIT 50`}
	for _, c := range []struct {
		name   string
		k1     func(r *rand.Rand) string
		k2     []string
		wantUp int // at most this many results per page (a check that both sides ran the query)
	}{
		{"anchor-selector", func(r *rand.Rand) string { return fmt.Sprintf("v%d", r.IntN(20)) }, []string{"v1", "v2", "v3"}, 0},
		{"ten-percent", func(*rand.Rand) string { return "v4" }, []string{"v5", "v10"}, 50},
	} {
		b.Run(c.name+"/strata", func(b *testing.B) {
			b.SetParallelism(4) // 8 clients on 2 processors
			b.RunParallel(func(pb *testing.PB) {
				r := rand.New(rand.NewPCG(rand.Uint64(), 1))
				for pb.Next() {
					sel, err := metadata.ParseSelector(fmt.Sprintf("k1=%s,k2 in (%s,%s)", c.k1(r), c.k2[0], c.k2[len(c.k2)-1]))
					if c.name == "anchor-selector" {
						sel, err = metadata.ParseSelector(fmt.Sprintf("k1=%s,k2 in (v1,v2,v3)", c.k1(r)))
					}
					if err != nil {
						b.Fatal(err)
					}
					page, _, err := svc.List(ctx, resource.KindNode, "", resource.ListOptions{Limit: 50, Filter: auth.Filter{All: true}, Selector: sel})
					if err != nil || len(page.Items) > c.wantUp {
						b.Fatal(err, len(page.Items))
					}
				}
			})
		})
		b.Run(c.name+"/anchor", func(b *testing.B) {
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				r := rand.New(rand.NewPCG(rand.Uint64(), 2))
				for pb.Next() {
					rows, err := d.Query(ctx, anchor, c.k1(r), c.k2)
					if err != nil {
						b.Fatal(err)
					}
					n := 0
					for rows.Next() {
						n++
					}
					rows.Close()
					if rows.Err() != nil || n > c.wantUp {
						b.Fatal(rows.Err(), n)
					}
				}
			})
		})
	}
}
