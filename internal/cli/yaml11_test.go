package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestJSONToYAMLQuotesWhatYAML11Reads (issue 29): -o yaml is read back by `pillar set -f`
// as Salt reads it (YAML 1.1), so every string YAML 1.1 would read as something else is
// quoted, multi-line strings are literal blocks, and a float with an exponent gets the '.'
// and the sign YAML 1.1 needs. Seen failing before: 1:30, 010-like, yes, on, <<, = and 1e3
// printed plain.
func TestJSONToYAMLQuotesWhatYAML11Reads(t *testing.T) {
	t.Parallel()
	y, err := jsonToYAML([]byte(`{"a":"1:30","b":"yes","c":"on","<<":"=","d":"1_000","e":1e3,"f":"two\nlines\n","g":"web01 apache","h":"~","i":"","j":"0x1F","k":2.5E-7}`))
	require.NoError(t, err)
	require.Equal(t, `"<<": "="
a: "1:30"
b: "yes"
c: "on"
d: "1_000"
e: 1.0e+3
f: |
  two
  lines
g: web01 apache
h: "~"
i: ""
j: "0x1F"
k: 2.5e-7
`, string(y))
}
