package auth_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestParseScope(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"admin", "orgs:read:acme", "pillars:render:*", "projects:write:net", "state:force-unlock:net", "kinds:register:*", "*:read:*", "orgs:*:ac*"} {
		s, err := auth.ParseScope(ok)
		require.NoError(t, err, ok)
		require.Equal(t, ok, s.String())
	}
	for _, bad := range []string{"", "orgs", "orgs:read", "orgs:read:a:b", "planets:read:*", "orgs:fly:*", "orgs:read:", "orgs:read:a b", "orgs:read:*x*"} {
		_, err := auth.ParseScope(bad)
		require.Error(t, err, bad)
	}
}

func TestAllows(t *testing.T) {
	t.Parallel()
	p := func(scopes ...string) *auth.Principal {
		var out auth.Principal
		for _, s := range scopes {
			sc, err := auth.ParseScope(s)
			require.NoError(t, err)
			out.Scopes = append(out.Scopes, sc)
		}
		return &out
	}
	cases := []struct {
		scopes             []string
		family, verb, name string
		want               bool
	}{
		{[]string{"admin"}, "state", "force-unlock", "net", true},
		{[]string{"orgs:read:acme"}, "orgs", "read", "acme", true},
		{[]string{"orgs:read:acme"}, "orgs", "read", "other", false},
		{[]string{"orgs:read:acme"}, "orgs", "write", "acme", false},
		{[]string{"orgs:write:acme"}, "orgs", "read", "acme", true},
		{[]string{"orgs:write:acme"}, "orgs", "delete", "acme", true},
		{[]string{"state:write:net"}, "state", "lock", "net", true},
		{[]string{"state:write:net"}, "state", "force-unlock", "net", false},
		{[]string{"state:*:net"}, "state", "force-unlock", "net", true},
		{[]string{"state:force-unlock:net"}, "state", "force-unlock", "net", true},
		{[]string{"projects:write:net*"}, "projects", "write", "network", true},
		{[]string{"projects:write:net*"}, "projects", "write", "dns", false},
		{[]string{"*:read:*"}, "pillars", "read", "x", true},
		{[]string{"*:read:*"}, "pillars", "write", "x", false},
		{[]string{"pillars:render:*"}, "pillars", "read", "x", true},
		{[]string{"projects:read:*"}, "projects", "credentials", "x", false},
		{nil, "orgs", "read", "acme", false},
	}
	for _, c := range cases {
		require.Equal(t, c.want, p(c.scopes...).Allows(c.family, c.verb, c.name), "%v %s:%s:%s", c.scopes, c.family, c.verb, c.name)
	}
	require.False(t, (*auth.Principal)(nil).Allows("orgs", "read", "x"))
}

func TestTokenLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := auth.NewService(pgtest.NewDB(t))
	actor := auth.AuditActor{Actor: "test", RemoteAddr: "127.0.0.1"}

	tok, secret, err := svc.Create(ctx, actor, auth.CreateParams{Name: "ci", Scopes: []string{"orgs:read:*"}})
	require.NoError(t, err)
	require.Len(t, secret, len(auth.TokenPrefix)+43, "256 bits, base64url")
	p, err := svc.Verify(ctx, secret)
	require.NoError(t, err)
	require.Equal(t, tok.ID, p.TokenID)
	require.True(t, p.Allows("orgs", "read", "x"))

	_, err = svc.Verify(ctx, secret+"x")
	require.Equal(t, fault.KindUnauthenticated, fault.KindOf(err))
	_, err = svc.Verify(ctx, "not-a-token")
	require.Equal(t, fault.KindUnauthenticated, fault.KindOf(err))

	require.NoError(t, svc.Revoke(ctx, actor, tok.ID))
	_, err = svc.Verify(ctx, secret)
	require.Equal(t, fault.KindUnauthenticated, fault.KindOf(err), "revocation drops the cached verification at once")
	require.NoError(t, svc.Revoke(ctx, actor, tok.ID), "revoking twice is fine")
	require.Equal(t, fault.KindNotFound, fault.KindOf(svc.Revoke(ctx, actor, "tok_nope")))

	// A token with an expiry; TestTokenExpiryExact (clock_test.go) checks the expiry itself
	// with an injected clock, without waiting.
	soon := time.Now().Add(time.Hour)
	_, short, err := svc.Create(ctx, actor, auth.CreateParams{Name: "short", Scopes: []string{"admin"}, ExpiresAt: &soon})
	require.NoError(t, err)
	_, err = svc.Verify(ctx, short)
	require.NoError(t, err)

	past := time.Now().Add(-time.Hour)
	_, _, err = svc.Create(ctx, actor, auth.CreateParams{Name: "old", Scopes: []string{"admin"}, ExpiresAt: &past})
	require.Equal(t, fault.KindInvalid, fault.KindOf(err))
	_, _, err = svc.Create(ctx, actor, auth.CreateParams{Name: "bad name!", Scopes: []string{"admin"}})
	require.Equal(t, fault.KindInvalid, fault.KindOf(err))
	_, _, err = svc.Create(ctx, actor, auth.CreateParams{Name: "none"})
	require.Equal(t, fault.KindInvalid, fault.KindOf(err))

	toks, _, err := svc.List(ctx, auth.TokenListOptions{Filter: auth.Filter{All: true}})
	require.NoError(t, err)
	require.Len(t, toks, 2)
	recs, err := svc.ListAudit(ctx, 0, "token.", 10)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	require.Equal(t, "token.create", recs[0].Action)
	require.Equal(t, "127.0.0.1", recs[0].RemoteAddr)
}

// TestBootstrapOnce: replicas starting together create exactly one admin token.
func TestBootstrapOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := pgtest.NewDB(t)
	const n = 8
	secrets := make(chan string, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := auth.NewService(d).Bootstrap(ctx, "")
			require.NoError(t, err)
			secrets <- s
		}()
	}
	wg.Wait()
	close(secrets)
	var created []string
	for s := range secrets {
		if s != "" {
			created = append(created, s)
		}
	}
	require.Len(t, created, 1)
	p, err := auth.NewService(d).Verify(ctx, created[0])
	require.NoError(t, err)
	require.True(t, p.IsAdmin())
}

func TestBootstrapWithGivenToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := auth.NewService(pgtest.NewDB(t))
	given := auth.NewSecret()
	got, err := svc.Bootstrap(ctx, given)
	require.NoError(t, err)
	require.Equal(t, given, got)
	again, err := svc.Bootstrap(ctx, given)
	require.NoError(t, err)
	require.Empty(t, again)
	_, err = svc.Verify(ctx, given)
	require.NoError(t, err)
}

// TestTokenNamesUniqueAmongLive (issue 16): `token create ci` twice gave two tokens named ci.
// A name is unique among live tokens: a second is a 409 naming the first; a revoked or an
// expired token frees its name. Twenty concurrent creations of one name end with exactly one
// token; the control runs the same creations under twenty names and gets twenty, so the
// refusals come from the rule, not from the race.
func TestTokenNamesUniqueAmongLive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := pgtest.NewDB(t)
	svc := auth.NewService(d)
	actor := auth.AuditActor{Actor: "test"}
	first, _, err := svc.Create(ctx, actor, auth.CreateParams{Name: "ci", Scopes: []string{"orgs:read:*"}})
	require.NoError(t, err)
	_, _, err = svc.Create(ctx, actor, auth.CreateParams{Name: "ci", Scopes: []string{"orgs:read:*"}})
	var fe *fault.Error
	require.ErrorAs(t, err, &fe)
	require.Equal(t, fault.KindConflict, fe.Kind)
	require.Contains(t, fe.Detail, `a live token named "ci" exists already (`+first.ID+`)`)
	require.Equal(t, "/name", fe.Fields[0].Field)

	require.NoError(t, svc.Revoke(ctx, actor, first.ID))
	_, _, err = svc.Create(ctx, actor, auth.CreateParams{Name: "ci", Scopes: []string{"orgs:read:*"}})
	require.NoError(t, err, "a revoked token frees its name")

	soon := time.Now().Add(300 * time.Millisecond)
	_, _, err = svc.Create(ctx, actor, auth.CreateParams{Name: "short", Scopes: []string{"orgs:read:*"}, ExpiresAt: &soon})
	require.NoError(t, err)
	time.Sleep(400 * time.Millisecond)
	_, _, err = svc.Create(ctx, actor, auth.CreateParams{Name: "short", Scopes: []string{"orgs:read:*"}})
	require.NoError(t, err, "an expired token frees its name")

	race := func(name func(i int) string) (ok, conflicts int) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		start := make(chan struct{})
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, _, err := svc.Create(ctx, actor, auth.CreateParams{Name: name(i), Scopes: []string{"orgs:read:*"}})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case fault.KindOf(err) == fault.KindConflict:
					conflicts++
				default:
					t.Errorf("create: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		return ok, conflicts
	}
	// Widen the window between the name check and the commit, as a slow disk would: each
	// insert of a token waits 50 ms in a trigger.
	for _, stmt := range []string{
		`CREATE FUNCTION strata.slow_token() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.05); RETURN NEW; END $$`,
		`CREATE TRIGGER slow_token BEFORE INSERT ON strata.tokens FOR EACH ROW EXECUTE FUNCTION strata.slow_token()`,
	} {
		_, err = d.Exec(ctx, &db.Query{Name: "test", Text: stmt})
		require.NoError(t, err)
	}
	ok, conflicts := race(func(int) string { return "raced" })
	require.Equal(t, 1, ok)
	require.Equal(t, 19, conflicts)
	ok, conflicts = race(func(i int) string { return fmt.Sprintf("control-%d", i) })
	require.Equal(t, 20, ok)
	require.Zero(t, conflicts)
}
