package merge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// blobLayers is one render of bench/node-pillars.sh as PostgreSQL hands it over: eight rows
// (three global, org, three groups, node) made by the anchor's blob() — the same keys in
// every row (ntp, users with eight users, tag), so every object is merged from all of them.
func blobLayers() []RawLayer {
	var out []RawLayer
	for _, tag := range []string{"global", "global", "global", "org3", "group12", "group13", "group14", "minion-42"} {
		var users []string
		for i := 1; i <= 8; i++ {
			users = append(users, fmt.Sprintf(`"user%d": {"uid": %d, "shell": "/bin/bash", "groups": ["wheel", "%s"]}`, i, 1000+i, tag))
		}
		doc := fmt.Sprintf(`{"ntp": {"iburst": true, "servers": ["%s-a", "%s-b"]}, "tag": "%s", "users": {%s}}`, tag, tag, tag, strings.Join(users, ", "))
		out = append(out, RawLayer{Target: "t", Category: "c", Data: []byte(doc)})
	}
	return out
}

// BenchmarkMergeBlob is BenchmarkMergeRendered on the benchmark's own rows: decode, merge and
// encode (before issue 31) against MergeJSON.
func BenchmarkMergeBlob(b *testing.B) {
	raw := blobLayers()
	b.Run("decoded", func(b *testing.B) {
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
			if _, err := json.Marshal(Merge(decoded, Options{})); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := MergeJSON(context.Background(), raw, Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Through a replica's row memo: the global, org and group rows found there after the
	// first pass, the node's own rewritten for each merge, as in a render.
	b.Run("memo", func(b *testing.B) {
		b.ReportAllocs()
		memo := NewMemo(1 << 20)
		shared := slices.Clone(raw)
		for i := range shared[:len(shared)-1] { // every row but the node's own
			shared[i].Shared = true
		}
		for b.Loop() {
			if _, err := MergeJSONMemo(context.Background(), shared, Options{}, memo); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The benchmark's rows merge to the same bytes both ways.
func TestMergeBlobSameBytes(t *testing.T) {
	t.Parallel()
	raw := blobLayers()
	decoded := make([]Layer, len(raw))
	for i, l := range raw {
		decoded[i] = Layer{Data: object(t, string(l.Data))}
	}
	want, err := json.Marshal(Merge(decoded, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := MergeJSON(context.Background(), raw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}
