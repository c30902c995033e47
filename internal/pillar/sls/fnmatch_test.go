package sls

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFnmatchMatchesPython compares fnmatch with Python's fnmatch.fnmatchcase on the
// patterns of testdata/fnmatch.json: the class corner cases ("[]a]", "[!]", "[a-]",
// "[z-a]", "[a-c-e]", a lone "[") and 600 random patterns over a hostile alphabet.
func TestFnmatchMatchesPython(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/fnmatch.json")
	require.NoError(t, err)
	var golden struct {
		Names []string `json:"names"`
		Cases []struct {
			Pat     string   `json:"pat"`
			Matches []string `json:"matches"`
		} `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(raw, &golden))
	require.Greater(t, len(golden.Cases), 500)
	for _, c := range golden.Cases {
		got := []string{}
		for _, n := range golden.Names {
			if fnmatch(n, c.Pat) {
				got = append(got, n)
			}
		}
		want := c.Matches
		if want == nil {
			want = []string{}
		}
		require.Equal(t, want, got, "pattern %q", c.Pat)
	}
}

func TestFnmatchExamples(t *testing.T) {
	t.Parallel()
	require.True(t, fnmatch("web1.example.com", "web*"))
	require.True(t, fnmatch("a/b", "a*b"), "'*' crosses '/' in fnmatch")
	require.False(t, fnmatch("Web1", "web*"), "case-sensitive on POSIX")
	require.True(t, fnmatch("db.main", "db.*"))
	require.False(t, fnmatch("db", "db.*"))
	require.True(t, fnmatch("[", "["), "a lone '[' is a literal")
	require.True(t, fnmatch(`a\b`, `a\b`), "backslash is a literal")
}
