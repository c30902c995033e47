package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stratahq/strata/internal/server"
)

// dbFlags are the flags serve and migrate share to find the database.
type dbFlags struct {
	databaseURL string
	schema      string
}

// migrationLockTimeout registers --migration-lock-timeout on fs.
func migrationLockTimeout(fs *pflag.FlagSet, d *time.Duration) {
	fs.DurationVar(d, "migration-lock-timeout", envDuration("STRATA_MIGRATION_LOCK_TIMEOUT", server.DefaultMigrationLockTimeout),
		"how long a migration statement waits for a table lock before failing (nothing applied, safe to retry); 0 waits without limit (env STRATA_MIGRATION_LOCK_TIMEOUT)")
}

// lockTimeoutOption turns the flag's value into MigrateUp's lock timeout, where 0 means
// the default and a negative value no limit.
func lockTimeoutOption(d time.Duration) (time.Duration, error) {
	switch {
	case d < 0:
		return 0, fmt.Errorf("--migration-lock-timeout %s: must not be negative", d)
	case d == 0:
		return -1, nil
	}
	return d, nil
}

func (f *dbFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.databaseURL, "database-url", os.Getenv("STRATA_DATABASE_URL"), "PostgreSQL URL; empty starts the embedded cluster in <data-dir>/pg (env STRATA_DATABASE_URL)")
	hideDefault(fs, "database-url", server.Redact)
	fs.StringVar(&f.schema, "schema", envOr("STRATA_SCHEMA", server.DefaultSchema), "schema for strata's tables (env STRATA_SCHEMA)")
}

// envInt reads an integer default from the environment. A value that is not an integer is
// remembered and reported when the command runs, rather than silently replaced.
// envCommand reads one shell command (commands hold commas, so the variable is not a list).
func envCommand(name string) []string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return []string{v}
	}
	return nil
}

// envList reads a comma-separated list (empty items dropped).
func envList(name string) []string {
	var out []string
	for _, v := range strings.Split(os.Getenv(name), ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func envInt(name string, def int64) int64 {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			noteEnvError(fmt.Errorf("%s=%q: not an integer", name, v))
			return def
		}
		return n
	}
	return def
}

// envDuration reads a duration default from the environment, like envInt.
func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			noteEnvError(fmt.Errorf("%s=%q: not a duration (e.g. 30s)", name, v))
			return def
		}
		return d
	}
	return def
}

// envErrors collects malformed STRATA_* values found while building the command tree.
// Guarded by envMu: command trees are built concurrently (parallel tests of the CLI).
var (
	envMu     sync.Mutex
	envErrors []error
)

func noteEnvError(err error) {
	envMu.Lock()
	defer envMu.Unlock()
	envErrors = append(envErrors, err)
}

func resetEnvErrors() {
	envMu.Lock()
	defer envMu.Unlock()
	envErrors = nil
}

func checkEnv() error {
	envMu.Lock()
	defer envMu.Unlock()
	return errors.Join(envErrors...)
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// Credential names strata looks for in systemd's $CREDENTIALS_DIRECTORY: the unit's
// LoadCredential= lines copy them from /etc/credstore/ (root's, mode 0600) at start, readable
// by the unit's dynamic user, which cannot read root's files under /etc itself.
const (
	credTLSCert     = "strata-tls-cert"
	credTLSKey      = "strata-tls-key"
	credKey         = "strata-encryption-key"
	credKeyPrevious = "strata-encryption-key-previous"
)

// credentialDefaults fills what flags and environment left empty from the credentials
// directory: the TLS pair when both files are there, the key files when no key file and no
// key command is given (the primary, then the previous one during a rotation). What is given
// explicitly always wins.
func credentialDefaults(cfg *server.Config, dir string, logger *slog.Logger) {
	if dir == "" {
		return
	}
	exists := func(name string) (string, bool) {
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		return p, err == nil && st.Mode().IsRegular()
	}
	if cfg.TLSCert == "" && cfg.TLSKey == "" {
		cert, okCert := exists(credTLSCert)
		key, okKey := exists(credTLSKey)
		if okCert && okKey {
			cfg.TLSCert, cfg.TLSKey = cert, key
			logger.Info("TLS pair from systemd credentials", "cert", cert, "key", key)
		}
	}
	if len(cfg.EncryptionKeyFiles) == 0 && len(cfg.EncryptionKeyCommands) == 0 {
		for _, name := range []string{credKey, credKeyPrevious} {
			if p, ok := exists(name); ok {
				cfg.EncryptionKeyFiles = append(cfg.EncryptionKeyFiles, p)
			}
		}
		if len(cfg.EncryptionKeyFiles) > 0 {
			logger.Info("encryption key files from systemd credentials", "files", cfg.EncryptionKeyFiles)
		}
	}
}

func newServeCmd(g *globals) *cobra.Command {
	var (
		dbf      dbFlags
		cfg      server.Config
		logLevel string
		shutdown time.Duration
		waitDB   time.Duration
		lockWait time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the strata API server",
		Long: `Run the strata API server.

With no --database-url, strata starts and owns a private PostgreSQL cluster in <data-dir>/pg
(created on first start, reused afterwards, stopped when strata exits), using the PostgreSQL
server binaries on PATH or in Debian's /usr/lib/postgresql/<version>/bin.
With --database-url it uses that database; several replicas may share one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkEnv(); err != nil {
				return err
			}
			if cfg.MaxBodyBytes <= 0 || cfg.MaxStateBytes <= 0 {
				return fmt.Errorf("--max-body-bytes and --max-state-bytes must be positive")
			}
			logger, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			if cfg.MigrationLockTimeout, err = lockTimeoutOption(lockWait); err != nil {
				return err
			}
			cfg.DatabaseURL = dbf.databaseURL
			cfg.Schema = dbf.schema
			cfg.DataDir = g.dataDir
			cfg.Logger = logger
			cfg.Version = Version
			cfg.BootstrapToken = os.Getenv("STRATA_BOOTSTRAP_TOKEN")
			cfg.ShutdownTimeout = shutdown
			cfg.WaitForDatabase = waitDB // 0: forever
			credentialDefaults(&cfg, os.Getenv("CREDENTIALS_DIRECTORY"), logger)
			return server.Run(cmd.Context(), cfg)
		},
	}
	dbf.register(cmd.Flags())
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", envOr("STRATA_LISTEN", server.DefaultListen), "HTTP listen address (env STRATA_LISTEN)")
	f.StringVar(&cfg.SessionDatabaseURL, "session-database-url", os.Getenv("STRATA_SESSION_DATABASE_URL"), "direct or session-mode PostgreSQL URL for session features (pg-client lock exclusion, LISTEN) when --database-url is a transaction-mode pooler; \"off\" disables them (env STRATA_SESSION_DATABASE_URL)")
	hideDefault(f, "session-database-url", server.Redact)
	f.StringVar(&cfg.EmbeddedListen, "embedded-listen", os.Getenv("STRATA_EMBEDDED_LISTEN"), "also let the embedded PostgreSQL listen on this TCP address (password in <data-dir>/pg-password), e.g. for pg backend clients (env STRATA_EMBEDDED_LISTEN)")
	f.StringVar(&cfg.TLSCert, "tls-cert", os.Getenv("STRATA_TLS_CERT"), "TLS certificate file, re-read when it changes and on SIGHUP; default under systemd: $CREDENTIALS_DIRECTORY/strata-tls-cert when that exists (env STRATA_TLS_CERT)")
	f.StringVar(&cfg.TLSKey, "tls-key", os.Getenv("STRATA_TLS_KEY"), "TLS key file, re-read with the certificate; default under systemd: $CREDENTIALS_DIRECTORY/strata-tls-key when that exists (env STRATA_TLS_KEY)")
	f.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", envInt("STRATA_MAX_BODY_BYTES", server.DefaultMaxBodyBytes), "request body limit in bytes; larger bodies get 413 (env STRATA_MAX_BODY_BYTES)")
	f.Int64Var(&cfg.RenderCacheBytes, "render-cache-bytes", envInt("STRATA_RENDER_CACHE_BYTES", server.DefaultRenderCacheBytes), "bound of this replica's pillar render cache; the least recently used renders are evicted (env STRATA_RENDER_CACHE_BYTES)")
	f.Int64Var(&cfg.ListIndexMaxBytes, "list-index-max-bytes", envInt("STRATA_LIST_INDEX_MAX_BYTES", server.DefaultListIndexBytes), "bound of this replica's in-memory list index; over it lists read the database; -1 turns the index off (env STRATA_LIST_INDEX_MAX_BYTES)")
	f.DurationVar(&cfg.ListIndexWait, "list-index-wait", envDuration("STRATA_LIST_INDEX_WAIT", server.DefaultListIndexWait), "longest a list waits for the list index to reach the database's current version before it reads the database (env STRATA_LIST_INDEX_WAIT)")
	f.Int64Var(&cfg.BulkBufferBytes, "bulk-buffer-bytes", envInt("STRATA_BULK_BUFFER_BYTES", server.DefaultBulkBufferBytes), "input one bulk apply (POST /v1/nodes:apply) may hold before it is written; past it the body is not read until lines are applied (env STRATA_BULK_BUFFER_BYTES)")
	f.Int64Var(&cfg.MaxStateBytes, "max-state-bytes", envInt("STRATA_MAX_STATE_BYTES", 64<<20), "Terraform state size limit in bytes; larger states get 413 (env STRATA_MAX_STATE_BYTES)")
	f.IntVar(&cfg.KeepVersions, "keep-versions", int(envInt("STRATA_KEEP_VERSIONS", 0)), "state versions kept per workspace, 0 keeps all (env STRATA_KEEP_VERSIONS)")
	f.DurationVar(&cfg.ChangesRetention, "changes-retention", envDuration("STRATA_CHANGES_RETENTION", server.DefaultChangesRetention), "how long the changes log (what watch resumes from) is kept, 0 keeps it forever (env STRATA_CHANGES_RETENTION)")
	f.DurationVar(&cfg.AuditRetention, "audit-retention", envDuration("STRATA_AUDIT_RETENTION", server.DefaultAuditRetention), "how long audit log entries are kept, 0 keeps them forever (env STRATA_AUDIT_RETENTION)")
	f.StringVar(&cfg.TrustedProxies, "trusted-proxies", os.Getenv("STRATA_TRUSTED_PROXIES"), "addresses or CIDR prefixes (comma-separated) of load balancers and reverse proxies whose X-Forwarded-For or Forwarded header names the client in the audit log and the request log; from any other peer the headers are ignored (env STRATA_TRUSTED_PROXIES)")
	f.StringVar(&cfg.SaltLegacyClients, "salt-legacy-clients", os.Getenv("STRATA_SALT_LEGACY_CLIENTS"), "addresses or CIDR prefixes (comma-separated) that may render pillars at /v1/salt/pillar without a token, for Salt 3005 and older; empty: none (env STRATA_SALT_LEGACY_CLIENTS)")
	// pflag shows a usage's first back-quoted word as the flag's placeholder: one word each.
	f.StringArrayVar(&cfg.EncryptionKeyFiles, "encryption-key-file", envList("STRATA_ENCRYPTION_KEY_FILE"), "`FILE` holding a key-encryption key (32 random bytes, base64, as strata keys generate FILE writes), re-read on SIGHUP; repeat it to give several: the first encrypts new values, all decrypt. Default under systemd: $CREDENTIALS_DIRECTORY/strata-encryption-key and …-previous when they exist; else with the embedded cluster: <data-dir>/encryption-key, created on first start (env STRATA_ENCRYPTION_KEY_FILE, comma-separated)")
	f.StringArrayVar(&cfg.EncryptionKeyCommands, "encryption-key-command", envCommand("STRATA_ENCRYPTION_KEY_COMMAND"), "shell `COMMAND` printing a key-encryption key (base64 of 32 bytes) on stdout, run at start and on SIGHUP: a key kept in a KMS or secret manager; repeatable; these keys come before the key files' (env STRATA_ENCRYPTION_KEY_COMMAND: one command)")
	// A key command may carry a token on its command line: help does not print it.
	hideDefault(f, "encryption-key-command", maskAll)
	f.DurationVar(&cfg.SaltRenderTimeout, "salt-render-timeout", envDuration("STRATA_SALT_RENDER_TIMEOUT", 10*time.Second), "longest Salt-facing pillar render; past it Salt gets an _errors text it shows and refuses states over (env STRATA_SALT_RENDER_TIMEOUT)")
	f.DurationVar(&cfg.WatchBookmarkInterval, "watch-bookmark-interval", envDuration("STRATA_WATCH_BOOKMARK_INTERVAL", 30*time.Second), "how often a watch stream sends a BOOKMARK event carrying the resourceVersion it is complete through (env STRATA_WATCH_BOOKMARK_INTERVAL)")
	f.DurationVar(&cfg.WatchMaxDuration, "watch-max-duration", envDuration("STRATA_WATCH_MAX_DURATION", server.DefaultWatchMaxDuration), "the shortest lifetime of a watch stream: each ends cleanly after a random duration in [d, 2d) and its client resumes from its last resourceVersion (env STRATA_WATCH_MAX_DURATION)")
	f.StringVar(&logLevel, "log-level", envOr("STRATA_LOG_LEVEL", "info"), "log level: debug, info, warn, error (env STRATA_LOG_LEVEL)")
	f.DurationVar(&waitDB, "wait-for-database", envDuration("STRATA_WAIT_FOR_DATABASE", 0), "how long to wait, retrying, for a database (--database-url) that cannot be reached at start; 0 waits forever, while /healthz answers and everything else 503 (env STRATA_WAIT_FOR_DATABASE)")
	f.DurationVar(&shutdown, "shutdown-timeout", envDuration("STRATA_SHUTDOWN_TIMEOUT", 30*time.Second), "how long in-flight requests may take to finish on SIGINT/SIGTERM (env STRATA_SHUTDOWN_TIMEOUT)")
	migrationLockTimeout(f, &lockWait)
	return cmd
}

func newMigrateCmd(g *globals) *cobra.Command {
	var (
		dbf      dbFlags
		lockWait time.Duration
	)
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply or list database schema migrations (talks to the database directly)",
	}
	// The db flags live on the parent so both "migrate --database-url X up" and
	// "migrate up --database-url X" work.
	dbf.register(cmd.PersistentFlags())
	var waitDB time.Duration
	cmd.PersistentFlags().DurationVar(&waitDB, "wait-for-database", envDuration("STRATA_WAIT_FOR_DATABASE", 30*time.Second), "how long to wait, retrying, for a database that cannot be reached (env STRATA_WAIT_FOR_DATABASE)")
	// withDB runs fn on the database (starting the embedded cluster when no URL is given)
	// and closes it afterwards.
	withDB := func(run func(cmd *cobra.Command, d *server.Database) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, _ []string) error {
			logger := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			d, err := server.OpenDatabase(cmd.Context(), server.Config{DatabaseURL: dbf.databaseURL, Schema: dbf.schema, DataDir: g.dataDir, Logger: logger, WaitForDatabase: waitDB}, nil)
			if err != nil {
				return err
			}
			defer d.Close(cmd.Context())
			return run(cmd, d)
		}
	}
	up := &cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration (in one transaction, but for no-transaction migrations)",
		Long: `Apply every pending migration.

Consecutive migrations run in one transaction; a migration marked strata:no-transaction (such
as CREATE INDEX CONCURRENTLY) runs on its own after the ones before it committed. On a schema
newer than this strata knows, nothing is applied: that succeeds when the schema declares this
release compatible and fails otherwise.`,
		Args: cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, d *server.Database) error {
			timeout, err := lockTimeoutOption(lockWait)
			if err != nil {
				return err
			}
			applied, note, err := d.MigrateUp(cmd.Context(), timeout)
			if err != nil {
				return err
			}
			if note != "" {
				fmt.Fprintln(g.stdout, note)
			}
			for _, m := range applied {
				fmt.Fprintf(g.stdout, "applied %s\n", m)
			}
			return nil
		}),
	}
	migrationLockTimeout(up.Flags(), &lockWait)
	cmd.AddCommand(up)
	cmd.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "List applied and pending migrations",
		Args:  cobra.NoArgs,
		RunE: withDB(func(cmd *cobra.Command, d *server.Database) error {
			rows, err := d.MigrationStatus(cmd.Context())
			if err != nil {
				return err
			}
			return g.printList(rows, func(w io.Writer) error {
				tw := newTable(w, "VERSION", "NAME", "COMPATIBLE SINCE", "STATUS", "APPLIED AT")
				for _, r := range rows {
					at := ""
					if r.AppliedAt != nil {
						at = r.AppliedAt.Format(time.RFC3339)
					}
					tw.row(fmt.Sprintf("%04d", r.Version), r.Name, fmt.Sprintf("%04d", r.CompatibleSince), r.Status, at)
				}
				return tw.flush()
			})
		}),
	})
	return cmd
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print strata's version and the schema version it knows (migrates to)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v := struct {
				Version       string `json:"version"`
				SchemaVersion int64  `json:"schemaVersion"`
			}{Version, server.SchemaVersion()}
			return g.print(v, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "strata %s (schema version %d)\n", v.Version, v.SchemaVersion)
				return err
			})
		},
	}
}

func newDoctorCmd(g *globals) *cobra.Command {
	var (
		dbf         dbFlags
		waitDB      time.Duration
		keyFiles    []string
		keyCommands []string
	)
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check what the database and strata's role can serve (talks to the database directly)",
		Long: `Check, on the database strata serve would use (--database-url, or the embedded cluster), each
feature and whether strata's role can serve it: the schema at this release's version, a
database that accepts writes, and the privileges of the optional features (CREATE on the
database for Terraform projects, CREATEROLE for project and Salt credentials,
pg_signal_backend for force-unlocking pg clients, pg_read_all_stats for lock holders'
details), and whether the encryption keys given (--encryption-key-file,
--encryption-key-command, the same flags and environment as strata serve; with the embedded
cluster its <data-dir>/encryption-key) hold every key the database's sealed values need. A
fresh database passes: serve creates the schema and migrates at start. Beside a running
strata on the embedded cluster it connects through the cluster's socket. Exits 1 when strata
could not serve at all, or would not be ready for want of a key. strata serve runs the same
checks at start (log, /readyz warnings, GET /v1/status).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkEnv(); err != nil {
				return err
			}
			logger := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			cfg := server.Config{DatabaseURL: dbf.databaseURL, Schema: dbf.schema, DataDir: g.dataDir, Logger: logger, WaitForDatabase: waitDB,
				EncryptionKeyFiles: keyFiles, EncryptionKeyCommands: keyCommands}
			keys, err := server.KeysForCheck(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			d, err := server.OpenBeside(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer d.Close(cmd.Context())
			checks, err := server.Doctor(cmd.Context(), d.DB)
			if err != nil {
				return err
			}
			kc, err := server.DoctorKeys(cmd.Context(), d.DB, keys)
			if err != nil {
				return err
			}
			checks = append(checks, kc)
			if err := g.printList(checks, func(w io.Writer) error {
				tw := newTable(w, "FEATURE", "OK", "NEEDS")
				for _, c := range checks {
					ok, text := "yes", c.Needs
					if !c.OK {
						ok = "no"
					} else if c.Note != "" {
						text = "(" + c.Note + ")"
					}
					tw.row(c.Feature, ok, text)
				}
				return tw.flush()
			}); err != nil {
				return err
			}
			if !checks[0].OK {
				return fmt.Errorf("strata cannot serve this database: %s", checks[0].Needs)
			}
			if !kc.OK {
				return fmt.Errorf("strata would not be ready on this database: %s", kc.Needs)
			}
			return nil
		},
	}
	dbf.register(cmd.Flags())
	cmd.Flags().StringArrayVar(&keyFiles, "encryption-key-file", envList("STRATA_ENCRYPTION_KEY_FILE"), "a key file strata serve is given, as for serve (env STRATA_ENCRYPTION_KEY_FILE, comma-separated)")
	cmd.Flags().StringArrayVar(&keyCommands, "encryption-key-command", envCommand("STRATA_ENCRYPTION_KEY_COMMAND"), "a key command strata serve is given, as for serve (env STRATA_ENCRYPTION_KEY_COMMAND)")
	hideDefault(cmd.Flags(), "encryption-key-command", func(string) string { return "[]" }) // a command may hold a secret
	cmd.Flags().DurationVar(&waitDB, "wait-for-database", envDuration("STRATA_WAIT_FOR_DATABASE", 30*time.Second), "how long to wait, retrying, for a database that cannot be reached (env STRATA_WAIT_FOR_DATABASE)")
	return cmd
}
