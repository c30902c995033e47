package tfstate

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSmoke(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	b.project(t, "proj_a")
	_, err := b.svc.Lock(ctx, b.actor, "proj_a", "default", lockBody("L1"))
	require.NoError(t, err)
	res, err := b.svc.StateWrite(ctx, b.actor, "proj_a", "default", WriteRequest{LockID: "L1", Body: stateJSON(1, "lin", 1)})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.Version)
	require.NoError(t, b.svc.Unlock(ctx, b.actor, "proj_a", "default", UnlockRequest{ID: "L1"}))
	st, err := b.svc.StateGet(ctx, "proj_a", "default")
	require.NoError(t, err)
	require.Equal(t, string(stateJSON(1, "lin", 1)), string(st.Data))
}
