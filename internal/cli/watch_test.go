package cli

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
)

// TestResourcesFor: the kinds watch knows, in any case, singular or plural, with --org only
// where the kind lives in an org or has an org reference (node); other names are user kinds.
func TestResourcesFor(t *testing.T) {
	t.Parallel()
	c, err := client.New("http://127.0.0.1:1", "t", nil)
	require.NoError(t, err)
	for _, tc := range []struct{ kind, org, err string }{
		{"org", "", ""}, {"Orgs", "", ""}, {"NODE", "", ""}, {"nodes", "", ""},
		{"group", "acme", ""}, {"Groups", "acme", ""},
		{"group", "", "give --org"}, {"node", "acme", ""}, {"org", "acme", "drop --org"},
		{"Widget", "", ""}, {"Widget", "acme", ""}, // other names are user kinds (global, or in --org)
	} {
		r, _, err := resourcesFor(context.Background(), c, tc.kind, tc.org)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.kind)
			continue
		}
		require.NoError(t, err, tc.kind)
		require.NotNil(t, r)
	}
}
