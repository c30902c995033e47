package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/stratahq/strata/client"
)

// decryptPGP decrypts every armored PGP message in files (path → content) with gpg and the
// keys in homedir, as Salt's gpg renderer would on the master, and returns the plaintexts
// by armored text (client.NormalizeArmor's form) for the import request. It runs where the
// operator's keys are, so the server never needs gpg or a private key. A message gpg cannot
// decrypt fails the whole import, naming its file and line with gpg's own words: Salt would
// silently serve the ciphertext instead, which is never what an import wants.
func decryptPGP(ctx context.Context, homedir string, files map[string]string) (map[string]string, error) {
	out := map[string]string{}
	var gpg string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		for _, b := range client.FindPGPBlocks([]byte(files[name])) {
			if _, done := out[b.Armored]; done {
				continue
			}
			if gpg == "" {
				var err error
				if gpg, err = findGPG(homedir); err != nil {
					return nil, err
				}
			}
			plain, err := gpgDecrypt(ctx, gpg, homedir, b.Armored)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", name, b.Line, err)
			}
			out[b.Armored] = plain
		}
	}
	return out, nil
}

// findGPG checks, before the first message, that gpg and the homedir are there, so that the
// error says what to install or which flag is wrong rather than how one decryption failed.
func findGPG(homedir string) (string, error) {
	info, err := os.Stat(homedir)
	if err != nil {
		return "", fmt.Errorf("--gpg-homedir: %w", err)
	}
	if !info.IsDir() {
		return "", fmt.Errorf("--gpg-homedir %s is not a directory (it is the GnuPG home holding the private key, e.g. Salt's /etc/salt/gpgkeys)", homedir)
	}
	gpg, err := exec.LookPath("gpg")
	if err != nil {
		return "", errors.New("--gpg-homedir: gpg is not on PATH: install Debian's gnupg (apt-get install gnupg) to decrypt the tree's PGP messages")
	}
	return gpg, nil
}

// gpgDecrypt runs gpg on one armored message, stdin to stdout, without a shell. --batch
// never prompts (a passphrase-protected key must be unlocked in the agent beforehand, as
// Salt's master key must have none), --quiet and --yes keep stderr to the errors.
func gpgDecrypt(ctx context.Context, gpg, homedir, armored string) (string, error) {
	cmd := exec.CommandContext(ctx, gpg, "--homedir", homedir, "--batch", "--quiet", "--yes", "--decrypt")
	cmd.Stdin = strings.NewReader(armored + "\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("gpg --homedir %s could not decrypt the PGP message: %s", homedir, msg)
	}
	if !utf8.Valid(stdout.Bytes()) {
		return "", errors.New("the PGP message decrypts to bytes that are not UTF-8 text, which a pillar value (JSON) cannot hold")
	}
	return stdout.String(), nil
}

// cleartextRemote reports whether server is a plain-HTTP URL to another machine: the
// decrypted secrets would cross the network readable, so the CLI warns before sending them.
// Loopback addresses stay on the machine and are not warned about.
func cleartextRemote(server string) bool {
	u, err := url.Parse(server)
	if err != nil || !strings.EqualFold(u.Scheme, "http") {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}
