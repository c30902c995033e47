package db_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
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

// TestRemoteNodeDown: Citus's error for a worker that does not answer is recognised, with the
// node, so strata names the unavailable project; other errors, including a coordinator's own
// connection failure, are not.
func TestRemoteNodeDown(t *testing.T) {
	t.Parallel()
	node, ok := db.RemoteNodeDown(fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "08006",
		Message: "connection to the remote node postgres@127.0.0.1:58632 failed with the following error: Connection refused"}))
	require.True(t, ok)
	require.Equal(t, "127.0.0.1:58632", node)
	_, ok = db.RemoteNodeDown(&pgconn.PgError{Code: "08006", Message: "terminating connection due to administrator command"})
	require.False(t, ok)
	_, ok = db.RemoteNodeDown(&pgconn.PgError{Code: "XX000", Message: "connection to the remote node x:1 failed"})
	require.False(t, ok)
	_, ok = db.RemoteNodeDown(errors.New("connection to the remote node x:1 failed"))
	require.False(t, ok)
}
