package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// newGPGHome makes a throwaway GnuPG home with one key without a passphrase, for
// t@example.invalid, and returns it. Debian's gpg must be on PATH: the test fails without
// it rather than skip, so that CI (.ci/run installs gnupg) cannot pass without running it.
// The home is under os.TempDir, not t.TempDir: gpg-agent's socket path must stay short. The
// agent is stopped at cleanup.
func newGPGHome(t *testing.T) string {
	t.Helper()
	_, err := exec.LookPath("gpg")
	require.NoError(t, err, "Debian's gnupg must be installed (apt-get install gnupg)")
	home, err := os.MkdirTemp("", "g")
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = exec.Command("gpgconf", "--homedir", home, "--kill", "gpg-agent").Run()
		_ = os.RemoveAll(home)
	})
	require.NoError(t, os.Chmod(home, 0o700))
	gpgRun(t, home, "", "--batch", "--passphrase", "", "--quick-gen-key", "strata test <t@example.invalid>", "default", "default", "never")
	return home
}

// gpgRun runs gpg with home and stdin and returns its stdout.
func gpgRun(t *testing.T, home, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("gpg", append([]string{"--homedir", home}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "gpg %v: %s", args, errOut.String())
	return out.String()
}

// blockScalar indents an armored message under key as a YAML literal block scalar.
func blockScalar(key, armored string, indent int) string {
	pad := strings.Repeat(" ", indent)
	lines := strings.Split(strings.TrimRight(armored, "\n"), "\n")
	return key + ": |\n" + pad + strings.Join(lines, "\n"+pad) + "\n"
}

// TestDecryptPGP (issue 22): a value encrypted with a real key and pasted into an SLS file
// as a block scalar is found and decrypted with real gpg, once per distinct message, keyed
// as the server's reader matches it; a message for a key the home lacks fails naming the
// file, the line and gpg's reason; a missing home is named.
func TestDecryptPGP(t *testing.T) {
	t.Parallel()
	home := newGPGHome(t)
	armored := gpgRun(t, home, "hunter2 \"quoted\"\n", "--batch", "--armor", "--encrypt", "--trust-model", "always", "-r", "t@example.invalid")
	files := map[string]string{
		"top.sls":   "base:\n  '*':\n    - db\n",
		"db.sls":    "db:\n  user: app\n" + blockScalar("  password", armored, 4) + blockScalar("  again", armored, 6),
		"plain.sls": "a: 1\n",
	}
	got, err := decryptPGP(context.Background(), home, files)
	require.NoError(t, err)
	require.Len(t, got, 1, "the same message twice is decrypted once")
	for k, v := range got {
		require.Equal(t, strings.TrimSpace(strings.ReplaceAll(armored, "\r\n", "\n")), k, "keyed by the armor as the file holds it, indentation removed")
		require.Equal(t, "hunter2 \"quoted\"\n", v, "gpg's output as it is: the server removes the ending newlines as Salt does")
	}

	none, err := decryptPGP(context.Background(), home, map[string]string{"a.sls": "a: 1\n"})
	require.NoError(t, err)
	require.Empty(t, none)

	other := newGPGHome(t) // holds no key for the message
	_, err = decryptPGP(context.Background(), other, files)
	require.Error(t, err)
	require.Contains(t, err.Error(), "db.sls:4: ")
	require.Contains(t, err.Error(), "could not decrypt")
	require.Contains(t, err.Error(), "gpg: ", "gpg's own reason")

	_, err = decryptPGP(context.Background(), home+"-missing", files)
	require.ErrorContains(t, err, "--gpg-homedir")
}

// TestDecryptPGPWithoutGPG: without gpg on PATH the error says what to install. Not
// parallel: it sets PATH.
func TestDecryptPGPWithoutGPG(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	files := map[string]string{"db.sls": "password: |\n  -----BEGIN PGP MESSAGE-----\n  abc\n  -----END PGP MESSAGE-----\n"}
	_, err := decryptPGP(context.Background(), t.TempDir(), files)
	require.ErrorContains(t, err, "install Debian's gnupg")
}

// TestCleartextRemote: plain HTTP to another machine is warned about, loopback and HTTPS
// are not.
func TestCleartextRemote(t *testing.T) {
	t.Parallel()
	for server, want := range map[string]bool{
		"http://strata.example:7400": true,
		"http://10.0.0.5:7400":       true,
		"http://127.0.0.1:7400":      false,
		"http://[::1]:7400":          false,
		"http://localhost:7400":      false,
		"https://strata.example":     false,
	} {
		require.Equal(t, want, cleartextRemote(server), server)
	}
}
