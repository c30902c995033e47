package pillar_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
)

// A plain render merges the rows' text as PostgreSQL's jsonb writes it (merge.MergeJSON);
// an explained render decodes them and encodes the merged map. Both must give the same
// bytes and ETag, in both list modes, for rows that exercise what differs between jsonb's
// text and json.Marshal's: key order (jsonb sorts shorter keys first), spaces, characters Go
// escapes (<, >, &, U+2028) and ones it does not (é, emoji), escapes jsonb writes (\n, \"),
// numbers whose text matters, and objects and lists that one row or several set.
func TestPlainRenderBytesEqualDecoded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.mk(t, resource.Ref{Kind: resource.KindOrg, Name: "acme"}, api.Object{})
	b.mk(t, resource.Ref{Kind: resource.KindGroup, Org: "acme", Name: "web"}, api.Object{Spec: json.RawMessage(`{"selector": "role=web"}`)})
	b.mk(t, resource.Ref{Kind: resource.KindNode, Name: "web01"}, node("acme", map[string]string{"role": "web"}))
	put := func(tg pillar.Target, cat, data string) {
		t.Helper()
		_, _, err := b.svc.Put(ctx, tg, cat, obj(t, data), "", "t")
		require.NoError(t, err)
	}
	put(pillar.Global, "general", `{"zz": 1, "a": {"bb": [1, 2.50, 1e3], "a": "x<y>&z", "ccc": {"deep": true}},
		"only_global": {"k": "é 🙂 \u2028 <b>&amp;", "html": "<b>&amp;", "plain": "é 🙂", "n": 12345678901234567890123, "list": [{"b": 1, "a": 2}]}, "pkgs": ["vim", "git"]}`)
	put(pillar.Target{Kind: "org", Org: "acme"}, "general", `{"a": {"bb": ["replaced"], "ccc": {"more": null}}, "zz": "line\nbreak \"quoted\""}`)
	put(pillar.Target{Kind: "group", Org: "acme", Group: "web"}, "general", `{"pkgs": ["git", "nginx"], "a": {"a": {"now": "an object"}}}`)
	put(pillar.Target{Kind: "node", Node: "web01"}, "general", `{"node_only": {"x": [], "y": {}, "z": -0.0}, "a": {"ccc": "a scalar now"}}`)

	for _, mergeLists := range []bool{false, true} {
		require.NoError(t, b.svc.SetOptions(ctx, pillar.Options{MergeLists: mergeLists}, "t"))
		plain, err := b.svc.Render(ctx, b.res, "web01", false)
		require.NoError(t, err)
		explained, err := b.svc.Render(ctx, b.res, "web01", true)
		require.NoError(t, err)
		require.Equal(t, string(explained.JSON), string(plain.JSON), "mergeLists=%v", mergeLists)
		require.Equal(t, explained.ETag, plain.ETag)
		want, err := json.Marshal(explained.Pillar)
		require.NoError(t, err)
		require.Equal(t, string(want), string(plain.JSON))
		require.Nil(t, plain.Pillar, "a plain render keeps only the bytes")
		require.Equal(t, explained.Pillar, plain.Decoded())
	}
}
