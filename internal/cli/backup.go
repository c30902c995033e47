package cli

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/internal/server"
)

// newBackupCmd is `strata backup create|restore FILE`: a consistent online backup of
// everything strata stores, and its restore into an empty database or a new data dir. Like
// migrate it talks to the database directly (through internal/server), not to a server.
func newBackupCmd(g *globals) *cobra.Command {
	var (
		dbf   dbFlags
		quiet bool
	)
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Back up everything strata stores, or restore a backup (talks to the database directly)",
		Long: `Back up everything strata stores — its schema (resources, pillars and their history, kinds,
tokens as hashes, the audit log, state versions) and every Terraform project's schema — in
one consistent snapshot while strata keeps serving, or restore such a backup.

Without --database-url the embedded default of --data-dir is used: the running server's
cluster for a backup, a new cluster for a restore. Login roles made by strata salt credentials
and strata project credentials are cluster-wide and not in a backup: make them again after a
restore. See docs/operations.md, "Backup and restore".`,
	}
	dbf.register(cmd.PersistentFlags())
	cmd.PersistentFlags().BoolVarP(&quiet, "quiet", "q", false, "no progress")
	// progress draws a bar of tables done as the PostgreSQL tool reports them.
	progress := func(what string) (*progress, func(done, total int)) {
		prog := g.newProgress(0, what, quiet)
		return prog, func(done, total int) {
			prog.setMax(int64(total))
			prog.set(int64(done), int64(done))
		}
	}
	config := func() server.Config {
		return server.Config{DatabaseURL: dbf.databaseURL, Schema: dbf.schema, DataDir: g.dataDir,
			Logger: slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), WaitForDatabase: 30 * time.Second}
	}
	create := &cobra.Command{
		Use:     "create FILE",
		Short:   "Write a consistent backup of everything strata stores to FILE (online)",
		Example: "  strata backup create strata.backup --data-dir /var/lib/strata\n  strata backup create strata.backup --database-url postgres://strata@db/strata",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			prog, report := progress("tables dumped")
			n, err := server.Backup(cmd.Context(), server.BackupOptions{Config: config(), Progress: report}, args[0])
			prog.end(err) // a failure ends the report without a count ("0 tables restored")
			if err != nil {
				return err
			}
			return g.print(map[string]any{"file": args[0], "tables": n}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "backed up %s to %s\n", count(n, "table"), args[0])
				return err
			})
		},
	}
	restore := &cobra.Command{
		Use:   "restore FILE",
		Short: "Restore a backup into an empty database or a new data dir",
		Long: `Restore a backup into an empty database (--database-url) or a new data dir (--data-dir; the
embedded default). A database that already has strata's schema, or a data dir with a cluster,
is refused. The restored schema is migrated to this release. Terraform locks in the backup are
released (their holders belong to the installation the backup was taken from; each release is
in the audit log as state.force-unlock), and console sessions end.`,
		Example: "  strata backup restore strata.backup --data-dir /var/lib/strata-restored",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			prog, report := progress("tables restored")
			released, err := server.Restore(cmd.Context(), server.RestoreOptions{Config: config(), Progress: report}, args[0])
			prog.end(err) // a failure ends the report without a count ("0 tables restored")
			if err != nil {
				return err
			}
			return g.print(map[string]any{"file": args[0], "releasedLocks": released}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "restored %s (%s of the old installation released)\n", args[0], count(released, "Terraform lock"))
				return err
			})
		},
	}
	cmd.AddCommand(create, restore)
	return cmd
}
