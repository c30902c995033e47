package secret

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/fault"
)

// ErrNoKey is a request that needs encryption on a server started without a key: a secret
// category, an encrypted project, a sealed value read. It names the flag that fixes it.
var ErrNoKey = errors.New("this strata server has no encryption key: start every replica with --encryption-key-file FILE (env STRATA_ENCRYPTION_KEY_FILE; docs/security.md)")

// Fault turns the package's errors into the API's: keys the database references and this
// replica lacks are a 503 with reason "keys" naming them (the replica is not ready either);
// no key is a 409 (the server's configuration conflicts with the request); a missing key a
// 503 naming the key id (another replica, or this one restarted with the key file, can
// serve it); a value that does not open a 500 (an integrity failure: logged, never shown).
// Other errors pass unchanged.
func Fault(err error) error {
	var missing *MissingKeysError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &missing):
		return fault.Unavailable(fault.ReasonKeys, err, "%s", missing.Error())
	case errors.Is(err, ErrNoKey):
		return fault.Wrap(fault.KindConflict, err, "%s", ErrNoKey.Error())
	case errors.Is(err, ErrMissingKey):
		return fault.Wrap(fault.KindUnavailable, err, "%s", err.Error())
	case errors.Is(err, ErrTampered):
		return fault.Wrap(fault.KindInternal, err, "an encrypted value does not open")
	}
	return err
}

// Require is nil when the ring may seal and open values: a MissingKeysError when the last
// key check found keys the database references that the ring lacks (checked first: a
// replica without any key on a database that references keys must say which), ErrNoKey
// when the ring holds no key (a server without key files).
func (r *Keyring) Require() error {
	if ids := r.Missing(); len(ids) > 0 {
		return &MissingKeysError{IDs: ids}
	}
	if len(r.list()) == 0 {
		return ErrNoKey
	}
	return nil
}

// LoadKeyring reads the key files in order (the first encrypts). No files: nil, no error.
func LoadKeyring(files []string) (*Keyring, error) {
	return LoadKeys(context.Background(), nil, files)
}

// KeyCommandTimeout bounds a key command (a KMS call).
const KeyCommandTimeout = 30 * time.Second

// KeyFromCommand runs command with /bin/sh -c and reads a key from its standard output (32
// bytes, base64, as in a key file): a key kept in a KMS or a secret manager, fetched at start
// and never written to disk by strata (what OpenTofu's external key provider does). A
// command that fails, times out or prints anything else is an error carrying its standard
// error's first line.
func KeyFromCommand(ctx context.Context, command string) (Key, error) {
	ctx, cancel := context.WithTimeout(ctx, KeyCommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		first, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
		if ctx.Err() != nil {
			err = fmt.Errorf("no key within %s", KeyCommandTimeout)
		}
		return Key{}, fmt.Errorf("encryption key command %q: %v: %s", command, err, first)
	}
	k, err := parseKey(stdout.String())
	if err != nil {
		return Key{}, fmt.Errorf("encryption key command %q: its output %w", command, err)
	}
	return k, nil
}

// LoadKeys makes the keyring of key commands' keys (first, in order: a KMS key is what a
// deployment that has one encrypts with) and key files' keys (in order). None: nil.
func LoadKeys(ctx context.Context, commands, files []string) (*Keyring, error) {
	if len(files) == 0 && len(commands) == 0 {
		return nil, nil
	}
	keys := make([]Key, 0, len(files)+len(commands))
	for _, c := range commands {
		k, err := KeyFromCommand(ctx, c)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	for _, f := range files {
		k, err := ReadKeyFile(f)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return NewKeyring(keys...)
}

// DefaultKeyFile is the key file the embedded default creates in its data directory.
const DefaultKeyFile = "encryption-key"

// EnsureKeyFile returns the path of dir's key file, creating a new random key there
// (mode 0600) when there is none; created says whether it did.
func EnsureKeyFile(dir string) (path string, created bool, err error) {
	path = filepath.Join(dir, DefaultKeyFile)
	if _, err := os.Stat(path); err == nil {
		return path, false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", false, fmt.Errorf("encryption key file: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", false, err
	}
	if _, err := GenerateKeyFile(path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return path, false, nil // another process made it first
		}
		return "", false, err
	}
	return path, true, nil
}
