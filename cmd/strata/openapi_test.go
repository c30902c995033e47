package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/pgtest"
)

// TestOpenAPICommand: `strata openapi` needs no server and prints, byte for byte, the
// document a server of the same release serves at GET /v1/openapi.json without a token.
func TestOpenAPICommand(t *testing.T) {
	t.Parallel()
	offline := run(t, []string{"STRATA_SERVER=http://127.0.0.1:1"}, "openapi")
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	require.NoError(t, json.Unmarshal([]byte(offline), &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)
	require.Contains(t, doc.Paths, "/v1/nodes/{node}")

	s := startServer(t, nil, "--database-url", pgtest.NewDatabaseURL(t), "--data-dir", dataDir(t))
	resp, err := http.Get(s.url + "/v1/openapi.json")
	require.NoError(t, err)
	defer resp.Body.Close()
	served, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode, string(served))
	require.Equal(t, offline, string(served))
}
