package pillar

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db/migrations"
	"github.com/stratahq/strata/internal/resource"
)

// TestPillarRenderNamesItsConstants: pillar_render_sealed (PillarRender calls it; migration
// 0025 created it as pillar_render of 0018 with sealed values, and 0035 redefined it to start
// from the candidate groups; the newest definition is the one that runs) writes the kinds and the mergeLists setting's key out (so its cached plan knows
// them, docs/benchmarks.md); they must be the ones the Go code names, or every render would
// find no node.
func TestPillarRenderNamesItsConstants(t *testing.T) {
	t.Parallel()
	require.Contains(t, q.Get("PillarRender").Text, "pillar_render_sealed($1)")
	ms, err := migrations.Embedded()
	require.NoError(t, err)
	var text string
	for _, m := range ms {
		if strings.Contains(m.SQL, "CREATE FUNCTION {{schema}}.pillar_render_sealed(") ||
			strings.Contains(m.SQL, "CREATE OR REPLACE FUNCTION {{schema}}.pillar_render_sealed(") {
			text = m.SQL
		}
	}
	require.NotEmpty(t, text, "the migration that creates pillar_render_sealed")
	for _, want := range []string{"kind = '" + resource.KindNode + "'", "r.kind = '" + resource.KindOrg + "'", "r.kind = '" + resource.KindGroup + "'", "group_selectors s JOIN n ON s.org = n.org", "key = '" + SettingMergeLists + "'"} {
		require.True(t, strings.Contains(text, want), "PillarRender names %s", want)
	}
}

// TestPillarRenderDirectIsTheFunction: renderDirect, which renders send when the pool keeps
// plans, is the query of the newest pillar_render_sealed with p_node as $1 (the mode's other
// half, TestNodePillarsEqualsRender, compares the renders of both modes).
func TestPillarRenderDirectIsTheFunction(t *testing.T) {
	t.Parallel()
	text, err := renderDirectText()
	require.NoError(t, err)
	require.Equal(t, text, renderDirect.Text)
	require.Contains(t, text, "name = $1", "the node's name is the parameter")
	require.NotContains(t, text, "p_node")
	require.Contains(t, text, "group_selectors s JOIN n ON s.org = n.org", "the newest definition (0035)")
	require.True(t, strings.HasPrefix(text, "WITH n AS ("), text)
}
