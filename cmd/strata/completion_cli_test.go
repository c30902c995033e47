package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCompletionAndManPages is item 8 of issue 29 through the real binary: `strata
// completion SHELL` prints a script for each shell (bash's is one bash itself accepts), the
// dynamic completion offers the contexts' names, and `strata docs man DIR` writes pages that
// man renders.
func TestCompletionAndManPages(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		out, err := cli(t, nil, "completion", shell)
		require.NoError(t, err, shell)
		require.Greater(t, len(out), 1000, "%s completion is a script", shell)
		require.Contains(t, out, "strata", shell)
	}
	script, err := cli(t, nil, "completion", "bash")
	require.NoError(t, err)
	require.Contains(t, script, "__start_strata")
	if bash, err := exec.LookPath("bash"); err == nil {
		file := filepath.Join(t.TempDir(), "strata.bash")
		require.NoError(t, os.WriteFile(file, []byte(script), 0o600))
		out, err := exec.Command(bash, "-c", "source "+file+" && complete -p strata").CombinedOutput()
		require.NoError(t, err, string(out))
		require.Contains(t, string(out), "__start_strata strata", "bash registers the completion")
	}

	// What the script calls: command names, then the names of the contexts.
	env := []string{"XDG_CONFIG_HOME=" + t.TempDir()}
	out, err := cli(t, env, "__complete", "config", "")
	require.NoError(t, err)
	require.Contains(t, out, "use-context")
	_, err = cli(t, env, "config", "set-context", "prod", "--server", "https://strata.example")
	require.NoError(t, err)
	out, err = cli(t, env, "__complete", "config", "use-context", "")
	require.NoError(t, err)
	require.Contains(t, out, "prod\thttps://strata.example")
	out, err = cli(t, env, "__complete", "--context", "")
	require.NoError(t, err)
	require.Contains(t, out, "prod\t")

	dir := filepath.Join(t.TempDir(), "man1")
	out, err = cli(t, nil, "docs", "man", dir)
	require.NoError(t, err)
	require.Regexp(t, `^\d+ man pages written to `, out)
	for _, page := range []string{"strata.1", "strata-state-delete.1", "strata-config-set-context.1", "strata-node-create.1", "strata-completion-bash.1"} {
		b, err := os.ReadFile(filepath.Join(dir, page))
		require.NoError(t, err, page)
		require.True(t, strings.HasPrefix(string(b), ".nh\n.TH "), page)
	}
	if man, err := exec.LookPath("man"); err == nil {
		cmd := exec.Command(man, "-l", filepath.Join(dir, "strata-node-create.1"))
		cmd.Env = append(os.Environ(), "MANPAGER=cat", "PAGER=cat", "MANWIDTH=100")
		out, err := cmd.Output()
		require.NoError(t, err)
		require.Contains(t, string(out), "strata node create web01 --org acme", "man shows the examples")
	}
}
