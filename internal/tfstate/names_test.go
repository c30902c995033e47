package tfstate

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/fault"
)

func TestOpenTofuCreationKeyKnownAnswers(t *testing.T) {
	t.Parallel()
	// Values from research/state-backends.md §1.4 and the server logs of a real tofu 1.11.14.
	for _, tc := range []struct {
		schema string
		want   int64
	}{
		{"terraform_remote_state", -3797183428},
		{"proj_a", -3564375542},
		{"proj_b", -2814257023},
		{"proj_c", -1773886964},
	} {
		require.Equal(t, tc.want, OpenTofuCreationKey(tc.schema, "states"), tc.schema)
	}
	// FNV-1a would give -2449757652 for proj_a: make sure that is not what we compute.
	require.NotEqual(t, int64(-2449757652), OpenTofuCreationKey("proj_a", "states"))
}

func TestValidateProject(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"proj_a", "_x", "terraform_remote_state", "a0"} {
		require.NoError(t, ValidateProject(ok, "strata"), ok)
	}
	for _, bad := range []string{"", "Proj", "1abc", "strata", "public", "pg_catalog", "pg_x", "information_schema", "a-b", "a.b",
		"a234567890123456789012345678901234567890123456789012345678901234"} {
		err := ValidateProject(bad, "strata")
		require.Error(t, err, bad)
		require.Equal(t, fault.KindInvalid, fault.KindOf(err))
	}
}

func TestValidateWorkspace(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"default", "dev", "feature-1.2", "A_b", "-x", "user@host", "a:b+c=d~e"} {
		require.NoError(t, ValidateWorkspace(ok), ok)
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a b", "a?b", "a%b", "ü", strings.Repeat("w", 256)} {
		require.Error(t, ValidateWorkspace(bad), bad)
	}
}
