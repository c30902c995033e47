package server

import (
	"context"
	"fmt"

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
