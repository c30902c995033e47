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

// TestPillarRenderDirectIsTheFunction: PillarRenderDirect, which renders send when the pool
// keeps plans, is the query of the newest pillar_render_sealed with p_node as $1, so the two
// query modes render from the same rows.
func TestPillarRenderDirectIsTheFunction(t *testing.T) {
	t.Parallel()
	ms, err := migrations.Embedded()
	require.NoError(t, err)
	var fn string
	for _, m := range ms {
		if strings.Contains(m.SQL, "FUNCTION {{schema}}.pillar_render_sealed(") {
			fn = m.SQL
		}
	}
	start := strings.Index(fn, "RETURN QUERY")
	end := strings.Index(fn, "END;\n$$;")
	require.True(t, start >= 0 && end > start, "the function's body")
	body := strings.ReplaceAll(fn[start+len("RETURN QUERY"):end], "p_node", "$1")
	var direct []string
	for _, line := range strings.Split(q.Get("PillarRenderDirect").Text, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			direct = append(direct, line)
		}
	}
	require.Equal(t, strings.Join(strings.Fields(body), " "), strings.Join(strings.Fields(strings.Join(direct, "\n")), " "))
}
