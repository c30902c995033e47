package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/pgtest"
)

// TestKindCLI drives the kind commands through the real binary: register a kind from YAML,
// apply objects of it, see a breaking change refused by `kind diff` (exit status 1) and by
// `kind apply`, and a compatible one registered, with old objects read through it.
func TestKindCLI(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabaseURL(t)
	token := "strata_" + strings.Repeat("kindCLIToken0", 3)
	s := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--database-url", url, "--data-dir", dataDir(t))
	env := []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + token}
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
		return p
	}
	run := func(args ...string) string {
		t.Helper()
		out, errOut, err := cliStreams(t, env, args...)
		require.NoError(t, err, "strata %s: %s%s", strings.Join(args, " "), out, errOut)
		return out
	}

	run("org", "create", "acme")
	v1 := write("v1.yaml", `kind: Database
scope: org
schema:
  type: object
  required: [engine]
  properties:
    engine: {type: string, enum: [postgres, mysql]}
    size: {type: integer, maximum: 100}
`)
	require.Contains(t, run("kind", "apply", "-f", v1), "registered revision 1")
	require.Contains(t, run("kind", "apply", "-f", v1), "unchanged")

	objs := write("objs.yaml", `kind: Database
metadata: {name: main, org: acme, labels: {env: prod}}
spec: {engine: postgres, size: 80}
---
kind: Database
metadata: {name: spare}
spec: {engine: mysql}
`)
	out := run("apply", "-f", objs, "--org", "acme")
	require.Contains(t, out, "Database/main applied")
	require.Contains(t, out, "Database/spare applied")
	require.Contains(t, run("get", "Database", "--org", "acme", "-l", "env=prod"), "main")

	// strata watch resolves the user kind through the registry and streams its objects.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	watch := exec.CommandContext(ctx, binary, "watch", "Database", "--org", "acme", "-l", "env=prod", "-o", "json")
	watch.Env = append(os.Environ(), env...)
	stdout, err := watch.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, watch.Start())
	lines := bufio.NewScanner(stdout)
	require.True(t, lines.Scan(), "the CLI prints the current objects")
	var ev client.Event
	require.NoError(t, json.Unmarshal(lines.Bytes(), &ev))
	require.Equal(t, "ADDED main Database", ev.Type+" "+ev.Object.Metadata.Name+" "+ev.Object.Kind)
	cancel()
	_ = watch.Wait()

	// A type change: kind diff exits 1 and prints the way forward; kind apply is refused.
	bad := write("bad.yaml", strings.Replace(readFile(t, v1), "size: {type: integer, maximum: 100}", "size: {type: string}", 1))
	out, errOut, err := cliStreams(t, env, "kind", "diff", "-f", bad)
	require.Error(t, err, "kind diff of an incompatible change exits non-zero")
	require.Contains(t, out+errOut, "type-changed")
	_, errOut, err = cliStreams(t, env, "kind", "apply", "-f", bad)
	require.Error(t, err)
	require.Contains(t, errOut, "/spec/size")

	// A required field with a default: registered; main reads with it.
	v2 := write("v2.yaml", strings.Replace(readFile(t, v1), "required: [engine]", "required: [engine, tier]", 1)+"    tier: {type: string, default: standard}\n")
	require.Contains(t, run("kind", "apply", "-f", v2), "registered revision 2")
	var got client.Object
	require.NoError(t, json.Unmarshal([]byte(run("get", "Database", "main", "--org", "acme", "-o", "json")), &got))
	require.JSONEq(t, `{"engine":"postgres","size":80,"tier":"standard"}`, string(got.Spec))
	require.Equal(t, 1, got.Metadata.SchemaRevision)
	require.Contains(t, run("kind", "revisions", "Database"), "2")
	require.Contains(t, run("kind", "list"), "Database")
	require.Contains(t, run("delete", "Database", "spare", "--org", "acme"), "deleted")
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}
