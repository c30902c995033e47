package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestJSONToYAMLKeepsNumbers(t *testing.T) {
	t.Parallel()
	y, err := jsonToYAML([]byte(`{"b":12345678901234567890123,"a":{"f":1.50,"s":"123","t":true,"n":null,"l":[1,"x"]}}`))
	require.NoError(t, err)
	require.Equal(t, `a:
  f: 1.50
  l:
    - 1
    - x
  "n": null
  s: "123"
  t: true
b: 12345678901234567890123
`, string(y))
}

func TestBackendBlockEscapesNames(t *testing.T) {
	t.Parallel()
	b := backendBlock("http://127.0.0.1:7400/", "net", "user@host")
	require.Contains(t, b, `address        = "http://127.0.0.1:7400/v1/state/net/user@host"`)
	require.Contains(t, b, `schema_name = "net"`)
}
