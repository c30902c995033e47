package main_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPillarExportOrgCLI: `strata pillar export DIR --org ORG` writes the tree of one org
// (with the global rows) and leaves the other orgs' rows out. The client once appended the
// query to the path, and the server answered "no route for GET /v1/pillars:export?org=acme"
// (issue 29, finding 11).
func TestPillarExportOrgCLI(t *testing.T) {
	t.Parallel()
	c := newCLIEnv(t)
	c.run("org", "create", "acme")
	c.run("org", "create", "globex")
	c.run("pillar", "set", "app", "--global", "-f", c.write("g.json", `{"port": 80}`))
	c.run("pillar", "set", "app", "--org", "acme", "-f", c.write("a.json", `{"owner": "acme-ops"}`))
	c.run("pillar", "set", "app", "--org", "globex", "-f", c.write("x.json", `{"owner": "globex-ops"}`))

	dir := filepath.Join(t.TempDir(), "acme")
	c.run("pillar", "export", dir, "--org", "acme", "-q")
	var all []byte
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		all = append(all, b...)
		return err
	}))
	require.Contains(t, string(all), "acme-ops")
	require.Contains(t, string(all), `"port": 80`, "the global rows come with one org's tree")
	require.NotContains(t, string(all), "globex-ops", "another org's rows stay out")
}
