package pgembed

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Process inspection through Linux's /proc. strata only ever signals (through pg_ctl) a
// postmaster it can prove belongs to its own data directory: a PostgreSQL server process
// changes its working directory to the data directory at startup, so a live, non-zombie
// process named "postgres", owned by the cluster's user, whose working directory is the data
// directory, is one of that cluster's processes. A pid that fails any of these is not, and a
// postmaster.pid naming it is stale. Without /proc nothing is proven and PostgreSQL's own
// stale-lock-file check decides.

// procState is what /proc says about a pid with respect to one data directory.
type procState int

const (
	procUnknown procState = iota // /proc cannot tell
	procGone                     // no such process, or a zombie
	procOther                    // alive, but not a PostgreSQL process of this data directory
	procOurs                     // alive: a PostgreSQL process of this data directory
)

func procAvailable() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}

// inspectProcess classifies pid against the data directory realDir (symlinks resolved) and
// the uid that runs the cluster.
func inspectProcess(pid int, realDir string, uid uint32) procState {
	if pid <= 0 || !procAvailable() {
		return procUnknown
	}
	base := filepath.Join("/proc", strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(base, "stat"))
	if errors.Is(err, fs.ErrNotExist) {
		return procGone
	}
	if err != nil {
		return procUnknown
	}
	// "pid (comm) S ...": comm may hold spaces and parentheses, so split at the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return procUnknown
	}
	if s := stat[i+2]; s == 'Z' || s == 'X' {
		return procGone
	}
	comm := ""
	if j := bytes.IndexByte(stat, '('); j >= 0 && j < i {
		comm = string(stat[j+1 : i])
	}
	if comm != "postgres" {
		return procOther
	}
	if owner, ok := processUID(base); !ok {
		return procUnknown
	} else if owner != uid {
		return procOther
	}
	cwd, err := os.Readlink(filepath.Join(base, "cwd"))
	if errors.Is(err, fs.ErrNotExist) {
		return procGone
	}
	if err != nil {
		return procUnknown
	}
	if cwd != realDir {
		return procOther
	}
	return procOurs
}

// processUID reads the effective uid from /proc/<pid>/status.
func processUID(base string) (uint32, bool) {
	b, err := os.ReadFile(filepath.Join(base, "status"))
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, "Uid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			return 0, false
		}
		u, err := strconv.ParseUint(f[1], 10, 32)
		return uint32(u), err == nil
	}
	return 0, false
}

// processesIn lists the live PostgreSQL processes of the data directory realDir: after a
// postmaster is killed, its children linger until they notice, and a new postmaster refuses to
// start while they hold the old shared memory.
func processesIn(realDir string, uid uint32) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if inspectProcess(pid, realDir, uid) == procOurs {
			pids = append(pids, pid)
		}
	}
	return pids
}

// toolsIn lists the live processes other than postgres itself (initdb, pg_ctl, the shell
// pg_ctl starts the server with) whose working directory is realDir: strata runs those tools
// there, so they belong to a cluster setup or start in progress.
func toolsIn(realDir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		base := filepath.Join("/proc", e.Name())
		if cwd, err := os.Readlink(filepath.Join(base, "cwd")); err != nil || cwd != realDir {
			continue
		}
		if comm, err := os.ReadFile(filepath.Join(base, "comm")); err == nil && strings.TrimSpace(string(comm)) != "postgres" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// readPostmasterPID returns the pid on the first line of a PostgreSQL lock file
// (postmaster.pid, or a socket's .s.PGSQL.<port>.lock), 0 when there is no such file.
func readPostmasterPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("%s: first line is not a pid", path)
	}
	if pid < 0 { // a single-user backend writes its pid negated
		pid = -pid
	}
	return pid, nil
}
