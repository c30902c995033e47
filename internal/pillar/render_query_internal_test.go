package pillar

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/resource"
)

// TestPillarRenderNamesItsConstants: PillarRender writes the kinds and the mergeLists
// setting's key out (so its generic plan is kept, docs/benchmarks.md); they must be the
// ones the Go code names, or every render would find no node.
func TestPillarRenderNamesItsConstants(t *testing.T) {
	t.Parallel()
	text := q.Get("PillarRender").Text
	for _, want := range []string{"kind = '" + resource.KindNode + "'", "r.kind = '" + resource.KindOrg + "'", "r.kind = '" + resource.KindGroup + "'", "key = '" + SettingMergeLists + "'"} {
		require.True(t, strings.Contains(text, want), "PillarRender names %s", want)
	}
	require.NotContains(t, text, "$2", "the node's name is the only parameter")
}
