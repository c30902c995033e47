//go:build citus

package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/pgtest"
)

// TestCitusServer (build tag citus, pgtest's Citus mode; every Terraform test of this package
// runs in that mode too): the real server on a Citus coordinator reports Citus in the start
// log, /v1/status and `strata doctor`; projects it creates are distributed schemas on both
// workers; real terraform writes through both backends are each recorded as a version; a
// project with states is deleted.
func TestCitusServer(t *testing.T) {
	t.Parallel()
	if !pgtest.Citus() {
		t.Fatalf("the citus build tag needs %s=1 and %s naming a Citus coordinator", pgtest.EnvCitus, pgtest.EnvDatabaseURL)
	}
	s, token, url := stateServer(t)
	ctx := context.Background()
	require.Contains(t, s.stderr.String(), "Citus detected")

	req, err := http.NewRequestWithContext(ctx, "GET", s.url+"/v1/status", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, string(body))
	var st struct {
		Citus struct {
			Version     string   `json:"version"`
			Coordinator string   `json:"coordinator"`
			Workers     []string `json:"workers"`
		} `json:"citus"`
	}
	require.NoError(t, json.Unmarshal(body, &st))
	require.Contains(t, st.Citus.Version, "Citus 13.")
	require.NotEmpty(t, st.Citus.Coordinator)
	require.Len(t, st.Citus.Workers, 2)
	out, err := cli(t, nil, "doctor", "--database-url", url)
	require.NoError(t, err, out)
	require.Contains(t, out, "Citus (Terraform projects as distributed schemas)")

	c, err := client.New(s.url, token, nil)
	require.NoError(t, err)
	for _, p := range []string{"pa", "pb", "pc", "pd"} {
		_, err = c.ProjectPut(ctx, p)
		require.NoError(t, err)
	}
	psql := func(q string) string {
		out, err := exec.Command("psql", "-qAtX", url, "-c", q).CombinedOutput()
		require.NoError(t, err, string(out))
		return strings.TrimSpace(string(out))
	}
	require.Equal(t, "pa,pb,pc,pd", psql(`SELECT string_agg(schema_name::text, ',' ORDER BY 1) FROM citus_schemas`))
	require.Equal(t, "2", psql(`SELECT count(DISTINCT nodeport) FROM citus_shards WHERE citus_table_type = 'schema'`))

	for i, p := range []string{"pa", "pb"} {
		viaHTTP := newTF(t, httpBackendConfig(s.url, p, "default", fmt.Sprint("h", i)), "TF_HTTP_PASSWORD="+token)
		viaHTTP.ok("init", "-no-color")
		viaHTTP.ok("apply", "-auto-approve", "-no-color")
		viaPG := newTF(t, pgBackendConfig(url, p, fmt.Sprint("g", i)))
		viaPG.ok("init", "-no-color")
		viaPG.ok("apply", "-auto-approve", "-no-color")
		vs, err := c.StateVersions(ctx, p, "default")
		require.NoError(t, err)
		require.Len(t, vs, 2, "one version per apply, from either backend")
		require.Equal(t, "pg", vs[0].Source)
		require.Equal(t, "http", vs[1].Source)
	}
	require.NoError(t, c.ProjectDelete(ctx, "pa", true))
	require.Equal(t, "pb,pc,pd", psql(`SELECT string_agg(schema_name::text, ',' ORDER BY 1) FROM citus_schemas`))
}
