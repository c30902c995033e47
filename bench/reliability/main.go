// Command reliability measures how strata's Terraform state service behaves under faults:
// a PostgreSQL restart in the middle of a load of Terraform-protocol clients on two replicas,
// and the SIGKILL of a replica that holds locks. It only speaks HTTP to the replicas; the
// faults themselves (restarting PostgreSQL, killing and starting a replica, reading
// pg_locks) are hook programs that bench/reliability.sh writes and passes in, because that
// script owns the processes. Run it through the script:
//
//	bash bench/reliability.sh [flags]
//
// Each scenario prints one summary line starting with PASS or FAIL, then its figures; the
// exit status is 1 when any acceptance condition failed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

type config struct {
	a, b          replica
	token         string
	project       string
	scenarios     []string
	clients       int
	shared        int
	shareGroup    int
	duration      time.Duration
	restartAt     time.Duration
	recoveryLimit time.Duration
	reqTimeout    time.Duration
	locks         int
	killWatch     time.Duration
	verbose       bool

	hookPGRestart, hookPGIsReady, hookKillA, hookStartA, hookPSQL string
}

func main() {
	var cfg config
	var scenarios string
	flag.StringVar(&cfg.a.base, "a", "", "base URL of replica A (the one the kill scenario kills)")
	flag.StringVar(&cfg.b.base, "b", "", "base URL of replica B")
	flag.StringVar(&cfg.token, "token", os.Getenv("STRATA_TOKEN"), "admin token (default $STRATA_TOKEN)")
	flag.StringVar(&cfg.project, "project", "reliab", "project (schema) the scenarios use; created when missing")
	flag.StringVar(&scenarios, "scenarios", "restart,kill", "comma-separated scenarios: restart, kill")
	flag.IntVar(&cfg.clients, "clients", 64, "restart: concurrent Terraform-protocol clients")
	flag.IntVar(&cfg.shared, "shared", 16, "restart: how many of the clients share workspaces (the others have one each)")
	flag.IntVar(&cfg.shareGroup, "share-group", 4, "restart: clients per shared workspace")
	flag.DurationVar(&cfg.duration, "duration", 40*time.Second, "restart: load duration")
	flag.DurationVar(&cfg.restartAt, "restart-at", 15*time.Second, "restart: when, into the load, PostgreSQL is restarted")
	flag.DurationVar(&cfg.recoveryLimit, "recovery-limit", 5*time.Second, "restart: longest accepted time from PostgreSQL accepting connections to a replica's first write")
	flag.DurationVar(&cfg.reqTimeout, "request-timeout", 30*time.Second, "HTTP client timeout of one request")
	flag.IntVar(&cfg.locks, "locks", 4, "kill: HTTP locks replica A holds when it is killed")
	flag.DurationVar(&cfg.killWatch, "kill-watch", 6*time.Second, "kill: how long replica B is watched after the kill before force-unlocking")
	flag.BoolVar(&cfg.verbose, "v", false, "print every 5xx other than 503 and every missing write")
	flag.StringVar(&cfg.hookPGRestart, "hook-pg-restart", "", "program that restarts PostgreSQL (pg_ctl restart -m fast) and returns when it accepts connections")
	flag.StringVar(&cfg.hookPGIsReady, "hook-pg-isready", "", "program that exits 0 when PostgreSQL accepts connections (pg_isready)")
	flag.StringVar(&cfg.hookKillA, "hook-kill-a", "", "program that SIGKILLs replica A")
	flag.StringVar(&cfg.hookStartA, "hook-start-a", "", "program that starts replica A again (in the background) at the same address")
	flag.StringVar(&cfg.hookPSQL, "hook-psql", "", "optional program that runs the SQL statement $1 on strata's database and prints rows (for the pg_locks probe)")
	flag.Parse()
	cfg.a.name, cfg.b.name = "A", "B"
	cfg.scenarios = strings.Split(scenarios, ",")

	if err := cfg.check(); err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	if err := ensureProject(ctx, &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		os.Exit(1)
	}
	failed := false
	for _, s := range cfg.scenarios {
		var ok bool
		switch s {
		case "restart":
			ok = runRestart(ctx, &cfg)
		case "kill":
			ok = runKill(ctx, &cfg)
		}
		failed = failed || !ok
	}
	if failed {
		os.Exit(1)
	}
}

func (cfg *config) check() error {
	if cfg.a.base == "" || cfg.b.base == "" {
		return fmt.Errorf("-a and -b (the replicas' base URLs) are required")
	}
	if cfg.token == "" {
		return fmt.Errorf("-token or $STRATA_TOKEN is required")
	}
	for _, s := range cfg.scenarios {
		switch s {
		case "restart":
			if cfg.hookPGRestart == "" || cfg.hookPGIsReady == "" {
				return fmt.Errorf("restart needs -hook-pg-restart and -hook-pg-isready")
			}
			if cfg.clients < 1 || cfg.shared < 0 || cfg.shared > cfg.clients || cfg.shareGroup < 1 {
				return fmt.Errorf("need 1 ≤ clients, 0 ≤ shared ≤ clients, share-group ≥ 1")
			}
			if cfg.restartAt >= cfg.duration {
				return fmt.Errorf("-restart-at (%v) must come before the end of -duration (%v)", cfg.restartAt, cfg.duration)
			}
		case "kill":
			if cfg.hookKillA == "" || cfg.hookStartA == "" {
				return fmt.Errorf("kill needs -hook-kill-a and -hook-start-a")
			}
			if cfg.locks < 3 {
				return fmt.Errorf("-locks must be at least 3 (one run continues on B, one is force-unlocked, one resumes on A)")
			}
		default:
			return fmt.Errorf("unknown scenario %q (restart, kill)", s)
		}
	}
	return nil
}

// ensureProject creates the project the scenarios write to (200 when it exists already).
func ensureProject(ctx context.Context, cfg *config) error {
	p := newProto(cfg.token, cfg.project, cfg.reqTimeout, newRecorder())
	r := p.call(ctx, &cfg.a, "PUT", "PUT", "/v1/projects/"+cfg.project, nil, nil)
	if r.err != nil {
		return fmt.Errorf("creating project %s: %w", cfg.project, r.err)
	}
	if r.status != 200 && r.status != 201 {
		return fmt.Errorf("creating project %s: %d %s", cfg.project, r.status, snippet(r.body))
	}
	return nil
}

// hook runs one of the script's hook programs and returns its combined output.
func hook(ctx context.Context, path string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", path, err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// verdict prints a scenario's summary line and reports whether it passed.
func verdict(name string, failures []string, summary string) bool {
	if len(failures) == 0 {
		fmt.Printf("PASS %s: %s\n", name, summary)
		return true
	}
	fmt.Printf("FAIL %s: %s\n", name, summary)
	for _, f := range failures {
		fmt.Printf("  failed: %s\n", f)
	}
	return false
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
