package pillar_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/pillar/sls"
	"github.com/stratahq/strata/internal/resource"
)

// TestImportTree: a small Salt tree imports in one transaction — global rows, a node's rows
// (the node created in the org), a list target as a group with static members — typed as
// Salt's YAML loader types it (yes/off are booleans; 0100 is 100, because Salt strips the
// leading zeros PyYAML would read as octal); a second import changes nothing; a dry run
// changes nothing; an unsupported construct blocks the whole import unless skipped.
func TestImportTree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.mk(t, resource.Ref{Kind: resource.KindOrg, Name: "acme"}, api.Object{})
	plan, err := sls.Read("testdata/importtree", sls.Options{})
	require.NoError(t, err)
	require.Empty(t, plan.Unsupported)

	dry, err := b.svc.Import(ctx, b.res, plan, pillar.ImportOptions{Org: "acme", DryRun: true}, "importer")
	require.NoError(t, err)
	require.False(t, dry.Applied)
	require.NotEmpty(t, dry.Rows)
	_, err = b.res.Get(ctx, resource.Ref{Kind: resource.KindNode, Name: "web01"})
	require.Equal(t, fault.KindNotFound, fault.KindOf(err), "a dry run changes nothing")

	rep, err := b.svc.Import(ctx, b.res, plan, pillar.ImportOptions{Org: "acme"}, "importer")
	require.NoError(t, err)
	require.True(t, rep.Applied)
	require.ElementsMatch(t, []string{"web01", "web02"}, rep.CreatedNodes)
	for _, r := range rep.Rows {
		require.Equal(t, "created", r.Action, r)
	}
	r, err := b.svc.Render(ctx, b.res, "web01", false)
	require.NoError(t, err)
	out, _ := json.Marshal(r.Decoded())
	require.JSONEq(t, `{"ntp":{"servers":["a.pool","b.pool"]},"debug":false,"users":{"alice":{"uid":1000}},"apache":{"port":100,"enabled":true}}`, string(out))
	r, err = b.svc.Render(ctx, b.res, "web02", false)
	require.NoError(t, err)
	require.NotContains(t, r.Decoded(), "users")
	require.Contains(t, r.Decoded(), "apache", "web02 is a static member of the list target's group")

	again, err := b.svc.Import(ctx, b.res, plan, pillar.ImportOptions{Org: "acme"}, "importer")
	require.NoError(t, err)
	require.Empty(t, again.CreatedNodes)
	for _, r := range again.Rows {
		require.Equal(t, "unchanged", r.Action, r)
	}

	// A templated file: listed, nothing imported, unless skipped.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "top.sls"), []byte("base:\n  '*':\n    - tpl\n    - plain\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tpl.sls"), []byte("a: 1\nb: {{ grains['id'] }}\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "plain.sls"), []byte("plain: true\n"), 0o600))
	plan, err = sls.Read(dir, sls.Options{})
	require.NoError(t, err)
	require.NotEmpty(t, plan.Unsupported)
	_, err = b.svc.Import(ctx, b.res, plan, pillar.ImportOptions{Org: "acme"}, "importer")
	require.Equal(t, fault.KindUnprocessable, fault.KindOf(err))
	var fe *fault.Error
	require.ErrorAs(t, err, &fe)
	require.Contains(t, fe.Fields[0].Field, "tpl.sls:2")
	_, err = b.svc.Get(ctx, pillar.Global, "plain")
	require.Equal(t, fault.KindNotFound, fault.KindOf(err), "nothing was imported")
	rep, err = b.svc.Import(ctx, b.res, plan, pillar.ImportOptions{Org: "acme", SkipUnsupported: true}, "importer")
	require.NoError(t, err)
	require.True(t, rep.Applied)
	_, err = b.svc.Get(ctx, pillar.Global, "plain")
	require.NoError(t, err)
}
