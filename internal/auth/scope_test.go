package auth_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
)

func principal(t *testing.T, scopes ...string) *auth.Principal {
	t.Helper()
	var out auth.Principal
	for _, s := range scopes {
		sc, err := auth.ParseScope(s)
		require.NoError(t, err, s)
		out.Scopes = append(out.Scopes, sc)
	}
	return &out
}

// TestReadOutputsVerb: state:read-outputs parses for the state family (and "*") only, grants
// reading outputs and nothing else, and every verb that grants reading a state grants it.
func TestReadOutputsVerb(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"state:read-outputs:net", "state:read-outputs:*", "state:read-outputs:net*", "*:read-outputs:*"} {
		s, err := auth.ParseScope(ok)
		require.NoError(t, err, ok)
		require.Equal(t, ok, s.String())
	}
	for _, bad := range []string{"orgs:read-outputs:acme", "projects:read-outputs:net", "state:read-output:net", "state:outputs:net"} {
		_, err := auth.ParseScope(bad)
		require.Error(t, err, bad)
	}
	_, err := auth.ParseScope("orgs:read-outputs:acme")
	require.ErrorContains(t, err, "state:read-outputs:<project>")

	outputs := principal(t, "state:read-outputs:net")
	require.True(t, outputs.Allows("state", "read-outputs", "net"))
	require.False(t, outputs.Allows("state", "read-outputs", "other"))
	for _, verb := range []string{"read", "write", "lock", "delete", "force-unlock", "credentials"} {
		require.False(t, outputs.Allows("state", verb, "net"), "read-outputs must not grant %s", verb)
	}
	require.False(t, outputs.Allows("projects", "read", "net"))
	for _, s := range []string{"state:read:net", "state:write:net", "state:lock:net", "state:delete:net", "state:*:net", "*:*:*", "admin"} {
		require.True(t, principal(t, s).Allows("state", "read-outputs", "net"), "%s grants read-outputs", s)
	}
	require.False(t, principal(t, "state:force-unlock:net").Allows("state", "read-outputs", "net"))
}

// TestLockVerbImpliesReadOnly: the lock verb grants locking and reading (docs/api.md:
// "delete, lock and render grant read") and never write or delete, so a token that may only
// lock cannot change a state; write grants lock, as documented.
func TestLockVerbImpliesReadOnly(t *testing.T) {
	t.Parallel()
	lock := principal(t, "state:lock:net")
	require.True(t, lock.Allows("state", "lock", "net"))
	require.True(t, lock.Allows("state", "read", "net"))
	for _, verb := range []string{"write", "delete", "force-unlock"} {
		require.False(t, lock.Allows("state", verb, "net"), "lock must not grant %s", verb)
	}
	write := principal(t, "state:write:net")
	for _, verb := range []string{"write", "read", "lock", "delete"} {
		require.True(t, write.Allows("state", verb, "net"), "write grants %s", verb)
	}
	require.False(t, principal(t, "state:read:net").Allows("state", "lock", "net"), "read does not grant lock")
	require.False(t, principal(t, "state:delete:net").Allows("state", "write", "net"), "delete does not grant write")
}
