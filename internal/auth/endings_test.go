package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/pgtest"
)

// TestEndedHere (issue 27, 8i): a revocation is known to its replica's streams without the
// database (EndedHere) and wakes them (Endings); another replica learns it from the database
// (StillValid). A revocation that fails leaves no mark behind.
func TestEndedHere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := pgtest.NewDB(t)
	here, other := auth.NewService(d), auth.NewService(d)
	actor := auth.AuditActor{Actor: "test"}
	tok, secret, err := here.Create(ctx, actor, auth.CreateParams{Name: "w", Scopes: []string{"orgs:read:*"}})
	require.NoError(t, err)
	p, err := here.Verify(ctx, secret)
	require.NoError(t, err)

	require.Equal(t, fault.KindNotFound, fault.KindOf(here.Revoke(ctx, actor, "tok_nosuchtoken")))
	require.False(t, here.EndedHere(&auth.Principal{TokenID: "tok_nosuchtoken"}, nil), "a failed revocation leaves no mark")

	wake := here.Endings()
	require.False(t, here.EndedHere(p, nil))
	require.NoError(t, here.Revoke(ctx, actor, tok.ID))
	select {
	case <-wake:
	case <-time.After(time.Second):
		t.Fatal("a revocation wakes waiting streams")
	}
	require.True(t, here.EndedHere(p, nil))
	require.False(t, other.EndedHere(p, nil), "another replica does not know without asking")
	require.ErrorIs(t, other.StillValid(ctx, p), auth.ErrTokenEnded)
}
