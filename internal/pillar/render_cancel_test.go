package pillar_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
)

// errOnlyContext reports Canceled from Err but never closes Done: the database driver, which
// watches Done, runs its queries, while the merge, which looks at Err every 1,024 steps,
// sees a cancelled request. It tells a render that hands its context to the merge from one
// that does not.
type errOnlyContext struct{ context.Context }

func (errOnlyContext) Err() error { return context.Canceled }

func (errOnlyContext) Done() <-chan struct{} { return nil }

// TestRenderStopsWithItsRequest (issue 27, finding 6): a render's merge stops when its
// request's context is done — the Salt route's timeout or a client gone — instead of running
// on; a small pillar (fewer steps than the merge's look interval) still renders.
func TestRenderStopsWithItsRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.mk(t, resource.Ref{Kind: resource.KindOrg, Name: "acme"}, api.Object{})
	b.mk(t, resource.Ref{Kind: resource.KindNode, Name: "web01"}, node("acme", nil))
	require.NoError(t, b.svc.SetOptions(ctx, pillar.Options{MergeLists: true}, "t"))
	_, _, err := b.svc.Put(ctx, pillar.Global, "small", obj(t, `{"l": [1, 2]}`), "", "t")
	require.NoError(t, err)

	r, err := b.svc.Render(errOnlyContext{ctx}, b.res, "web01", false)
	require.NoError(t, err, "the queries ignore Err, and a small merge never looks")
	require.JSONEq(t, `{"l": [1, 2]}`, string(r.JSON))

	items := func(from int) string {
		parts := make([]string, 5000)
		for i := range parts {
			parts[i] = fmt.Sprintf(`"item-%d"`, from+i)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	_, _, err = b.svc.Put(ctx, pillar.Global, "small", obj(t, `{"l": `+items(0)+`}`), "", "t")
	require.NoError(t, err)
	_, _, err = b.svc.Put(ctx, pillar.Target{Kind: "node", Node: "web01"}, "big", obj(t, `{"l": `+items(2500)+`}`), "", "t")
	require.NoError(t, err)
	for _, explain := range []bool{false, true} {
		_, err = b.svc.Render(errOnlyContext{ctx}, b.res, "web01", explain)
		require.ErrorIs(t, err, context.Canceled, "explain=%v", explain)
	}
	r, err = b.svc.Render(ctx, b.res, "web01", false)
	require.NoError(t, err)
	var out struct{ L []string }
	require.NoError(t, json.Unmarshal(r.JSON, &out))
	require.Len(t, out.L, 7500)
}
