package db_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/pgtest"
)

// TestDetectCitus: on one PostgreSQL strata sees no Citus (and doctor, /v1/status and the
// start log say nothing of it); in the Citus test mode it sees the version, the coordinator
// and both workers.
func TestDetectCitus(t *testing.T) {
	t.Parallel()
	d := pgtest.NewDB(t)
	c, err := d.DetectCitus(context.Background())
	require.NoError(t, err)
	if !pgtest.Citus() {
		require.Nil(t, c)
		return
	}
	require.NotNil(t, c)
	require.Contains(t, c.Version, "Citus 13.")
	require.NotEmpty(t, c.Extension)
	require.NotEmpty(t, c.Coordinator)
	require.Len(t, c.Workers, 2)
}
