package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
)

// The fault tests share one cluster (PostgreSQL with a synchronous standby, two replicas):
// starting one takes seconds, and each test heals what it broke. They take turns on it.
var shared struct {
	binDir  string
	binary  string
	once    sync.Once
	cluster *Cluster
	log     *testLog
	err     error
	turn    sync.Mutex
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "strata-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared.binDir = dir
	code := m.Run()
	if shared.cluster != nil {
		if err := shared.cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "chaos: stop:", err)
			code = max(code, 1)
		}
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// testLog keeps the cluster's log for the failing test's output.
type testLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *testLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buf.Len() > 4<<20 {
		l.buf.Reset()
	}
	return l.buf.Write(b)
}

func (l *testLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.buf.String()
	return s[max(0, len(s)-8000):]
}

// cluster returns the shared cluster for the test's turn: it is the only test using it until
// it ends. A test that fails heals what it injected (healing a healed fault does nothing).
func cluster(t *testing.T, injected ...Fault) *Cluster {
	t.Helper()
	shared.turn.Lock()
	t.Cleanup(shared.turn.Unlock)
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		shared.binary, shared.err = BuildStrata(ctx, shared.binDir)
		if shared.err != nil {
			return
		}
		shared.log = &testLog{}
		shared.cluster, shared.err = Start(ctx, Options{Replicas: 2, Standby: true, ClientProxy: true, Binary: shared.binary, Log: shared.log})
	})
	require.NoError(t, shared.err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster log:\n%s", shared.log.tail())
		}
	})
	return shared.cluster
}

// healOnFailure heals f when the test fails before it did, so the next test finds the
// cluster whole.
func healOnFailure(t *testing.T, f Fault) {
	t.Cleanup(func() {
		if t.Failed() {
			_ = f.Heal(context.Background())
		}
	})
}

var writes atomic.Int64

// write creates an org through replica r and returns the status (0: no answer within
// timeout) and the org's name.
func write(t *testing.T, c *Cluster, r *Replica, timeout time.Duration) (int, string) {
	t.Helper()
	name := fmt.Sprintf("o%d-%d", time.Now().UnixNano()%1_000_000, writes.Add(1))
	return request(t, c, r, "POST", "/v1/orgs", `{"metadata":{"name":"`+name+`"}}`, timeout), name
}

func request(t *testing.T, c *Cluster, r *Replica, method, path, body string, timeout time.Duration) int {
	t.Helper()
	status, _ := requestBody(t, c, r, method, path, body, timeout)
	return status
}

// requestBody is request that also returns the answer's body.
func requestBody(t *testing.T, c *Cluster, r *Replica, method, path, body string, timeout time.Duration) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, r.URL()+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+c.AdminToken())
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// requireWrites asserts that every replica takes a write.
func requireWrites(t *testing.T, c *Cluster) {
	t.Helper()
	for _, r := range c.Replicas() {
		status, _ := write(t, c, r, 10*time.Second)
		require.Equal(t, http.StatusCreated, status, "replica %d", r.Index)
	}
}

// strataBackends are the pids of strata's backends on the primary.
func strataBackends(t *testing.T, c *Cluster) []int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := c.pg.open(ctx, c.pg.current())
	require.NoError(t, err)
	defer d.Close()
	var pids []int32
	require.NoError(t, d.QueryRow(ctx, queries.Get("StrataBackends"), "strata%").Scan(&pids))
	return pids
}

// syncStandbys is the number of synchronous standbys streaming from the primary.
func syncStandbys(t *testing.T, c *Cluster) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := c.pg.open(ctx, c.pg.current())
	require.NoError(t, err)
	defer d.Close()
	var n int
	require.NoError(t, d.QueryRow(ctx, queries.Get("SyncStandbys")).Scan(&n))
	return n
}

func postmasterStart(t *testing.T, c *Cluster) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := c.pg.open(ctx, c.pg.current())
	require.NoError(t, err)
	defer d.Close()
	var s string
	require.NoError(t, d.QueryRow(ctx, queries.Get("PostmasterStart")).Scan(&s))
	return s
}

// openThrough opens one connection of the test's own through replica r's proxy.
func openThrough(t *testing.T, r *Replica) *db.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := db.Open(ctx, db.Options{URL: r.DatabaseURL() + "&application_name=chaos-test", MaxConns: 1, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(d.Close)
	return d
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestPGRestart stops the primary (fast, and immediate: a crash): while it is down a write is
// refused with 503 — never a 500, never a success — and after Heal the server is a new one
// (another start time), every replica takes writes, and every write acknowledged before the
// crash is there (fsync is on: a crash loses nothing acknowledged).
func TestPGRestart(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"fast", "immediate"} {
		t.Run(mode, func(t *testing.T) {
			c := cluster(t)
			f := c.PGStop(mode)
			require.Equal(t, "pg-restart-"+mode, f.Name())
			healOnFailure(t, f)
			status, before := write(t, c, c.Replicas()[0], 10*time.Second)
			require.Equal(t, http.StatusCreated, status)
			started := postmasterStart(t, c)

			require.NoError(t, f.Inject(ctxFor(t, time.Minute)))
			status, _ = write(t, c, c.Replicas()[1], 10*time.Second)
			require.Equal(t, http.StatusServiceUnavailable, status, "a write while PostgreSQL is down")

			require.NoError(t, f.Heal(ctxFor(t, time.Minute)))
			require.NotEqual(t, started, postmasterStart(t, c), "the primary restarted")
			require.Equal(t, 1, syncStandbys(t, c), "healed: commits do not wait for a standby still reconnecting")
			requireWrites(t, c)
			require.Equal(t, http.StatusOK, request(t, c, c.Replicas()[1], "GET", "/v1/orgs/"+before, "", 10*time.Second),
				"the write acknowledged before the stop survived it")
		})
	}
}

// TestKill9 kills a replica: it stops answering at once, and after Heal it runs again (another
// process) at the same URL and takes writes.
func TestKill9(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	r := c.Replicas()[1]
	f := c.Kill9(1)
	require.Equal(t, "kill9-replica-1", f.Name())
	healOnFailure(t, f)
	pid := r.Pid()
	require.NotZero(t, pid)

	require.NoError(t, f.Inject(ctxFor(t, time.Minute)))
	require.Zero(t, r.Pid())
	_, err := probe(context.Background(), r.addr(), "/readyz")
	require.Error(t, err, "a killed replica answers nothing")
	status, _ := write(t, c, c.Replicas()[0], 10*time.Second)
	require.Equal(t, http.StatusCreated, status, "the other replica goes on")

	require.NoError(t, f.Heal(ctxFor(t, time.Minute)))
	require.NotZero(t, r.Pid())
	require.NotEqual(t, pid, r.Pid())
	requireWrites(t, c)
}

// TestCutConnections resets every database connection: a statement in flight through a
// replica's proxy fails at once (it would run 30 s), strata's backends are all gone from the
// server, and the replicas reconnect and take writes.
func TestCutConnections(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	f := c.CutConnections()
	require.Equal(t, "cut-connections", f.Name())
	healOnFailure(t, f)
	d := openThrough(t, c.Replicas()[0])
	before := strataBackends(t, c)
	require.NotEmpty(t, before)

	errc := make(chan error, 1)
	go func() {
		var s string
		errc <- d.QueryRow(context.Background(), queries.Get("Sleep"), 30).Scan(&s)
	}()
	time.Sleep(300 * time.Millisecond) // the statement is on its way or running
	start := time.Now()
	require.NoError(t, f.Inject(ctxFor(t, time.Minute)))
	select {
	case err := <-errc:
		require.Error(t, err, "the statement in flight fails")
		require.Less(t, time.Since(start), 5*time.Second)
	case <-time.After(10 * time.Second):
		t.Fatal("the statement in flight went on after the cut")
	}
	require.Eventually(t, func() bool {
		for _, pid := range strataBackends(t, c) {
			if slices.Contains(before, pid) {
				return false
			}
		}
		return true
	}, 10*time.Second, 50*time.Millisecond, "every backend strata had is gone")

	require.NoError(t, f.Heal(ctxFor(t, time.Minute)))
	requireWrites(t, c)
}

// TestLoseCommitAnswers drops the answer of every COMMIT: each write in the window answers
// 503 with outcome "unknown" (strata cannot know), and each was applied — the COMMIT had
// committed when its answer was lost. After Heal writes are acknowledged again.
func TestLoseCommitAnswers(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	f := c.LoseCommitAnswers()
	require.Equal(t, "lose-commit-answers", f.Name())
	healOnFailure(t, f)
	lostBefore := c.Replicas()[0].Proxy().LostCommits() + c.Replicas()[1].Proxy().LostCommits()

	require.NoError(t, f.Inject(ctxFor(t, time.Minute)))
	var names []string
	for i := range 4 {
		r := c.Replicas()[i%2]
		name := fmt.Sprintf("lost%d-%d", time.Now().UnixNano()%1_000_000, i)
		status, body := requestBody(t, c, r, "POST", "/v1/orgs", `{"metadata":{"name":"`+name+`"}}`, 10*time.Second)
		require.Equal(t, http.StatusServiceUnavailable, status, body)
		require.Contains(t, body, `"outcome":"unknown"`)
		names = append(names, name)
	}
	lost := c.Replicas()[0].Proxy().LostCommits() + c.Replicas()[1].Proxy().LostCommits() - lostBefore
	require.GreaterOrEqual(t, lost, int64(4))

	require.NoError(t, f.Heal(ctxFor(t, time.Minute)))
	for _, name := range names {
		require.Equal(t, http.StatusOK, request(t, c, c.Replicas()[0], "GET", "/v1/orgs/"+name, "", 10*time.Second),
			"%s was committed though its answer was lost", name)
	}
	requireWrites(t, c)
}

// TestCutClients resets the clients' connections: a watch stream ends with an error (not a
// clean end) while the replica runs on (the same process), and a new watch and writes work.
func TestCutClients(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	f := c.CutClients()
	require.Equal(t, "cut-client-connections", f.Name())
	healOnFailure(t, f)
	r := c.Replicas()[0]
	pid := r.Pid()
	watch := func() *http.Response {
		req, err := http.NewRequest("GET", r.URL()+"/v1/orgs?watch=true", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+c.AdminToken())
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	resp := watch()
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		ended <- err
	}()

	require.NoError(t, f.Inject(ctxFor(t, time.Minute)))
	select {
	case err := <-ended:
		require.Error(t, err, "the stream is cut, not ended cleanly")
	case <-time.After(10 * time.Second):
		t.Fatal("the watch stream went on after the cut")
	}
	require.Equal(t, pid, r.Pid(), "the replica runs on")

	require.NoError(t, f.Heal(ctxFor(t, time.Minute)))
	watch()
	requireWrites(t, c)
}

// TestDelay delays one replica's database traffic: a round trip through its proxy takes at
// least twice the delay (each direction is delayed), and after Heal it is fast again.
func TestDelay(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	f := c.Delay(1, 150*time.Millisecond, 0)
	require.Equal(t, "delay-replica-1", f.Name())
	healOnFailure(t, f)
	d := openThrough(t, c.Replicas()[1])
	roundTrip := func() time.Duration {
		start := time.Now()
		var rec bool
		require.NoError(t, d.QueryRow(ctxFor(t, 10*time.Second), queries.Get("InRecovery")).Scan(&rec))
		return time.Since(start)
	}
	roundTrip() // the connection is made

	require.NoError(t, f.Inject(ctxFor(t, time.Minute)))
	require.GreaterOrEqual(t, roundTrip(), 300*time.Millisecond)
	start := time.Now()
	status, _ := write(t, c, c.Replicas()[1], 20*time.Second)
	require.Equal(t, http.StatusCreated, status, "a delayed replica still writes")
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)

	require.NoError(t, f.Heal(ctxFor(t, time.Minute)))
	fastest := time.Hour
	for range 5 {
		fastest = min(fastest, roundTrip())
	}
	require.Less(t, fastest, 300*time.Millisecond, "healed: faster than one delayed round trip")
	requireWrites(t, c)
}

// TestBlackhole partitions one replica from PostgreSQL: its write gets no success (the client
// gives up, or strata answers 503/504), the other replica writes meanwhile, and after Heal
// both write.
func TestBlackhole(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	f := c.Blackhole(1)
	require.Equal(t, "blackhole-replica-1", f.Name())
	healOnFailure(t, f)

	require.NoError(t, f.Inject(ctxFor(t, time.Minute)))
	var cut atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		status, _ := write(t, c, c.Replicas()[1], 1500*time.Millisecond)
		cut.Store(int32(status))
	}()
	status, _ := write(t, c, c.Replicas()[0], 10*time.Second)
	require.Equal(t, http.StatusCreated, status, "the replica outside the partition goes on")
	<-done
	require.Contains(t, []int32{0, http.StatusServiceUnavailable, http.StatusGatewayTimeout}, cut.Load(),
		"the partitioned replica's write has no answer or an unknown outcome")

	require.NoError(t, f.Heal(ctxFor(t, time.Minute)))
	requireWrites(t, c)
}

// TestTerminateBackends ends the replicas' backends from SQL: every one they had is gone, a
// bystander's connection — a harness's ground-truth pool, which calls itself "strata" like
// every internal/db pool — survives, and the replicas take writes after Heal.
func TestTerminateBackends(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	f := c.TerminateBackends()
	require.Equal(t, "terminate-backends", f.Name())
	healOnFailure(t, f)
	bystander, err := db.Open(ctxFor(t, 10*time.Second), db.Options{URL: c.DatabaseURL(), MaxConns: 1, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer bystander.Close()
	var pid, pidAfter int32
	require.NoError(t, bystander.QueryRow(ctxFor(t, 10*time.Second), queries.Get("BackendPid")).Scan(&pid))
	before := strataBackends(t, c)
	require.Contains(t, before, pid, "the bystander calls itself strata")
	require.Greater(t, len(before), 1)

	require.NoError(t, f.Inject(ctxFor(t, time.Minute)))
	// pg_terminate_backend signals; a backend leaves pg_stat_activity once it has exited.
	require.Eventually(t, func() bool {
		for _, p := range strataBackends(t, c) {
			if p != pid && slices.Contains(before, p) {
				return false
			}
		}
		return true
	}, 10*time.Second, 50*time.Millisecond, "a replica's backend survived pg_terminate_backend")
	require.NoError(t, bystander.QueryRow(ctxFor(t, 10*time.Second), queries.Get("BackendPid")).Scan(&pidAfter))
	require.Equal(t, pid, pidAfter, "the bystander's connection survived")

	require.NoError(t, f.Heal(ctxFor(t, time.Minute)))
	requireWrites(t, c)
}

// TestPromote crashes the primary and promotes the synchronous standby: the new primary takes
// writes through the replicas' multi-host URL, nothing acknowledged is lost, and Heal makes
// the old primary the new synchronous standby; a second promotion swaps them back.
func TestPromote(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	f := c.Promote()
	require.Equal(t, "promote-standby", f.Name())
	healOnFailure(t, f)
	for round := range 2 {
		status, before := write(t, c, c.Replicas()[0], 10*time.Second)
		require.Equal(t, http.StatusCreated, status)
		old := c.pg.current()

		require.NoError(t, f.Inject(ctxFor(t, time.Minute)))
		require.NotEqual(t, old, c.pg.current(), "round %d: the standby is the primary", round)
		require.Eventually(t, func() bool {
			status, _ := write(t, c, c.Replicas()[1], 5*time.Second)
			return status == http.StatusCreated
		}, 20*time.Second, 100*time.Millisecond, "round %d: writes go on before the old primary is back", round)

		require.NoError(t, f.Heal(ctxFor(t, 2*time.Minute)))
		require.Equal(t, old, c.pg.standbyNode(), "round %d: the old primary is the standby", round)
		require.Equal(t, 1, syncStandbys(t, c), "round %d: and it is synchronous", round)
		requireWrites(t, c)
		require.Equal(t, http.StatusOK, request(t, c, c.Replicas()[1], "GET", "/v1/orgs/"+before, "", 10*time.Second),
			"round %d: the write acknowledged before the promotion survived it", round)
	}
}

// TestCombined injects several faults at once and heals them together.
func TestCombined(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	f := Combine(c.Delay(0, 20*time.Millisecond, 10*time.Millisecond), c.CutConnections(), c.TerminateBackends(), c.Kill9(1))
	require.Equal(t, "delay-replica-0+cut-connections+terminate-backends+kill9-replica-1", f.Name())
	healOnFailure(t, f)
	require.NoError(t, f.Inject(ctxFor(t, time.Minute)))
	require.Zero(t, c.Replicas()[1].Pid())
	require.NoError(t, f.Heal(ctxFor(t, time.Minute)))
	requireWrites(t, c)
}

// TestFaultsList names one fault of each kind, in Faults and ExtraFaults.
func TestFaultsList(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	names := func(fs []Fault) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.Name())
		}
		return out
	}
	require.Equal(t, []string{"pg-restart-fast", "pg-restart-immediate", "kill9-replica-1", "cut-connections",
		"delay-replica-1", "blackhole-replica-1", "terminate-backends", "promote-standby"}, names(c.Faults()))
	require.Equal(t, []string{"pause-replica-1", "lose-commit-answers", "stop-standby", "cut-client-connections"}, names(c.ExtraFaults()))
	require.Contains(t, c.DatabaseURL(), "target_session_attrs=read-write")
	require.Contains(t, c.DatabaseURL(), c.pg.current().addr())
	require.Contains(t, c.DatabaseURL(), c.pg.standbyNode().addr())
	require.NotEqual(t, c.Replicas()[0].URL(), c.Replicas()[0].DirectURL(), "clients go through the client proxy")
	require.NotContains(t, c.PrimaryURL(), ",", "one host, for lib/pq")
	require.Contains(t, c.PrimaryURL(), c.pg.current().addr())
}

// TestPause stops a replica with SIGSTOP: it accepts connections but answers nothing, the
// other replica goes on, and after Heal it answers again (the same process).
func TestPause(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	r := c.Replicas()[1]
	f := c.Pause(1)
	require.Equal(t, "pause-replica-1", f.Name())
	healOnFailure(t, f)
	pid := r.Pid()

	require.NoError(t, f.Inject(ctxFor(t, time.Minute)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := probe(ctx, r.addr(), "/readyz")
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "a paused replica answers nothing")
	status, _ := write(t, c, c.Replicas()[0], 10*time.Second)
	require.Equal(t, http.StatusCreated, status, "the other replica goes on")

	require.NoError(t, f.Heal(ctxFor(t, time.Minute)))
	require.Equal(t, pid, r.Pid())
	requireWrites(t, c)
}

// TestStopStandby stops the synchronous standby: a COMMIT waits for it (and a write that
// needs a row such a COMMIT holds waits behind it), so an impatient client's write gets no
// acknowledgement, and a patient client's write hangs — WaitIdle sees its transaction — until
// Heal, then succeeds. Whether the impatient write was applied depends on where it waited:
// in its own COMMIT it was committed locally, behind another's lock it was rolled back; the
// harness resolves such outcomes from the database.
func TestStopStandby(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	f := c.StopStandby()
	require.Equal(t, "stop-standby", f.Name())
	healOnFailure(t, f)
	require.NoError(t, c.WaitIdle(ctxFor(t, 30*time.Second)))

	require.NoError(t, f.Inject(ctxFor(t, time.Minute)))
	impatient, lost := write(t, c, c.Replicas()[0], time.Second)
	require.NotEqual(t, http.StatusCreated, impatient, "a write cannot be acknowledged without the synchronous standby")
	patient := make(chan int, 1)
	go func() {
		status, _ := write(t, c, c.Replicas()[1], time.Minute)
		patient <- status
	}()
	require.Eventually(t, func() bool {
		n, err := c.pg.transactions(context.Background())
		return err == nil && n > 0
	}, 10*time.Second, 50*time.Millisecond, "the patient write waits in its COMMIT")
	require.Error(t, c.WaitIdle(ctxFor(t, 500*time.Millisecond)), "WaitIdle sees the waiting transaction")

	require.NoError(t, f.Heal(ctxFor(t, time.Minute)))
	require.Equal(t, 1, syncStandbys(t, c))
	select {
	case status := <-patient:
		require.Equal(t, http.StatusCreated, status)
	case <-time.After(30 * time.Second):
		t.Fatal("the patient write did not finish after Heal")
	}
	require.NoError(t, c.WaitIdle(ctxFor(t, 30*time.Second)))
	t.Logf("the impatient write answered %d; GET afterwards: %d", impatient,
		request(t, c, c.Replicas()[1], "GET", "/v1/orgs/"+lost, "", 10*time.Second))
	requireWrites(t, c)
}

// echoServer answers every connection by echoing what it reads.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	return l.Addr().String()
}

// TestProxy shows the proxy's three behaviours on a plain echo server: Cut resets the client
// (an error, not a clean EOF), Blackhole holds bytes and new connections until Heal delivers
// them in order, SetDelay delays each direction.
func TestProxy(t *testing.T) {
	t.Parallel()
	p, err := NewProxy([]string{echoServer(t)}, 1)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	dial := func() net.Conn {
		c, err := net.Dial("tcp", p.Addrs()[0])
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	echo := func(c net.Conn, msg string) (string, error) {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte(msg)); err != nil {
			return "", err
		}
		buf := make([]byte, len(msg))
		_, err := io.ReadFull(c, buf)
		return string(buf), err
	}

	c := dial()
	got, err := echo(c, "hello")
	require.NoError(t, err)
	require.Equal(t, "hello", got)
	require.Eventually(t, func() bool { return p.Conns() == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, p.Cut())
	_, err = echo(c, "again")
	require.Error(t, err)
	require.NotErrorIs(t, err, io.EOF, "a cut is a reset, not a clean close")

	c = dial()
	_, err = echo(c, "warm")
	require.NoError(t, err)
	p.Blackhole()
	_, err = c.Write([]byte("held"))
	require.NoError(t, err)
	c2 := dial()
	_, err = c2.Write([]byte("new"))
	require.NoError(t, err)
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err = c.Read(make([]byte, 4))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "nothing crosses a blackhole")
	p.Heal()
	buf := make([]byte, 4)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)
	require.Equal(t, "held", string(buf), "what was held arrives at Heal")
	buf = buf[:3]
	_ = c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadFull(c2, buf)
	require.NoError(t, err)
	require.Equal(t, "new", string(buf), "a connection made during the blackhole is served at Heal")

	p.LoseCommitAnswers(true)
	_, err = echo(c, "SELECT 1")
	require.NoError(t, err, "only a COMMIT's answer is lost")
	_, err = echo(c, "Z"+string(commitComplete))
	require.Error(t, err, "the connection is reset with the COMMIT's answer")
	require.NotErrorIs(t, err, io.EOF)
	require.EqualValues(t, 1, p.LostCommits())
	p.Heal()
	c = dial()
	_, err = echo(c, string(commitComplete))
	require.NoError(t, err, "healed: a COMMIT's answer passes")

	p.SetDelay(100*time.Millisecond, 0)
	start := time.Now()
	got, err = echo(c, "slow")
	require.NoError(t, err)
	require.Equal(t, "slow", got)
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "both directions are delayed")
}

// TestRemoveLeftovers removes the cluster directory of an owner that is gone and keeps the
// one of a live owner (this process) and one that is not a cluster directory.
func TestRemoveLeftovers(t *testing.T) {
	t.Parallel()
	// Not t.TempDir: its parent is private, and as root PostgreSQL runs as the postgres user.
	root, err := os.MkdirTemp("", "strata-leftovers-test-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(root, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	gone := filepath.Join(root, ownDirPrefix+"gone")
	live := filepath.Join(root, ownDirPrefix+"live")
	other := filepath.Join(root, "strata-other")
	for _, d := range []string{gone, live, other} {
		require.NoError(t, os.MkdirAll(filepath.Join(d, "pg", "pg0"), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(gone, ownerFile), fmt.Appendf(nil, "%d 1\n", dead.Process.Pid), 0o644))
	require.NoError(t, writeOwner(live))
	require.NoError(t, os.WriteFile(filepath.Join(other, ownerFile), []byte("1 1\n"), 0o644))

	// The gone owner's PostgreSQL still runs, as after a killed test run.
	require.NoError(t, os.RemoveAll(filepath.Join(gone, "pg")))
	pg, err := startPostgres(ctxFor(t, time.Minute), filepath.Join(gone, "pg"), false, func(string, ...any) {})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.stop(context.Background()) })
	b, err := os.ReadFile(filepath.Join(pg.nodes[0].data, "postmaster.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	require.NoError(t, err)
	require.NotEmpty(t, processStart(pid))

	removeLeftovers(context.Background(), root)
	require.NoDirExists(t, gone)
	require.Empty(t, processStart(pid), "the orphaned postmaster is stopped")
	require.DirExists(t, live)
	require.DirExists(t, other)
}
