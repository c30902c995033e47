package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A test process that is killed (a CI timeout) cannot Stop its cluster: the replicas die with
// it (they are started with a parent-death signal), but PostgreSQL, daemonized by pg_ctl, runs
// on. So a cluster directory that Start made records its owner, and the next Start stops the
// servers of owners that are gone and removes their directories, as internal/pgtest does for
// its own clusters.

// ownDirPrefix names the temporary directories Start makes.
const ownDirPrefix = "strata-chaos-cluster-"

// ownerFile, in such a directory, holds "<pid> <start time>" of the owning process.
const ownerFile = "owner"

func writeOwner(dir string) error {
	pid := os.Getpid()
	return os.WriteFile(filepath.Join(dir, ownerFile), fmt.Appendf(nil, "%d %s\n", pid, processStart(pid)), 0o644)
}

// ownerAlive reports whether the process recorded in dir still runs; a directory without an
// owner file counts as alive for a minute, as its creator may be about to write it.
func ownerAlive(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		st, serr := os.Stat(dir)
		return serr == nil && time.Since(st.ModTime()) < time.Minute
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return false
	}
	start := processStart(pid)
	return start != "" && start == f[1]
}

// processStart is pid's start time (field 22 of /proc/<pid>/stat), "" when it is gone or a
// zombie, so that a reused pid is not taken for the recorded process.
func processStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return ""
	}
	return f[19]
}

// removeLeftovers stops the PostgreSQL servers of cluster directories under root whose owner
// is gone, and removes the directories. A server is stopped only when its postmaster.pid
// names a process whose working directory is that data directory (a pid reused by another
// process is left alone). Failures are ignored: they concern earlier runs, not this one.
func removeLeftovers(ctx context.Context, root string) {
	dirs, _ := filepath.Glob(filepath.Join(root, ownDirPrefix+"*"))
	for _, dir := range dirs {
		if st, err := os.Lstat(dir); err != nil || !st.IsDir() || ownerAlive(dir) {
			continue
		}
		nodes, _ := filepath.Glob(filepath.Join(dir, "pg", "pg*"))
		for _, data := range nodes {
			stopOrphan(ctx, data)
		}
		_ = os.RemoveAll(dir)
	}
}

// stopOrphan stops the server of data dir (pg_ctl stop -m immediate) when it still runs.
func stopOrphan(ctx context.Context, data string) {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil || pid <= 0 {
		return
	}
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	realData, rerr := filepath.EvalSymlinks(data)
	if err != nil || rerr != nil || cwd != realData {
		return
	}
	p, err := newPostgresTools(filepath.Dir(data))
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, _ = p.run(ctx, "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
}
