package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pgembed"
	"github.com/stratahq/strata/internal/tfstate"
)

// Backup and restore (issue 21): `strata backup create FILE` and `strata backup restore FILE`.
//
// A backup is PostgreSQL's own logical dump (pg_dump, custom format) of strata's schema and
// every Terraform project schema, taken in one snapshot: online (writers go on) and
// consistent (everything as of one instant, every write committed before the dump began is
// in it). It holds everything strata stores — resources, pillars and their history, kinds,
// state versions, tokens (as hashes), the audit log — but not cluster-wide objects: the login
// roles `strata salt credentials` and `strata project credentials` made are made again after
// a restore. Ownership and grants are left out, so a backup restores under any role.

// BackupOptions say where the database is and how to report progress.
type BackupOptions struct {
	Config Config
	// Progress, when set, gets the tables done so far and the total.
	Progress func(done, total int)
}

// pgTool returns the path of one of PostgreSQL's client programs of the machine's server
// binaries (pg_dump, pg_restore).
func pgTool(name string) (string, error) {
	dir, err := pgembed.FindBinaries()
	if err != nil {
		return "", fmt.Errorf("%s is needed (Debian package postgresql): %w", name, err)
	}
	return filepath.Join(dir, name), nil
}

// runningEmbeddedURL returns the socket URL of the embedded cluster a running strata serves
// from dataDir ("" when none runs): the backup connects to it beside the server.
func runningEmbeddedURL(dataDir string) string {
	b, err := os.ReadFile(filepath.Join(dataDir, "pg", "postmaster.pid"))
	if err != nil {
		return ""
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 5 || strings.TrimSpace(lines[4]) == "" {
		return ""
	}
	port, sock := strings.TrimSpace(lines[3]), strings.TrimSpace(lines[4])
	return "postgres://strata@/strata?host=" + url.QueryEscape(sock) + "&port=" + port
}

// backupTarget resolves the database to dump: the configured URL, the embedded cluster a
// running strata serves, or the embedded cluster started for the backup (stopped after).
func backupTarget(ctx context.Context, cfg Config) (*Database, string, error) {
	d, err := OpenBeside(ctx, cfg)
	if err != nil {
		return nil, "", err
	}
	return d, d.URL(), nil
}

// Backup writes a backup of everything strata stores to file.
func Backup(ctx context.Context, opts BackupOptions, file string) (tables int, err error) {
	d, dbURL, err := backupTarget(ctx, opts.Config)
	if err != nil {
		return 0, err
	}
	defer d.Close(context.WithoutCancel(ctx))
	projects, total, err := d.DB.BackupScope(ctx)
	if err != nil {
		return 0, err
	}
	pgDump, err := pgTool("pg_dump")
	if err != nil {
		return 0, err
	}
	// pg_dump would create file under the umask (0644 on most machines), readable by every
	// local user, though a backup holds token hashes, plaintext pillars and the audit log.
	// So the dump goes into a temporary file beside it, which os.CreateTemp makes 0600 from
	// the start, and is renamed over file once complete: a file already there (of any mode)
	// or a symbolic link at the path is replaced, never written through, and a failed dump
	// leaves no partial backup.
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*.partial")
	if err != nil {
		return 0, err
	}
	partial := tmp.Name()
	if err := tmp.Close(); err != nil {
		_ = os.Remove(partial)
		return 0, err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(partial)
		}
	}()
	// Schema patterns in double quotes match exactly (pg_dump reads -n as a pattern).
	args := []string{"--format=custom", "--no-owner", "--no-privileges", "--verbose", "--file", partial, "--schema", `"` + d.DB.Schema() + `"`}
	for _, p := range projects {
		args = append(args, "--schema", `"`+p+`"`)
	}
	args = append(args, "--dbname", dbURL)
	done, err := runWithProgress(ctx, pgDump, args, "dumping contents of table", total, opts.Progress)
	if err == nil {
		// A backup cancelled (Ctrl-C, shutdown) is not a backup, even when pg_dump happened to
		// finish before it was stopped: the caller was told it failed, so no file is left.
		err = ctx.Err()
	}
	if err != nil {
		return 0, err
	}
	if err = os.Rename(partial, file); err != nil {
		return 0, err
	}
	return done, nil
}

// RestoreOptions say where to restore and how to report progress.
type RestoreOptions struct {
	Config   Config
	Progress func(done, total int)
	// Actor names who restored, in the audit records of the locks the restore releases.
	Actor string
}

// ErrNotEmpty is a restore into a database or data dir that holds something already.
var ErrNotEmpty = errors.New("not empty")

// Restore restores a backup into an empty database (Config.DatabaseURL) or a new data dir
// (the embedded default), migrates it to this release's schema, and releases the locks it
// holds (their holders belong to the installation the backup came from; each release is
// audited) and the console sessions. The restored database starts a history epoch of its own
// (versions a billion past the restored ones), as a failover does. It refuses a database with strata's schema or any of the
// backup's schemas in it, and a data dir with a cluster in it.
func Restore(ctx context.Context, opts RestoreOptions, file string) (released int, err error) {
	cfg := opts.Config
	cfg.setDefaults()
	if cfg.DatabaseURL == "" {
		if _, err := os.Stat(filepath.Join(cfg.DataDir, "pg")); err == nil {
			return 0, fmt.Errorf("data dir %s already holds a PostgreSQL cluster: restore into a new data dir (or give --database-url of an empty database): %w", cfg.DataDir, ErrNotEmpty)
		}
	}
	pgRestore, err := pgTool("pg_restore")
	if err != nil {
		return 0, err
	}
	list, err := exec.CommandContext(ctx, pgRestore, "--list", file).Output()
	if err != nil {
		return 0, fmt.Errorf("%s is not a strata backup (pg_restore --list: %v)", file, err)
	}
	schemas, tables := backupContents(string(list))
	if !slices.Contains(schemas, cfg.Schema) {
		return 0, fmt.Errorf("%s holds no schema %q: not a strata backup (or taken with another --schema)", file, cfg.Schema)
	}
	d, err := openForRestore(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer d.Close(context.WithoutCancel(ctx))
	taken, err := d.DB.SchemasPresent(ctx, schemas)
	if err != nil {
		return 0, err
	}
	if len(taken) > 0 {
		return 0, fmt.Errorf("the database already has schema %s: restore only into an empty database: %w", strings.Join(taken, ", "), ErrNotEmpty)
	}
	if err := tfstate.PrepareRestore(ctx, d.DB); err != nil {
		return 0, err
	}
	args := []string{"--no-owner", "--no-privileges", "--exit-on-error", "--single-transaction", "--verbose", "--dbname", d.URL(), file}
	if _, err := runWithProgress(ctx, pgRestore, args, "processing data for table", tables, opts.Progress); err != nil {
		return 0, err
	}
	if _, _, err := d.MigrateUp(ctx, 0); err != nil {
		return 0, fmt.Errorf("restored, but migrating the restored schema to this release failed: %w", err)
	}
	// A restore is a new history wherever it lands (migration 0030): the versions move a
	// billion past the restored ones, so the copy never hands out a version its source
	// issued after the backup, and every watch from a source version gets 410.
	if _, err := d.DB.RestoreEpoch(ctx); err != nil {
		return 0, fmt.Errorf("restored, but starting its new history failed: %w", err)
	}
	if err := tfstate.AdvanceSequence(ctx, d.DB); err != nil {
		return 0, err
	}
	actor := opts.Actor
	if actor == "" {
		actor = "strata backup restore"
	}
	released, err = tfstate.ReleaseRestoredLocks(ctx, d.DB, actor)
	if err != nil {
		return 0, err
	}
	if err := auth.EndAllSessions(ctx, d.DB); err != nil {
		return released, err
	}
	return released, nil
}

// openForRestore opens the target of a restore without migrating it (the restore brings the
// schema): an external database as it is, or a new embedded cluster in the data dir.
func openForRestore(ctx context.Context, cfg Config) (*Database, error) {
	return OpenDatabase(ctx, cfg, nil) // OpenDatabase does not migrate; the restore brings the schema
}

// backupContents reads pg_restore --list: the schemas in the backup and how many tables' data
// it holds.
func backupContents(list string) (schemas []string, tables int) {
	for _, line := range strings.Split(list, "\n") {
		if strings.HasPrefix(line, ";") {
			continue
		}
		f := strings.Fields(line)
		if len(f) >= 6 && f[3] == "SCHEMA" {
			schemas = append(schemas, f[5])
		}
		if len(f) >= 6 && f[3] == "TABLE" && f[4] == "DATA" {
			tables++
		}
	}
	return schemas, tables
}

// runWithProgress runs a PostgreSQL tool, counting its --verbose lines that contain marker
// as progress; on failure its error names the tool's own last words.
func runWithProgress(ctx context.Context, path string, args []string, marker string, total int, progress func(done, total int)) (int, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	done := 0
	var last []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, marker) {
			done++
			if progress != nil {
				progress(done, max(total, done))
			}
		}
		if strings.Contains(line, "error") || strings.Contains(line, "FATAL") {
			last = append(last, line)
		}
	}
	_, _ = io.Copy(io.Discard, stderr)
	if err := cmd.Wait(); err != nil {
		return done, fmt.Errorf("%s failed: %v: %s", filepath.Base(path), err, db.Redact(strings.Join(last, "; ")))
	}
	return done, nil
}
