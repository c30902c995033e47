package resource

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEveryQueryExists: every q.Get("Name") in the package names a query of queries.sql, so
// a query dropped from the file fails here and not as a panic on a rarely taken path.
func TestEveryQueryExists(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	re := regexp.MustCompile(`q\.Get\("([A-Za-z]+)"\)`)
	n := 0
	for _, f := range files {
		if filepath.Base(f) == "queries_test.go" {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			_, ok := q[m[1]]
			require.True(t, ok, "%s uses query %q, which queries.sql does not define", f, m[1])
			n++
		}
	}
	for _, frag := range []string{"SelIn", "SelNotIn", "SelExists", "SelNotExists"} {
		require.Contains(t, q, frag)
	}
	require.Greater(t, n, 20)
}
