package httpapi

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stratahq/strata/api"
	"github.com/stretchr/testify/require"
)

// TestListJSONIsEncodingJSON: the list encoder writes exactly the bytes json.Marshal writes
// for a page — plain objects, and strings and values it must escape or compact (HTML
// characters, quotes, control characters, non-ASCII, U+2028, whitespace in a spec as jsonb
// prints it), absent and empty maps, zero and set optional fields, an empty and a nil page.
func TestListJSONIsEncodingJSON(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 10, 0, 0, 123456000, time.UTC)
	whole := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	odd := []string{"", "plain", `q"uote`, `back\slash`, "<b>&amp;</b>", "tab\there", "nl\n", "ctl\x01\x1f", "ünïcode", "line\u2028sep", "bad\xffutf8", "~ok~"}
	raws := []string{`{}`, `{"org": "bench"}`, `{"a":[1, 2.50, {"b": null}],"c":"<x>"}`, `{"s":"\u2028 & more"}`, "{\n  \"n\": 12345678901234567890123\n}", `{"e":"é"}`}
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	var pages []api.ObjectList
	pages = append(pages, api.ObjectList{}, api.ObjectList{Items: []api.Object{}, ResourceVersion: "7"})
	for range 200 {
		var items []api.Object
		for range r.IntN(5) {
			o := api.Object{Kind: pick([]string{"Node", "Group", "Org", "x<y"}), Metadata: api.ObjectMeta{Name: pick(odd), UID: pick(odd), Org: pick(odd), ResourceVersion: pick(odd)}}
			if r.IntN(4) > 0 {
				o.Metadata.Labels = map[string]string{}
				for range r.IntN(6) {
					o.Metadata.Labels[pick(odd)+pick([]string{"k", "example.com/k", "a"})] = pick(odd)
				}
			}
			if r.IntN(4) > 0 {
				o.Metadata.Annotations = map[string]string{pick(odd): pick(odd)}
			}
			if r.IntN(2) == 0 {
				o.Metadata.SchemaRevision = r.IntN(5) - 1
			}
			if r.IntN(2) == 0 {
				o.Metadata.CreatedAt, o.Metadata.UpdatedAt = &now, &whole
			}
			if r.IntN(5) > 0 {
				o.Spec = json.RawMessage(pick(raws))
			}
			if r.IntN(3) == 0 {
				o.Status = json.RawMessage(pick(raws))
			}
			items = append(items, o)
		}
		if items == nil && r.IntN(2) == 0 {
			items = []api.Object{}
		}
		pages = append(pages, api.ObjectList{Items: items, ResourceVersion: pick(odd), Continue: pick(odd)})
	}
	for _, p := range pages {
		want, err := json.Marshal(p)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendObjectList(nil, p)))
	}
}
