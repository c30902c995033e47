package server_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/server"
)

// TestBackupFileIsOwnerOnly is finding 8(d) of issue 27: `strata backup create` wrote its
// file 0644 (pg_dump creates it under the umask), readable by every local user, though it
// holds token hashes, plaintext pillars and the audit log. A new file, a file that was there
// with 0644, and a symbolic link at the path all end as a regular file of mode 0600 — the
// link replaced, never written through — and a failed backup leaves nothing behind. Seen
// failing (0644, the link's target overwritten) before the fix.
func TestBackupFileIsOwnerOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A permissive umask for this process's files makes the fix visible whatever the
	// machine's default; the backup must not depend on it.
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	cfg := server.Config{DatabaseURL: pgtest.NewDatabaseURL(t), Logger: slog.New(slog.DiscardHandler), DataDir: t.TempDir()}
	dir := t.TempDir()

	fresh := filepath.Join(dir, "fresh.backup")
	_, err := server.Backup(ctx, server.BackupOptions{Config: cfg}, fresh)
	require.NoError(t, err)
	requireOwnerOnly(t, fresh)

	existing := filepath.Join(dir, "existing.backup")
	require.NoError(t, os.WriteFile(existing, []byte("old"), 0o644))
	require.NoError(t, os.Chmod(existing, 0o644))
	_, err = server.Backup(ctx, server.BackupOptions{Config: cfg}, existing)
	require.NoError(t, err)
	requireOwnerOnly(t, existing)

	target := filepath.Join(dir, "elsewhere")
	require.NoError(t, os.WriteFile(target, []byte("not a backup"), 0o644))
	link := filepath.Join(dir, "link.backup")
	require.NoError(t, os.Symlink(target, link))
	_, err = server.Backup(ctx, server.BackupOptions{Config: cfg}, link)
	require.NoError(t, err)
	requireOwnerOnly(t, link)
	b, err := os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, "not a backup", string(b), "the backup was written through the link")

	// A backup that fails (pg_dump stops: the context ends while it runs) leaves no file,
	// and no temporary one.
	cctx, cancel := context.WithCancel(ctx)
	_, err = server.Backup(cctx, server.BackupOptions{Config: cfg, Progress: func(int, int) { cancel() }}, filepath.Join(dir, "failed.backup"))
	cancel()
	require.Error(t, err)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{"fresh.backup", "existing.backup", "elsewhere", "link.backup"}, names)
}

func requireOwnerOnly(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	require.True(t, fi.Mode().IsRegular(), "%s is %v, not a regular file", path, fi.Mode())
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), path)
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	head := make([]byte, 5)
	_, err = io.ReadFull(f, head)
	require.NoError(t, err)
	require.Equal(t, "PGDMP", string(head), "a pg_dump custom-format file")
}
