package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

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
	unpacked := t.TempDir()
	require.NoError(t, exec.Command("dpkg-deb", "-x", deb, unpacked).Run())
	bin := filepath.Join(unpacked, "usr", "bin", "strata")
	v, err := exec.Command(bin, "version").CombinedOutput()
	require.NoError(t, err, "%s", v)
	require.Regexp(t, `^strata 9\.9\.9-ci \([0-9a-f]+|unknown\) \(schema version \d+\)`, string(v), "the stamped version")

	unit, err := os.ReadFile(filepath.Join(root, "deploy", "strata.service"))
	require.NoError(t, err)
	for _, want := range []string{"DynamicUser=yes", "StateDirectory=strata", "ProtectSystem=strict", "NoNewPrivileges=yes",
		"Restart=on-failure", "EnvironmentFile=-/etc/strata/strata.env", "ExecStart=/usr/bin/strata serve"} {
		require.Contains(t, string(unit), want)
	}
	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		verify := filepath.Join(t.TempDir(), "strata.service")
		require.NoError(t, os.WriteFile(verify, []byte(strings.ReplaceAll(string(unit), "/usr/bin/strata", bin)), 0o644))
		out, err := exec.Command(sa, "verify", verify).CombinedOutput()
		require.NoError(t, err, "systemd-analyze verify: %s", out)
	} else {
		t.Log("systemd-analyze is not on PATH: the unit was checked by its directives only")
	}

	docker, err := os.ReadFile(filepath.Join(root, "deploy", "Dockerfile"))
	require.NoError(t, err)
	for _, re := range []string{`(?m)^FROM \S+:\S+ AS build$`, `(?m)^FROM debian:\S+-slim$`, `(?m)^USER [1-9][0-9]*`, `(?m)^HEALTHCHECK .*\n?.*/healthz`,
		`(?m)^ENTRYPOINT \["/usr/bin/strata"\]`, `cli\.Version=\$\{VERSION\}`} {
		require.Regexp(t, regexp.MustCompile(re), string(docker))
	}
	require.NotContains(t, string(docker), ":latest", "base images are pinned to a release")
}
