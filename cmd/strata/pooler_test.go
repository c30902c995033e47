package main_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/pgtest"
)

// TestPoolerQueryModes: behind PgBouncer in transaction mode a client cannot keep named
// prepared statements, so pgx must run in its exec or simple_protocol mode, where a
// parameter's type comes from its Go type. In those modes every write failed ("invalid input
// syntax for type json": JSON documents went as bytea), while the docs said strata runs
// behind such a pooler. Here the README's tour (objects, labels, a bulk apply, groups and
// members, pillars and a render, a kind and its objects, a watch, a token, the audit) and a
// Terraform state round (LOCK, POST, GET, UNLOCK) run against a server whose pool is in each
// mode, without a session (as a transaction-mode pooler gives none).
func TestPoolerQueryModes(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	var tour *docBlock
	for _, b := range readBlocks(t, root, "README.md") {
		if strings.Contains(b.text, "./strata node apply -f examples/inventory.ndjson") {
			tour = &b
			break
		}
	}
	require.NotNil(t, tour, "the README's tour block")
	for _, mode := range []string{"exec", "simple_protocol", "pgbouncer"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			direct := pgtest.NewDatabaseURL(t)
			args := []string{"--session-database-url", "off"}
			url := withURLParam(direct, "default_query_exec_mode", mode)
			if mode == "pgbouncer" {
				// Debian's PgBouncer 1.18 in transaction mode in front of the pool (no named
				// prepared statements there: exec mode), and the session features direct.
				url = withURLParam(startPgBouncer(t, direct), "default_query_exec_mode", "exec")
				args = []string{"--session-database-url", direct}
				mode = "exec through PgBouncer"
			}
			data := dataDir(t)
			s := startServer(t, nil, append([]string{"--database-url", url, "--data-dir", data}, args...)...)
			addr := strings.TrimPrefix(s.url, "http://")

			work := t.TempDir()
			require.NoError(t, os.CopyFS(filepath.Join(work, "examples"), os.DirFS(filepath.Join(root, "examples"))))
			text := strings.NewReplacer(
				"go build -o strata ./cmd/strata", `cp "$STRATA_BIN" ./strata`,
				"/tmp/strata-data", data,
				"127.0.0.1:7400", addr,
			).Replace(tour.text)
			text = watchLine.ReplaceAllString(text, `${1}{ timeout 3 ${2} || [ $? -eq 124 ]; }${3}`)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-c", "set -eo pipefail\nset -x\n"+text)
			cmd.Dir = work
			cmd.Env = append(slicesDeleteEnv(os.Environ(), "STRATA_TOKEN"), "STRATA_BIN="+binary, "STRATA_SERVER="+s.url)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			require.NoError(t, cmd.Run(), "the tour in query mode %s; the first command that failed is the last one shown:\n%s\nserver:\n%s",
				mode, tail(out.String(), 40), tail(s.stderr.String(), 20))

			token, err := os.ReadFile(filepath.Join(data, "admin-token"))
			require.NoError(t, err)
			call := func(method, path, body string, want int) string {
				t.Helper()
				req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
				require.NoError(t, err)
				req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				var b bytes.Buffer
				_, _ = b.ReadFrom(resp.Body)
				require.Equal(t, want, resp.StatusCode, "%s %s: %s", method, path, b.String())
				return b.String()
			}
			call("PUT", "/v1/projects/infra", "", 201)
			lock := `{"ID":"L1","Operation":"OperationTypeApply","Who":"t@h","Version":"1.11.4","Created":"2026-11-25T00:00:00Z"}`
			call("LOCK", "/v1/state/infra/prod", lock, 200)
			state := `{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"x","outputs":{},"resources":[]}`
			call("POST", "/v1/state/infra/prod?ID=L1", state, 200)
			require.Contains(t, call("GET", "/v1/state/infra/prod", "", 200), `"lineage":"x"`)
			call("UNLOCK", "/v1/state/infra/prod", lock, 200)
			require.Contains(t, call("GET", "/v1/audit?limit=1000", "", 200), "state.unlock")
		})
	}
}

// withURLParam adds name=value to a PostgreSQL URL or keyword/value connection string.
func withURLParam(url, name, value string) string {
	if !strings.HasPrefix(url, "postgres://") && !strings.HasPrefix(url, "postgresql://") {
		return fmt.Sprintf("%s %s=%s", url, name, value)
	}
	if strings.Contains(url, "?") {
		return url + "&" + name + "=" + value
	}
	return url + "?" + name + "=" + value
}

// startPgBouncer runs Debian's pgbouncer in transaction mode in front of the database of
// direct (as the postgres user when the test runs as root: PgBouncer refuses root) and returns
// a URL through it. .ci/run installs pgbouncer; without it the test fails saying so.
func startPgBouncer(t *testing.T, direct string) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		bin, err = exec.LookPath("/usr/sbin/pgbouncer") // Debian's place, off a user's PATH
	}
	require.NoError(t, err, "the pooler test needs PgBouncer: apt-get install -y pgbouncer (.ci/run installs it)")
	target, err := pgconnParse(direct)
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "strata-pgbouncer-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	port := freePort(t)
	// The configuration deploy/pgbouncer/pgbouncer.ini ships, filled in.
	tmpl, err := os.ReadFile("../../deploy/pgbouncer/pgbouncer.ini")
	require.NoError(t, err)
	conf := strings.NewReplacer("@HOST@", target.host, "@PORT@", target.port, "@LISTEN_ADDR@", "127.0.0.1",
		"@LISTEN_PORT@", strconv.Itoa(port), "@AUTH_TYPE@", "trust", "@DIR@", dir).Replace(string(tmpl))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(conf), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "userlist.txt"), []byte(fmt.Sprintf("%q \"\"\n", target.user)), 0o644))
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		require.NoError(t, err)
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		require.NoError(t, os.Chown(dir, uid, gid))
	}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "pgbouncer did not listen: %s", out.String())
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", target.user, port, target.database)
}
