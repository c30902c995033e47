package server

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"

	"github.com/stratahq/strata/internal/secret"
)

// loadKeys reads the key-encryption keys. The embedded default makes its own key file in the
// data directory on first start (docs/security.md: back it up apart from the data); a server
// on a database given by URL has keys only when given key files, because replicas sharing a
// database must share the keys and none of them can invent them alone.
func loadKeys(ctx context.Context, cfg Config) (*secret.Keyring, error) {
	files := cfg.EncryptionKeyFiles
	if len(files) == 0 && len(cfg.EncryptionKeyCommands) == 0 && cfg.DatabaseURL == "" {
		path, created, err := secret.EnsureKeyFile(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		if created {
			cfg.Logger.Warn("created an encryption key; back it up apart from the data directory's backups (docs/security.md)", "file", path)
		}
		files = []string{path}
	}
	keys, err := secret.LoadKeys(ctx, cfg.EncryptionKeyCommands, files)
	if err != nil {
		return nil, fmt.Errorf("encryption keys: %w", err)
	}
	return keys, nil
}

// GenerateKeyFile writes a new random key-encryption key to path (mode 0600, never
// overwriting) and returns its key id: `strata keys generate`, which needs no server.
func GenerateKeyFile(path string) (string, error) {
	k, err := secret.GenerateKeyFile(path)
	return k.ID, err
}

// ReloadKeys re-reads the key commands and key files at their configured paths (SIGHUP) into
// ring, the keyring every service of the replica holds, and logs what changed: keys added,
// keys removed, the primary key. It never mints a key (the embedded default's file is read
// at <data-dir>/encryption-key, not created), and a key that does not load keeps the ring as
// it was, logged: a reload never leaves a replica with fewer keys by accident of a half-written
// file. A replica started without any key has no configured source; there is nothing to
// re-read (a key given later needs a restart with the flag). This is the one place a running
// replica's keys change, so checks of the keys against the database belong after it.
func ReloadKeys(ctx context.Context, cfg Config, ring *secret.Keyring, logger *slog.Logger) error {
	if ring == nil {
		logger.Info("reload: no encryption key configured; nothing to re-read (--encryption-key-file needs a restart)")
		return nil
	}
	files := cfg.EncryptionKeyFiles
	if len(files) == 0 && len(cfg.EncryptionKeyCommands) == 0 && cfg.DatabaseURL == "" {
		files = []string{filepath.Join(cfg.DataDir, secret.DefaultKeyFile)}
	}
	next, err := secret.LoadKeys(ctx, cfg.EncryptionKeyCommands, files)
	if err == nil && next == nil {
		err = fmt.Errorf("no key")
	}
	if err != nil {
		logger.Warn("reload: encryption keys do not load; keeping the previous ones", "keys", ring.IDs(), "err", err)
		return fmt.Errorf("encryption keys: %w", err)
	}
	before, after := ring.IDs(), next.IDs()
	var added, removed []string
	for _, id := range after {
		if !slices.Contains(before, id) {
			added = append(added, id)
		}
	}
	for _, id := range before {
		if !slices.Contains(after, id) {
			removed = append(removed, id)
		}
	}
	ring.Replace(next)
	if len(added) == 0 && len(removed) == 0 && before[0] == after[0] {
		logger.Info("reload: encryption keys unchanged", "primary", after[0], "keys", after)
		return nil
	}
	logger.Info("reload: encryption keys changed", "primary", after[0], "previous_primary", before[0], "keys", after, "added", added, "removed", removed)
	return nil
}
