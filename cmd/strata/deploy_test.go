package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDeployKit (issue 18, item 4): the Debian package builds (deploy/build-deb.sh, with
// dpkg-deb), carries the binary with its version stamped, the systemd unit and the
// environment file; the unit passes `systemd-analyze verify` and keeps its hardening; the
// container image definition runs strata as a non-root user with a health check.
func TestDeployKit(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	_, err = exec.LookPath("dpkg-deb")
	require.NoError(t, err, "dpkg-deb builds the Debian package (Debian: the dpkg package, always installed)")

	out := t.TempDir()
	cmd := exec.Command("bash", filepath.Join(root, "deploy", "build-deb.sh"), out)
	cmd.Env = append(os.Environ(), "VERSION=9.9.9-ci")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	deb := strings.TrimSpace(string(b[strings.LastIndex(strings.TrimSpace(string(b)), "\n")+1:]))
	require.FileExists(t, deb)
	info, err := exec.Command("dpkg-deb", "--field", deb, "Package", "Version").CombinedOutput()
	require.NoError(t, err, "%s", info)
	require.Contains(t, string(info), "Package: strata")
	require.Contains(t, string(info), "Version: 9.9.9-ci")
	files, err := exec.Command("dpkg-deb", "--contents", deb).CombinedOutput()
	require.NoError(t, err, "%s", files)
	for _, f := range []string{"./usr/bin/strata", "./lib/systemd/system/strata.service", "./etc/strata/strata.env"} {
		require.Contains(t, string(files), f)
	}
	// Every directory entry, the root ("./") first, is drwxr-xr-x root/root (issue 28, item 6:
	// the root entry was drwx------, mktemp's mode).
	for _, line := range strings.Split(strings.TrimSpace(string(files)), "\n") {
		if f := strings.Fields(line); len(f) >= 6 && strings.HasPrefix(f[0], "d") {
			require.Equal(t, "drwxr-xr-x root/root", f[0]+" "+f[1], "directory entry %s", f[len(f)-1])
		}
	}
	require.Regexp(t, `^drwxr-xr-x root/root .* \./$`, strings.SplitN(string(files), "\n", 2)[0], "the package's root entry")
	unpacked := t.TempDir()
	require.NoError(t, exec.Command("dpkg-deb", "-x", deb, unpacked).Run())
	bin := filepath.Join(unpacked, "usr", "bin", "strata")
	v, err := exec.Command(bin, "version").CombinedOutput()
	require.NoError(t, err, "%s", v)
	require.Regexp(t, `^strata 9\.9\.9-ci \(([0-9a-f]+|unknown)\) \(schema version \d+\)`, string(v), "the stamped version")

	unit, err := os.ReadFile(filepath.Join(root, "deploy", "strata.service"))
	require.NoError(t, err)
	for _, want := range []string{"DynamicUser=yes", "StateDirectory=strata", "ProtectSystem=strict", "NoNewPrivileges=yes",
		"Restart=on-failure", "EnvironmentFile=-/etc/strata/strata.env", "ExecStart=/usr/bin/strata serve",
		"ExecReload=/bin/kill -HUP $MAINPID",
		// Issue 28: secrets reach the dynamic user as credentials (names serve looks for), and
		// a missing one is skipped (a name, not an absolute path, which would be fatal).
		"\nLoadCredential=strata-tls-cert\n", "\nLoadCredential=strata-tls-key\n",
		"\nLoadCredential=strata-encryption-key\n", "\nLoadCredential=strata-encryption-key-previous\n"} {
		require.Contains(t, string(unit), want)
	}
	// systemd-analyze verify runs, never skipped (issue 28): .ci/run installs Debian's systemd
	// when it is missing.
	sa, err := exec.LookPath("systemd-analyze")
	require.NoError(t, err, "systemd-analyze verifies the unit (Debian: apt-get install systemd; .ci/run does)")
	verify := filepath.Join(t.TempDir(), "strata.service")
	require.NoError(t, os.WriteFile(verify, []byte(strings.ReplaceAll(string(unit), "/usr/bin/strata", bin)), 0o644))
	vout, err := exec.Command(sa, "verify", verify).CombinedOutput()
	require.NoError(t, err, "systemd-analyze verify: %s", vout)
	require.NotContains(t, string(vout), "Unknown key", "every directive is known to this systemd: %s", vout)
	require.NotContains(t, string(vout), "Failed to parse", "every directive parses: %s", vout)

	docker, err := os.ReadFile(filepath.Join(root, "deploy", "Dockerfile"))
	require.NoError(t, err)
	for _, re := range []string{`(?m)^FROM \S+:\S+ AS build$`, `(?m)^FROM debian:\S+-slim$`, `(?m)^USER [1-9][0-9]*`, `(?m)^HEALTHCHECK .*\n?.*/healthz`,
		`(?m)^ENTRYPOINT \["/usr/bin/strata"\]`, `cli\.Version=\$\{VERSION\}`} {
		require.Regexp(t, regexp.MustCompile(re), string(docker))
	}
	require.NotContains(t, string(docker), ":latest", "base images are pinned to a release")
}

// TestDebVersionsSort (issue 28, item 6): package versions were 0.0.0+<hash> — or the bare
// hash when it started with a digit, so 5f56e8c sorted after 0.0.0+e83ce32 whatever the
// commits' order — and apt could not tell an upgrade from a downgrade. deploy/build-deb.sh now
// derives 0.0.0~git<commit time UTC>.<hash> (or the tag, or <tag>+git<time>.<hash> after one);
// here it runs in a scratch repository on consecutive commits and dpkg --compare-versions
// orders them as committed, tagged releases after their snapshots.
func TestDebVersionsSort(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	repo := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "deploy"), 0o755))
	script, err := os.ReadFile(filepath.Join(root, "deploy", "build-deb.sh"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(repo, "deploy", "build-deb.sh"), script, 0o755))
	run := func(env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = repo
		cmd.Env = append(append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@localhost", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@localhost", "GIT_CONFIG_GLOBAL=/dev/null", "TZ=Europe/Berlin"), env...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s %v: %s", name, args, out)
		return strings.TrimSpace(string(out))
	}
	run(nil, "git", "init", "-q")
	commit := func(when string) string {
		t.Helper()
		require.NoError(t, os.WriteFile(filepath.Join(repo, "change"), []byte(when), 0o644))
		run(nil, "git", "add", "-A")
		run([]string{"GIT_AUTHOR_DATE=" + when, "GIT_COMMITTER_DATE=" + when}, "git", "commit", "-q", "-m", when)
		return run(nil, "bash", "deploy/build-deb.sh", "--print-version")
	}
	less := func(a, b string) {
		t.Helper()
		require.NoError(t, exec.Command("dpkg", "--compare-versions", a, "lt", b).Run(), "dpkg orders %s before %s", a, b)
	}
	// A whole day of commits one second apart would be slow; consecutive seconds, a day
	// boundary in UTC (not in the committer's zone), and a month apart are the cases.
	var versions []string
	for _, when := range []string{"2026-11-25T23:59:58Z", "2026-11-25T23:59:59Z", "2026-11-26T00:00:00Z", "2026-12-26T09:30:00+01:00"} {
		versions = append(versions, commit(when))
	}
	require.Regexp(t, `^0\.0\.0~git20261125235958\.[0-9a-f]{12}$`, versions[0])
	require.Regexp(t, `^0\.0\.0~git20261226083000\.[0-9a-f]{12}$`, versions[3], "the commit time in UTC")
	for i := 1; i < len(versions); i++ {
		less(versions[i-1], versions[i])
	}
	run(nil, "git", "tag", "v1.0.0")
	tagged := run(nil, "bash", "deploy/build-deb.sh", "--print-version")
	require.Equal(t, "1.0.0", tagged)
	less(versions[len(versions)-1], tagged)
	after := commit("2026-12-27T00:00:00Z")
	require.Regexp(t, `^1\.0\.0\+git20261227000000\.[0-9a-f]{12}$`, after)
	less(tagged, after)
	less(after, "1.0.1")

	cmd := exec.Command("bash", "deploy/build-deb.sh", "--print-version")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "VERSION=dev")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "a version that does not start with a digit is refused, not mangled")
	require.Contains(t, string(out), "does not start with a digit")

	// A bare hash starting with a digit is a Debian version, but one that does not sort
	// (5f56e8c > 0.0.0+e83ce32): refused too.
	cmd = exec.Command("bash", "deploy/build-deb.sh", "--print-version")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "VERSION=5f56e8c")
	out, err = cmd.CombinedOutput()
	require.Error(t, err, "a bare hash is refused: %s", out)
	require.Contains(t, string(out), "bare commit hash")
}

// TestDockerKit (issue 28, item 6): the image had no .dockerignore (the whole checkout, .git
// and any secret in it, went to the daemon) and Docker's 10 s stop was shorter than strata's
// shutdown. The context is filtered — every package `go build ./cmd/strata` reads stays in
// it, the history, build output and secret files do not — and the documented stop timeout
// exceeds twice --shutdown-timeout's default (the HTTP drain, then the embedded PostgreSQL's
// stop, each bounded by it).
func TestDockerKit(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	require.NoError(t, err, "the build context (the repository root) is filtered")
	var patterns []string
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, strings.TrimPrefix(line, "/"))
		}
	}
	// Docker's rules, as far as these patterns use them: a pattern matches the path from the
	// context root (and a directory everything under it); "**/" matches at any depth.
	excluded := func(path string) bool {
		for _, p := range patterns {
			if rest, ok := strings.CutPrefix(p, "**/"); ok {
				if m, _ := filepath.Match(rest, filepath.Base(path)); m {
					return true
				}
				continue
			}
			if m, _ := filepath.Match(p, path); m || strings.HasPrefix(path, p+"/") {
				return true
			}
		}
		return false
	}
	for _, out := range []string{".git", ".git/config", "dist/strata_1_amd64.deb", "strata", "etc/tls/key.pem", "encryption-key", "deploy/admin-token", "x/encryption-key-2026"} {
		require.True(t, excluded(out), "%s stays out of the build context", out)
	}
	goList := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{range .EmbedFiles}} {{$.Dir}}/{{.}}{{end}}{{end}}", "./cmd/strata")
	goList.Dir = root
	list, err := goList.Output()
	require.NoError(t, err)
	need := []string{"go.mod", "go.sum"}
	for _, f := range strings.Fields(string(list)) {
		if rel, err := filepath.Rel(root, f); err == nil && !strings.HasPrefix(rel, "..") {
			need = append(need, rel)
		}
	}
	require.Greater(t, len(need), 20)
	for _, in := range need {
		require.False(t, excluded(in), "%s is needed by the build and must stay in the context", in)
	}

	docker, err := os.ReadFile(filepath.Join(root, "deploy", "Dockerfile"))
	require.NoError(t, err)
	require.Regexp(t, `(?m)^STOPSIGNAL SIGTERM$`, string(docker))
	ops, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	require.NoError(t, err)
	for _, text := range []string{string(docker), string(ops)} {
		for _, re := range []string{`--stop-timeout (\d+)`, `docker stop -t (\d+)`, `stop_grace_period: (\d+)s`} {
			m := regexp.MustCompile(re).FindStringSubmatch(text)
			require.NotNil(t, m, "%s is documented", re)
			n, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			require.Greater(t, n, 2*30, "%s exceeds twice the 30 s --shutdown-timeout", m[0])
		}
	}
}

// TestPatroniDaemonsStop (issue 28): deploy/patroni/failover.sh collected the pid of the
// `runuser` wrapper it started etcd and Patroni through (as root) and signalled only that, so
// the daemons outlived the script and the next run failed ("No Patroni leader"). Its daemons
// now start through deploy/patroni/daemons.sh, in process groups of their own that are
// stopped whole; here a daemon that forks, started as failover.sh starts etcd and Patroni
// (through runuser when the test runs as root) and as it starts strata, leaves nothing behind.
func TestPatroniDaemonsStop(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	script, err := os.ReadFile(filepath.Join(root, "deploy", "patroni", "failover.sh"))
	require.NoError(t, err)
	require.NotContains(t, string(script), "pids+=($!)", "no daemon is tracked by its wrapper's pid")
	for _, d := range []string{"start_daemon_as_pg \"$work/etcd.log\" etcd", "start_daemon_as_pg \"$work/$m.log\" patroni", "start_daemon \"$work/strata-$r.log\" \"$work/strata\" serve"} {
		require.Contains(t, string(script), d)
	}

	mark := 40000 + os.Getpid()%20000 // sleep durations no other process uses
	markers := regexp.MustCompile(fmt.Sprintf(`^sleep (%d|%d|%d|%d)$`, mark, mark+1, mark+2, mark+3))
	logs := t.TempDir()
	require.NoError(t, os.Chmod(logs, 0o777))
	sh := fmt.Sprintf(`set -euo pipefail
. deploy/patroni/daemons.sh
start_daemon_as_pg %[1]s/a.log sh -c 'sleep %[2]d & exec sleep %[3]d'
start_daemon %[1]s/b.log sh -c 'echo "token=$STRATA_BOOTSTRAP_TOKEN"; sleep %[4]d & exec sleep %[5]d'
echo started
read -r _
stop_daemons
`, logs, mark, mark+1, mark+2, mark+3)
	cmd := exec.Command("bash", "-c", sh)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "STRATA_BOOTSTRAP_TOKEN=passed-on")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool { return len(processesMatching(markers)) == 4 }, 10*time.Second, 50*time.Millisecond,
		"the daemons and their children run: %s", out.String())
	_, err = stdin.Write([]byte("stop\n"))
	require.NoError(t, err)
	require.NoError(t, cmd.Wait(), "%s", out.String())
	require.Empty(t, processesMatching(markers), "no process of the daemons is left")
	b, err := os.ReadFile(filepath.Join(logs, "b.log"))
	require.NoError(t, err)
	require.Contains(t, string(b), "token=passed-on", "the environment reaches the daemon")
}

// processesMatching lists the live processes whose command line matches re.
func processesMatching(re *regexp.Regexp) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && re.MatchString(strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))) && processAlive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}
