package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
)

// mdweExecEnv makes the test binary, started with it set, turn on what the unit's
// MemoryDenyWriteExecute=yes turns on — prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN), which
// every child inherits — and exec its arguments.
const mdweExecEnv = "STRATA_TEST_MDWE_EXEC"

func mdweExec() {
	const prSetMDWE, refuseExecGain = 65, 1
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetMDWE, refuseExecGain, 0, 0, 0, 0); errno != 0 {
		fmt.Fprintf(os.Stderr, "prctl(PR_SET_MDWE): %v (Linux 6.3 or later has it)\n", errno)
		os.Exit(3)
	}
	args := os.Args[1:]
	err := syscall.Exec(args[0], args, os.Environ())
	fmt.Fprintf(os.Stderr, "exec %s: %v\n", args[0], err)
	os.Exit(3)
}

// TestEmbeddedClusterUnderMDWE (issue 28, item 6): strata.service has
// MemoryDenyWriteExecute=yes, which PostgreSQL's JIT (on by default) breaks: any statement
// planned above jit_above_cost failed with "failed to look up symbol". Here the real binary
// runs under the same kernel restriction (PR_SET_MDWE, inherited by the embedded PostgreSQL):
// a statement far above every JIT threshold runs, because the embedded cluster has jit=off;
// the control turns JIT on in one session and gets the very error the unit produced.
func TestEmbeddedClusterUnderMDWE(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	cmd := exec.Command(os.Args[0], binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", dir)
	cmd.Env = append(os.Environ(), mdweExecEnv+"=1")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	log := &syncBuffer{}
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	serving := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(io.TeeReader(stderr, log))
		for sc.Scan() {
			var line struct{ Msg string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "strata serving" {
				close(serving)
			}
		}
		done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			require.NoError(t, err, "strata exits cleanly:\n%s", log.String())
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("strata did not stop")
		}
	})
	select {
	case <-serving:
	case err := <-done:
		done <- err
		t.Fatalf("strata under MDWE exited before serving (%v):\n%s", err, log.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("strata under MDWE did not serve within 60s:\n%s", log.String())
	}
	ctx := context.Background()
	d, err := db.Open(ctx, db.Options{URL: fmt.Sprintf("host=%s port=5432 user=strata dbname=strata sslmode=disable", filepath.Join(dir, "pg-socket")), MaxConns: 1})
	require.NoError(t, err)
	t.Cleanup(d.Close)
	var jit string
	require.NoError(t, d.QueryRow(ctx, &db.Query{Name: "jit", Text: "SHOW jit"}).Scan(&jit))
	require.Equal(t, "off", jit)
	heavy := &db.Query{Name: "heavy", Text: "SELECT sum(g) FROM generate_series(1, 200000) g"}
	var sum int64
	_, err = d.Exec(ctx, &db.Query{Name: "cost", Text: "SET jit_above_cost = 0"})
	require.NoError(t, err)
	require.NoError(t, d.QueryRow(ctx, heavy).Scan(&sum), "a statement above every JIT threshold runs")
	require.Equal(t, int64(20000100000), sum)

	_, err = d.Exec(ctx, &db.Query{Name: "jit on", Text: "SET jit = on"})
	require.NoError(t, err)
	// Another statement text: the first one's cached plan was made with JIT off.
	err = d.QueryRow(ctx, &db.Query{Name: "heavy jit", Text: "SELECT sum(g) + 0 FROM generate_series(1, 200000) g"}).Scan(&sum)
	require.ErrorContains(t, err, "failed to look up symbol", "the control: with JIT on, MDWE breaks the statement as the issue saw")
}
