package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/pgembed"
)

// pgPair is a primary with a synchronous streaming standby on loopback, made with the
// machine's PostgreSQL binaries (run as the postgres user when the test runs as root, as
// PostgreSQL requires), in a directory the test owns.
type pgPair struct {
	t                        *testing.T
	bin, dir                 string
	primary, standby         string // data directories
	primaryPort, standbyPort int
	cred                     *syscall.Credential
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (p *pgPair) run(name string, args ...string) string {
	p.t.Helper()
	cmd := exec.Command(filepath.Join(p.bin, name), args...)
	cmd.Dir = p.dir
	if p.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	}
	out, err := cmd.CombinedOutput()
	require.NoError(p.t, err, "%s %s: %s", name, strings.Join(args, " "), out)
	return string(out)
}

func newPGPair(t *testing.T) *pgPair { return newPGPairMode(t, true) }

// newPGPairMode makes the pair with synchronous or asynchronous replication.
func newPGPairMode(t *testing.T, synchronous bool) *pgPair {
	t.Helper()
	bin, err := pgembed.FindBinaries()
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "strata-failover-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	p := &pgPair{t: t, bin: bin, dir: dir, primary: filepath.Join(dir, "primary"), standby: filepath.Join(dir, "standby"),
		primaryPort: freePort(t), standbyPort: freePort(t)}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		require.NoError(t, err, "as root, PostgreSQL runs as the postgres user (Debian's postgresql package creates it)")
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		require.NoError(t, os.Chown(dir, uid, gid))
	}
	t.Cleanup(func() {
		for _, d := range []string{p.primary, p.standby} {
			if _, err := os.Stat(filepath.Join(d, "postmaster.pid")); err == nil {
				cmd := exec.Command(filepath.Join(p.bin, "pg_ctl"), "-D", d, "-m", "immediate", "-w", "stop")
				if p.cred != nil {
					cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
				}
				_ = cmd.Run()
			}
		}
		_ = os.RemoveAll(dir)
	})
	p.run("initdb", "-D", p.primary, "-U", "postgres", "--auth=trust", "--no-sync")
	conf := fmt.Sprintf(`
port = %d
listen_addresses = '127.0.0.1'
unix_socket_directories = '%s'
wal_level = replica
max_wal_senders = 5
hot_standby = on
fsync = off
full_page_writes = off
max_connections = 100
synchronous_commit = on
wal_sender_timeout = 5s
`, p.primaryPort, dir)
	if synchronous {
		conf += "synchronous_standby_names = '*'\n"
	}
	appendFile(t, filepath.Join(p.primary, "postgresql.conf"), conf)
	appendFile(t, filepath.Join(p.primary, "pg_hba.conf"), "host replication all 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 trust\n")
	p.run("pg_ctl", "-D", p.primary, "-l", filepath.Join(dir, "primary.log"), "-w", "start")
	p.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(p.primaryPort), "-U", "postgres", "-D", p.standby, "-R", "-X", "stream")
	// The standby, once promoted, has no standby of its own to wait for (a manager such as
	// Patroni would make a new one, or turn synchronous commit off, at the promotion).
	appendFile(t, filepath.Join(p.standby, "postgresql.conf"), fmt.Sprintf("port = %d\nsynchronous_standby_names = ''\n", p.standbyPort))
	p.run("pg_ctl", "-D", p.standby, "-l", filepath.Join(dir, "standby.log"), "-w", "start")
	// With synchronous replication, writes wait for the standby from here on: a write the
	// primary acknowledged is on it.
	state := "sync"
	if !synchronous {
		state = "async"
	}
	require.Eventually(t, func() bool {
		out := p.psql(p.primaryPort, "SELECT count(*) FROM pg_stat_replication WHERE sync_state = '"+state+"' AND state = 'streaming'")
		return strings.TrimSpace(out) == "1"
	}, 30*time.Second, 100*time.Millisecond)
	return p
}

func (p *pgPair) psql(port int, sql string) string {
	p.t.Helper()
	return p.run("psql", "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "postgres", "-d", "postgres", "-Atc", sql)
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(text)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// url is the multi-host URL an operator gives strata: both servers, the writable one chosen.
func (p *pgPair) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?target_session_attrs=read-write&sslmode=disable&connect_timeout=2",
		p.primaryPort, p.standbyPort)
}

// failover kills the primary (immediate stop: no shutdown checkpoint, connections cut) and
// promotes the standby; it returns when the standby accepts writes.
func (p *pgPair) failover() time.Time {
	p.t.Helper()
	p.run("pg_ctl", "-D", p.primary, "-m", "immediate", "-w", "stop")
	p.run("pg_ctl", "-D", p.standby, "-w", "promote")
	return time.Now()
}

// TestFailoverAnswers503AndLosesNothing (issue 21): two strata replicas on a primary with a
// synchronous streaming standby, through one multi-host URL (target_session_attrs=read-write);
// eight clients PATCH labels of their own nodes, each with an increasing value; the primary is
// stopped immediately and the standby promoted under that load. Every answer is a 2xx or a
// 503 (never a 500, whatever statement or COMMIT the connection was lost in); every write
// acknowledged with a 200 is there afterwards (the node's value is at least the last
// acknowledged one); the first write succeeds within 5 s of the promotion.
func TestFailoverAnswers503AndLosesNothing(t *testing.T) {
	t.Parallel()
	p := newPGPair(t)
	token := "strata_" + strings.Repeat("failoverTokenXYZ", 3)
	a := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--database-url", p.url(), "--data-dir", dataDir(t))
	b := startServer(t, nil, "--database-url", p.url(), "--data-dir", dataDir(t))
	env := []string{"STRATA_SERVER=" + a.url, "STRATA_TOKEN=" + token}
	run := func(args ...string) {
		t.Helper()
		out, errOut, err := cliStreams(t, env, args...)
		require.NoError(t, err, "%s%s", out, errOut)
	}
	run("org", "create", "acme")
	const clients = 8
	for i := range clients {
		run("node", "create", fmt.Sprintf("n%d", i), "--org", "acme")
	}

	type outcome struct {
		status int
		at     time.Time
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
		acked    = make([]int, clients) // the last value each client saw acknowledged
	)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	hc := &http.Client{Timeout: 15 * time.Second}
	for i := range clients {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			base := []string{a.url, b.url}[i%2]
			for v := 1; ctx.Err() == nil; v++ {
				body := fmt.Sprintf(`{"metadata":{"labels":{"v":"%d"}}}`, v)
				req, _ := http.NewRequest("PATCH", fmt.Sprintf("%s/v1/nodes/n%d", base, i), strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/merge-patch+json")
				resp, err := hc.Do(req)
				status := 0
				if err == nil {
					status = resp.StatusCode
					resp.Body.Close()
				}
				mu.Lock()
				outcomes = append(outcomes, outcome{status, time.Now()})
				if status == 200 {
					acked[i] = v
				}
				mu.Unlock()
				if status != 200 {
					time.Sleep(50 * time.Millisecond)
				}
			}
		}(i)
	}
	time.Sleep(2 * time.Second)
	promoted := p.failover()
	time.Sleep(8 * time.Second)
	stop()
	wg.Wait()

	counts := map[int]int{}
	var firstAfter time.Time
	for _, o := range outcomes {
		counts[o.status]++
		if o.status == 200 && o.at.After(promoted) && firstAfter.IsZero() {
			firstAfter = o.at
		}
	}
	t.Logf("answers by status: %v; first write after the promotion after %v", counts, firstAfter.Sub(promoted))
	for _, srv := range []*server{a, b} {
		for _, line := range strings.Split(srv.stderr.String(), "\n") {
			if strings.Contains(line, `"status":500`) && strings.Contains(line, "request failed") {
				t.Logf("500: %s", line)
			}
		}
	}
	for status, n := range counts {
		require.True(t, status == 200 || status == 503, "%d answers with status %d (0: no answer): only 2xx and 503 may come of a failover", n, status)
	}
	require.False(t, firstAfter.IsZero(), "no write succeeded after the promotion")
	require.LessOrEqual(t, firstAfter.Sub(promoted), 5*time.Second)
	for i := range clients {
		var got struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		}
		out, errOut, err := cliStreams(t, env, "-o", "json", "node", "get", fmt.Sprintf("n%d", i))
		require.NoError(t, err, errOut)
		require.NoError(t, json.Unmarshal([]byte(out), &got))
		v, _ := strconv.Atoi(got.Metadata.Labels["v"])
		require.GreaterOrEqual(t, v, acked[i], "node n%d: a write acknowledged before the failover was lost", i)
	}
}

// TestAsyncFailoverCannotForkHistory (issue 21, item 2): with asynchronous replication a
// failover can lose acknowledged changes, and the new primary would hand their
// resourceVersions out again for other changes. The standby is stopped, so the changes made
// next reach only the primary; the primary is killed and the standby promoted: those changes
// are lost. The first connection to the new primary records a new history epoch: the next
// version lies a billion past anything the lost history drew, and a watch resumed from a lost
// version (or any version from before the failover) is a 410 — list again — never a silent
// continuation. The control drops the epoch check before the failover: a version is then
// drawn again for a different change, and the watch from the lost version is a 200 that
// silently skips.
func TestAsyncFailoverCannotForkHistory(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		name := "epoch"
		if control {
			name = "control without the epoch check"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := newPGPairMode(t, false)
			token := "strata_" + strings.Repeat("asyncFailoverTok", 3)
			a := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--database-url", p.url(), "--data-dir", dataDir(t))
			call := func(method, path, body string) answer {
				t.Helper()
				req, _ := http.NewRequest(method, a.url+path, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+token)
				if method == "PATCH" {
					req.Header.Set("Content-Type", "application/merge-patch+json")
				}
				resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
				if err != nil {
					return answer{status: 0, body: err.Error()}
				}
				defer resp.Body.Close()
				b := new(strings.Builder)
				buf := make([]byte, 4096)
				n, _ := resp.Body.Read(buf) // a watch answers with its first bytes; enough to see the status
				b.Write(buf[:n])
				return answer{status: resp.StatusCode, body: b.String()}
			}
			rv := func(a answer) int64 {
				t.Helper()
				var o struct {
					Metadata struct {
						ResourceVersion string `json:"resourceVersion"`
					} `json:"metadata"`
				}
				require.NoError(t, json.Unmarshal([]byte(a.body), &o), a.body)
				v, err := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
				require.NoError(t, err)
				return v
			}
			require.Equal(t, 201, call("POST", "/v1/orgs", `{"metadata":{"name":"acme"}}`).status)
			require.Equal(t, 201, call("POST", "/v1/nodes", `{"metadata":{"name":"n0"},"spec":{"org":"acme"}}`).status)
			kept := rv(call("PATCH", "/v1/nodes/n0", `{"metadata":{"labels":{"v":"kept"}}}`))
			if control {
				p.psql(p.primaryPort, "DROP FUNCTION strata.history_epoch_check(text)")
			}
			// Replicated so far; the standby stops, and what follows reaches only the primary.
			require.Eventually(t, func() bool {
				return strings.TrimSpace(p.psql(p.primaryPort, "SELECT count(*) FROM pg_stat_replication WHERE replay_lsn = pg_current_wal_lsn()")) == "1"
			}, 10*time.Second, 50*time.Millisecond)
			p.run("pg_ctl", "-D", p.standby, "-m", "fast", "-w", "stop")
			var lost int64
			for i := 0; i < 5; i++ {
				a := call("PATCH", "/v1/nodes/n0", fmt.Sprintf(`{"metadata":{"labels":{"v":"lost-%d"}}}`, i))
				require.Equal(t, 200, a.status, a.body)
				lost = rv(a)
			}
			require.Greater(t, lost, kept)
			p.run("pg_ctl", "-D", p.primary, "-m", "immediate", "-w", "stop")
			p.run("pg_ctl", "-D", p.standby, "-l", filepath.Join(p.dir, "standby.log"), "-w", "start")
			p.run("pg_ctl", "-D", p.standby, "-w", "promote")

			var after answer
			require.Eventually(t, func() bool {
				after = call("PATCH", "/v1/nodes/n0", `{"metadata":{"labels":{"v":"new"}}}`)
				return after.status == 200
			}, 20*time.Second, 100*time.Millisecond, "writes resume on the promoted standby: %v", after)
			next := rv(after)
			resume := call("GET", fmt.Sprintf("/v1/nodes?watch=true&resourceVersion=%d", lost), "")
			if control {
				require.LessOrEqual(t, next, lost+64, "without the check the new history draws the lost history's numbers again")
				require.Equal(t, 200, resume.status, "…and a watch from a lost version goes on silently: %s", resume.body)
				return
			}
			require.Greater(t, next, lost+900_000_000, "the new history's versions start a billion past the old ones")
			require.Equal(t, 410, resume.status, resume.body)
			require.Contains(t, resume.body, "failed over")
			require.Equal(t, 410, call("GET", fmt.Sprintf("/v1/nodes?watch=true&resourceVersion=%d", kept), "").status, "every watch from before the failover lists again")
			list := call("GET", "/v1/nodes", "")
			require.Equal(t, 200, list.status)
			require.Contains(t, list.body, `"v":"new"`)
		})
	}
}
