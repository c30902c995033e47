package merge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// benchLayers is a realistic stack: global, org, eight groups and categories, node — ten
// layers of about 1 KB each, overlapping on the same top-level keys as real pillars do
// (apache, ntp, users, pkgs), so most of the work is recursion and list handling, not copying
// disjoint keys.
func benchLayers(b *testing.B) []Layer { return benchLayersT(b) }

func benchLayersT(b testing.TB) []Layer {
	b.Helper()
	targets := []string{"global", "org/acme", "group/acme/base", "group/acme/web", "group/acme/eu",
		"group/acme/prod", "group/acme/php", "group/acme/monitoring", "group/acme/backup", "node/web01"}
	layers := make([]Layer, len(targets))
	for i, target := range targets {
		doc := fmt.Sprintf(`{
			"apache": {"port": %d, "user": "www-data", "modules": ["ssl", "rewrite", "mod%d"],
				"vhosts": {"site%d": {"root": "/srv/www/site%d", "aliases": ["a%d.example.com", "b%d.example.com"], "tls": true}}},
			"ntp": {"servers": ["0.pool.ntp.org", "1.pool.ntp.org", "ntp%d.acme"], "iburst": true},
			"users": {"user%d": {"uid": %d, "groups": ["wheel", "docker"], "shell": "/bin/bash",
				"keys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG%dexamplekeymaterialexamplekeymaterial"]}},
			"pkgs": ["vim", "curl", "git", "htop", "pkg%d"],
			"sysctl": {"vm.swappiness": %d, "net.core.somaxconn": 4096, "fs.file-max": 12345678901234567890123},
			"layer%d": {"category": "general", "owner": "team-%d", "notes": "a free-text note of a few dozen characters"},
			"firewall": {"rules": [{"port": 22, "from": "10.0.0.0/8"}, {"port": 443, "from": "0.0.0.0/0"}, {"port": %d, "from": "10.%d.0.0/16"}],
				"policy": "drop"},
			"motd": "managed by strata, layer %d"}`,
			8000+i, i, i, i, i, i, i, i, 1000+i, i, i, 10+i, i, i, 9000+i, i, i)
		layers[i] = Layer{Target: target, Category: "general", Data: object(b, doc)}
		raw, err := json.Marshal(layers[i].Data)
		require.NoError(b, err)
		require.InDelta(b, 1000, len(raw), 200, "about 1 KB per layer")
	}
	return layers
}

func BenchmarkMerge(b *testing.B) {
	layers := benchLayers(b)
	for _, opts := range []Options{{MergeLists: false}, {MergeLists: true}} {
		b.Run(fmt.Sprintf("mergeLists=%v", opts.MergeLists), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Merge(layers, opts)
			}
		})
	}
}

func BenchmarkExplain(b *testing.B) {
	layers := benchLayers(b)
	for _, opts := range []Options{{MergeLists: false}, {MergeLists: true}} {
		b.Run(fmt.Sprintf("mergeLists=%v", opts.MergeLists), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Explain(layers, opts)
			}
		})
	}
}

// BenchmarkMergeLongLists merges two 10,000-item lists (half of the higher one's items already
// in the lower one) with list merging on: the case that took 5–12 s per render while each item
// was compared with every other (issue 27, finding 6).
func BenchmarkMergeLongLists(b *testing.B) {
	layers := bigListLayers(10000)
	b.Run("Merge", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Merge(layers, Options{MergeLists: true})
		}
	})
	b.Run("Explain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Explain(layers, Options{MergeLists: true})
		}
	})
}

// BenchmarkMergeRendered is a cold render's merge from the rows' text to the answer's bytes,
// both ways: decoding every row into maps, merging and encoding the result (what renders did
// before issue 31), and MergeJSON, which decodes only the objects several layers set.
func BenchmarkMergeRendered(b *testing.B) {
	layers := benchLayers(b)
	raw := make([]RawLayer, len(layers))
	for i, l := range layers {
		// The text as PostgreSQL's jsonb writes it: spaces after separators.
		var sb strings.Builder
		writer{rand.New(rand.NewPCG(uint64(i), 1))}.value(&sb, l.Data)
		raw[i] = RawLayer{Target: l.Target, Category: l.Category, Data: []byte(sb.String())}
	}
	for _, opts := range []Options{{MergeLists: false}, {MergeLists: true}} {
		b.Run(fmt.Sprintf("decoded/mergeLists=%v", opts.MergeLists), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				decoded := make([]Layer, len(raw))
				for i, l := range raw {
					dec := json.NewDecoder(bytes.NewReader(l.Data))
					dec.UseNumber()
					var m map[string]any
					if err := dec.Decode(&m); err != nil {
						b.Fatal(err)
					}
					decoded[i] = Layer{Data: m}
				}
				if _, err := json.Marshal(Merge(decoded, opts)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("raw/mergeLists=%v", opts.MergeLists), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := MergeJSON(context.Background(), raw, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
