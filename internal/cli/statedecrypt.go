package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/internal/server"
)

// newStateDecryptCmd is `strata state decrypt`: an encrypted project's state read straight
// from the database or from a backup file with the key files, without a strata server. Like
// backup it talks to the database directly (through internal/server): its point is to work
// when strata cannot, for instance when the infrastructure strata runs on is managed by the
// very state that is encrypted.
func newStateDecryptCmd(g *globals) *cobra.Command {
	var (
		dbf       dbFlags
		keyFiles  []string
		keyCmds   []string
		backup    string
		project   string
		workspace string
		version   int64
		outFile   string
	)
	cmd := &cobra.Command{
		Use:   "decrypt",
		Short: "Decrypt a state of an encrypted project from the database or a backup file (no server needed)",
		Long: `Read a workspace's state (or one of its versions) straight from the database (--database-url,
or the embedded cluster of --data-dir) or from a file made by strata backup create (--backup),
open it with the key files, and write the plain state to stdout or --out. No strata server is
involved, so an encrypted state stays readable while strata is down. A plain state is written
as it is stored.`,
		Example: "  strata state decrypt --key-file /etc/strata/key --backup strata.backup --project net --workspace default --out net.tfstate\n" +
			"  strata state decrypt --key-file /etc/strata/key --database-url postgres://strata@db/strata --project net --workspace default --version 7",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(keyFiles) == 0 && len(keyCmds) == 0 {
				return errors.New("--key-file (or --key-command) is required (repeat it to try several keys)")
			}
			if project == "" || workspace == "" {
				return errors.New("--project and --workspace are required")
			}
			if version < 0 {
				return fmt.Errorf("--version %d: must be positive (0 reads the current state)", version)
			}
			opts := server.DecryptOptions{
				Config: server.Config{DatabaseURL: dbf.databaseURL, Schema: dbf.schema, DataDir: g.dataDir,
					Logger: slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), WaitForDatabase: 30 * time.Second},
				Backup: backup, KeyFiles: keyFiles, KeyCommands: keyCmds, Project: project, Workspace: workspace, Version: version,
			}
			plain, err := server.DecryptState(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if outFile == "" {
				_, err = g.stdout.Write(plain)
				return err
			}
			// The plain state holds every secret the encryption protected: owner-only.
			return writePrivate(outFile, plain)
		},
	}
	dbf.register(cmd.Flags())
	f := cmd.Flags()
	f.StringArrayVar(&keyFiles, "key-file", nil, "encryption key file (repeatable; any of them may hold the state's key)")
	f.StringArrayVar(&keyCmds, "key-command", nil, "shell command printing a key (as serve's --encryption-key-command; repeatable)")
	f.StringVar(&backup, "backup", "", "read from this backup file (strata backup create) instead of a database")
	f.StringVar(&project, "project", "", "the project")
	f.StringVar(&workspace, "workspace", "", "the workspace")
	f.Int64Var(&version, "version", 0, "the version to read (0: the current state)")
	// Not -o: that is every command's output format.
	f.StringVar(&outFile, "out", "", "write the plain state to this file (mode 0600) instead of stdout")
	return cmd
}
