package httpapi_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
)

// TestLockScopeCannotWrite: a token with only state:lock may LOCK and UNLOCK (and read, as
// docs/api.md says lock grants read) but not change the state: POST, PUT, DELETE and
// restore answer 403 even with the lock's ID, and the state stays as it was. A token with
// only state:write may lock, since write grants lock (docs/api.md). This is the test that
// a "lock implies write" change fails.
func TestLockScopeCannotWrite(t *testing.T) {
	t.Parallel()
	b := setupState(t)
	ctx := context.Background()
	sys := auth.AuditActor{Actor: "test"}
	_, locker, err := b.tokens.Create(ctx, sys, auth.CreateParams{Name: "locker", Scopes: []string{"state:lock:net"}})
	require.NoError(t, err)
	_, writer, err := b.tokens.Create(ctx, sys, auth.CreateParams{Name: "writer", Scopes: []string{"state:write:net"}})
	require.NoError(t, err)
	path := "/v1/state/net/default"
	require.Equal(t, 200, b.do(t, "POST", path, b.admin, strings.NewReader(stateV1)).status)
	s2 := strings.Replace(stateV1, `"serial":1`, `"serial":2`, 1)

	require.Equal(t, 200, b.do(t, "LOCK", path, locker, strings.NewReader(`{"ID":"LK","Who":"locker"}`)).status)
	require.Equal(t, 200, b.do(t, "GET", path, locker, nil).status, "lock grants read")
	problem(t, b.do(t, "POST", path+"?ID=LK", locker, strings.NewReader(s2)), 403, "forbidden")
	problem(t, b.do(t, "PUT", path+"?ID=LK", locker, strings.NewReader(s2)), 403, "forbidden")
	problem(t, b.do(t, "POST", path, locker, strings.NewReader(s2)), 403, "forbidden")
	problem(t, b.do(t, "DELETE", path+"?ID=LK", locker, nil), 403, "forbidden")
	problem(t, b.do(t, "POST", path+"/versions/1/restore?ID=LK", locker, nil), 403, "forbidden")
	require.Equal(t, 200, b.do(t, "UNLOCK", path, locker, strings.NewReader(`{"ID":"LK"}`)).status)
	require.Equal(t, 200, b.do(t, "POST", path+"/lock", locker, strings.NewReader(`{"ID":"LK2"}`)).status)
	require.Equal(t, 200, b.do(t, "DELETE", path+"/lock", locker, strings.NewReader(`{"ID":"LK2"}`)).status)
	require.Equal(t, stateV1, string(b.do(t, "GET", path, b.admin, nil).body), "the lock-only token changed nothing")

	require.Equal(t, 200, b.do(t, "LOCK", path, writer, strings.NewReader(`{"ID":"W","Who":"writer"}`)).status, "write grants lock")
	require.Equal(t, 200, b.do(t, "POST", path+"?ID=W", writer, strings.NewReader(s2)).status)
	require.Equal(t, 200, b.do(t, "UNLOCK", path, writer, strings.NewReader(`{"ID":"W"}`)).status)
	require.Equal(t, s2, string(b.do(t, "GET", path, b.admin, nil).body))
}
