//go:build !sabotage

package sabotage

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNormalBuildsCannotBeSabotaged: without the build tag no environment switches a
// sabotage on, so a production binary can never be broken by a stray STRATA_SABOTAGE.
func TestNormalBuildsCannotBeSabotaged(t *testing.T) {
	t.Setenv("STRATA_SABOTAGE", "precondition")
	for _, name := range []string{"precondition", "dropwatch", "earlyunlock", "memberstatus", "filterwatch", "cachedrop", "stalebase"} {
		require.False(t, Active(name))
	}
	// And the package's tagged file is what a sabotage build compiles in its place.
	out, err := exec.Command("go", "list", "-tags", "sabotage", "-f", "{{.GoFiles}}", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "sabotage_on.go")
	require.NotContains(t, string(out), "sabotage.go ")
}
