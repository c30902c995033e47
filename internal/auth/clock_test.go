package auth_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/pgtest"
)

// testClock is a clock the test sets by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func requireUnauthenticated(t *testing.T, err error, msg string) {
	t.Helper()
	require.Equal(t, fault.KindUnauthenticated, fault.KindOf(err), "%s: %v", msg, err)
}

// TestTokenExpiryExact: with an injected clock, a token is valid one nanosecond before its
// expiry and refused at it and one nanosecond after, although its verification is cached:
// the cache keeps an entry no longer than the token lives. The expiry is given with
// nanoseconds; the record returned says what the database keeps (microseconds), and that is
// the instant that counts.
func TestTokenExpiryExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := &testClock{t: time.Now()}
	svc := auth.NewService(pgtest.NewDB(t), auth.WithClock(clock.Now))
	actor := auth.AuditActor{Actor: "test"}

	asked := clock.Now().Add(time.Hour).Truncate(time.Second).Add(123456789 * time.Nanosecond)
	tok, secret, err := svc.Create(ctx, actor, auth.CreateParams{Name: "short", Scopes: []string{"admin"}, ExpiresAt: &asked})
	require.NoError(t, err)
	exp := *tok.ExpiresAt
	require.Equal(t, asked.Truncate(time.Microsecond), exp)
	stored, _, err := svc.List(ctx, auth.TokenListOptions{Filter: auth.Filter{All: true}})
	require.NoError(t, err)
	require.Len(t, stored, 1)
	require.True(t, exp.Equal(*stored[0].ExpiresAt), "returned %v, stored %v", exp, *stored[0].ExpiresAt)

	clock.Set(exp.Add(-time.Nanosecond))
	p, err := svc.Verify(ctx, secret)
	require.NoError(t, err, "valid one nanosecond before expiry")
	require.Equal(t, tok.ID, p.TokenID)
	_, err = svc.Verify(ctx, secret)
	require.NoError(t, err, "valid one nanosecond before expiry, from the cache")

	clock.Set(exp)
	_, err = svc.Verify(ctx, secret)
	requireUnauthenticated(t, err, "expired at its expiry although its verification was cached")
	clock.Set(exp.Add(time.Nanosecond))
	_, err = svc.Verify(ctx, secret)
	requireUnauthenticated(t, err, "expired one nanosecond after expiry")

	// Creation judges "in the future" by the same clock.
	_, _, err = svc.Create(ctx, actor, auth.CreateParams{Name: "late", Scopes: []string{"admin"}, ExpiresAt: &exp})
	require.Equal(t, fault.KindInvalid, fault.KindOf(err), "an expiry the clock has passed is refused")
}

// TestTokenCacheTTL: a verification is trusted for exactly CacheTTL: a token revoked on
// another replica (another Service on the same database) still works here until then, and
// not one nanosecond longer.
func TestTokenCacheTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := pgtest.NewDB(t)
	clock := &testClock{t: time.Now()}
	svc := auth.NewService(d, auth.WithClock(clock.Now))
	other := auth.NewService(d)
	actor := auth.AuditActor{Actor: "test"}

	tok, secret, err := svc.Create(ctx, actor, auth.CreateParams{Name: "ci", Scopes: []string{"orgs:read:*"}})
	require.NoError(t, err)
	t0 := clock.Now()
	_, err = svc.Verify(ctx, secret)
	require.NoError(t, err)
	require.NoError(t, other.Revoke(ctx, actor, tok.ID))
	_, err = other.Verify(ctx, secret)
	requireUnauthenticated(t, err, "the revoking replica refuses at once")

	clock.Set(t0.Add(auth.CacheTTL - time.Nanosecond))
	_, err = svc.Verify(ctx, secret)
	require.NoError(t, err, "another replica trusts its cached verification until CacheTTL")
	clock.Set(t0.Add(auth.CacheTTL))
	_, err = svc.Verify(ctx, secret)
	requireUnauthenticated(t, err, "after CacheTTL the revocation reaches every replica")
}
