package pillar_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
)

// TestSaltCredentials: the role `strata salt credentials` makes can log in and execute
// node_pillars, and read nothing else; asking again gives it a new password; the master
// configuration names the function with as_json.
func TestSaltCredentials(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.mk(t, resource.Ref{Kind: resource.KindOrg, Name: "acme"}, api.Object{})
	b.mk(t, resource.Ref{Kind: resource.KindNode, Name: "web01"}, node("acme", nil))
	_, _, err := b.svc.Put(ctx, pillar.Global, "app", obj(t, `{"port": 80}`), "", "t")
	require.NoError(t, err)

	c, err := b.svc.SaltCredentials(ctx, "", true, "tester", "127.0.0.1")
	require.NoError(t, err)
	require.Equal(t, pillar.SaltRole, c.Role)
	require.Contains(t, c.MasterConfig, `SELECT pillar FROM strata.node_pillars(%s)`)
	require.Contains(t, c.MasterConfig, "as_json: True")
	require.Contains(t, c.MasterConfig, "as_list: True", "list merging is on")
	require.NotEmpty(t, c.Port)

	salt, err := db.Open(ctx, db.Options{URL: c.ConnString})
	require.NoError(t, err)
	defer salt.Close()
	var rows int
	require.NoError(t, salt.QueryRow(ctx, &db.Query{Name: "np", Text: `SELECT count(*) FROM strata.node_pillars($1)`}, "web01").Scan(&rows))
	require.Equal(t, 1, rows)
	_, err = salt.Exec(ctx, &db.Query{Name: "peek", Text: `SELECT * FROM strata.pillars`})
	require.ErrorIs(t, err, db.ErrPermission, "the Salt role reads nothing but node_pillars")

	again, err := b.svc.SaltCredentials(ctx, "", false, "tester", "127.0.0.1")
	require.NoError(t, err)
	require.NotEqual(t, c.Password, again.Password)
	require.NotContains(t, again.MasterConfig, "as_list")
}
