package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/keyref"
	"github.com/stratahq/strata/internal/secret"
)

// loadKeys reads the key-encryption keys. The embedded default makes its own key file in the
// data directory on first start (docs/security.md: back it up apart from the data) — but
// never while the database already references keys (keyref.Referenced): a data dir restored
// from a backup holds values sealed under the installation's key, and a fresh key would come
// up serving none of them and sealing new ones under a key that exists only there. Then the
// start fails naming the ids and the flags. A server on a database given by URL has keys only
// when given key files or commands, because replicas sharing a database must share the keys
// and none of them can invent them alone. No key: secret.NoKeys(), never nil.
func loadKeys(ctx context.Context, cfg Config, d *db.DB) (*secret.Keyring, error) {
	files := cfg.EncryptionKeyFiles
	if len(files) == 0 && len(cfg.EncryptionKeyCommands) == 0 && cfg.DatabaseURL == "" {
		path := filepath.Join(cfg.DataDir, secret.DefaultKeyFile)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			refs, err := keyref.Referenced(ctx, d)
			if err != nil {
				return nil, fmt.Errorf("encryption keys: read the keys the database references: %w", err)
			}
			if len(refs) > 0 {
				return nil, fmt.Errorf("the database holds values sealed under encryption key %s, and this data directory has no key file (%s): "+
					"strata does not make a new key over them. Start with --encryption-key-file FILE (or --encryption-key-command CMD) "+
					"giving the key(s) of the installation this data came from, or copy its key file to %s (docs/operations.md, \"Keys as facts\")",
					strings.Join(refs, ", "), path, path)
			}
		}
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
	if keys == nil {
		keys = secret.NoKeys()
	}
	return keys, nil
}

// CheckKeys compares the key ids the database's sealed values are recorded under
// (keyref.Referenced: one read of a small table) with the keys the replica holds, and records
// what is missing in keys: while anything is, every secret read and write on the replica is a
// 503 naming the ids (secret.MissingKeysError), and CheckKeys returns the readiness error —
// a 503 with reason "keys" naming the ids and the flags. Holding every referenced key, old
// and new during a rotation, is what makes the replica ready.
//
// It is re-run on every readiness probe, every keyCheckInterval, and whenever the keys may
// have changed (a reload of the key files re-runs it on the new keyring), so another replica's
// first value sealed under a key this one lacks turns this one not ready too. A database that
// cannot be read leaves the last finding in place and returns the database's error.
func CheckKeys(ctx context.Context, d *db.DB, keys *secret.Keyring) error {
	refs, err := keyref.Referenced(ctx, d)
	if err != nil {
		return fmt.Errorf("encryption keys: %w", err)
	}
	missing := keyref.Missing(refs, keys.IDs())
	keys.SetMissing(missing)
	if len(missing) > 0 {
		return fault.Unavailable(fault.ReasonKeys, nil, "%s", (&secret.MissingKeysError{IDs: missing}).Error())
	}
	return nil
}

// keyCheckInterval is how often a replica re-checks its keys against the database when no
// readiness probe does it more often: one read of a table with a row per key, cheap enough
// to keep the window in which another replica's first value under a new key goes unnoticed
// to a second.
const keyCheckInterval = time.Second

// keyCheckLoop re-runs CheckKeys until ctx ends, logging each change of what is missing.
func keyCheckLoop(ctx context.Context, d *db.DB, keys *secret.Keyring, logger *slog.Logger) {
	t := time.NewTicker(keyCheckInterval)
	defer t.Stop()
	last := keys.Missing()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_ = CheckKeys(ctx, d, keys) // a database away leaves the finding as it was; readiness says why
		if now := keys.Missing(); !slices.Equal(now, last) {
			if len(now) > 0 {
				logger.Error("not ready: the database references encryption keys this replica lacks; secret reads and writes are refused until it is restarted with them",
					"missing", now, "held", keys.IDs())
			} else {
				logger.Info("every encryption key the database references is held again", "held", keys.IDs())
			}
			last = now
		}
	}
}

// keyRecord is the database's record of referenced keys as the API's key status and
// rotation use it (httpapi.KeyRecord): a prune re-runs the key check at once, so a replica
// waiting for an old key to be retired is ready as soon as no value needs it.
type keyRecord struct {
	d      *db.DB
	keys   *secret.Keyring
	logger *slog.Logger
}

func (k keyRecord) Referenced(ctx context.Context) ([]string, error) {
	return keyref.Referenced(ctx, k.d)
}

// Prune tidies the record. A prune that cannot run now — writers of secret values held the
// record past keyref.PruneLockTimeout, or the database refuses writes (a standby) — prunes
// nothing rather than fail the key status: the key then still shows referenced, and the next
// `strata keys status` tries again.
func (k keyRecord) Prune(ctx context.Context) ([]string, error) {
	removed, err := keyref.Prune(ctx, k.d)
	if errors.Is(err, keyref.ErrPruneBusy) || errors.Is(err, db.ErrReadOnly) {
		k.logger.WarnContext(ctx, "the record of referenced encryption keys was not tidied now", "err", err)
		return nil, nil
	}
	if err != nil || len(removed) == 0 {
		return removed, err
	}
	k.logger.InfoContext(ctx, "no value references these encryption keys any more; dropped from the record", "keys", removed)
	_ = CheckKeys(ctx, k.d, k.keys)
	return removed, nil
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
	if ring == nil || ring.Primary() == "" {
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
