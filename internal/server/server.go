// Package server runs a strata replica: it resolves the database (the embedded default
// cluster or a given URL), applies migrations, creates the first admin token, and serves the
// HTTP API until its context ends, then shuts down in order — HTTP first (in-flight requests
// finish), then the pool, then the embedded cluster, so no PostgreSQL process outlives strata.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/db/migrations"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/kind"
	"github.com/stratahq/strata/internal/pgembed"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
	"github.com/stratahq/strata/internal/tfstate"
)

// Config is everything a replica needs; cmd/strata fills it from flags and STRATA_*
// environment variables. Zero values mean the documented defaults.
type Config struct {
	// Listen is the HTTP listen address (default 127.0.0.1:7400).
	Listen string
	// DatabaseURL selects an existing database; empty starts the embedded cluster in DataDir.
	DatabaseURL string
	// SessionDatabaseURL is an optional direct (or session-mode pooler) connection used for
	// what needs a real session: holding pg clients' advisory keys and LISTEN. Needed only when
	// DatabaseURL goes through a transaction-mode pooler; empty uses DatabaseURL itself, and
	// "off" disables session features (HTTP state locks then do not exclude pg clients).
	SessionDatabaseURL string
	// DataDir holds the embedded cluster and the admin-token file.
	DataDir string
	// EmbeddedListen, such as "127.0.0.1:5433", makes the embedded cluster also listen on TCP
	// (password auth with a generated secret in <DataDir>/pg-password), e.g. for Terraform's
	// pg backend on another machine. Empty: Unix socket only.
	EmbeddedListen string
	// Schema holds strata's tables (default "strata").
	Schema string
	// TLSCert and TLSKey enable HTTPS when both are set.
	TLSCert, TLSKey string
	// MaxBodyBytes limits request bodies (default 8 MiB); larger ones get 413.
	MaxBodyBytes int64
	// MaxStateBytes limits Terraform state writes (default 64 MiB); larger ones get 413.
	MaxStateBytes int64
	// RenderCacheBytes bounds this replica's render cache (pillar.DefaultCacheBytes when 0);
	// the least recently used renders are evicted.
	RenderCacheBytes int64
	// ListIndexMaxBytes bounds this replica's list index (resource.DefaultListIndexMaxBytes
	// when 0; negative turns the index off, every list then reads the database). Over it,
	// lists read the database.
	ListIndexMaxBytes int64
	// ListIndexWait bounds how long a list waits for the index to reach the database's
	// current version (resource.DefaultListIndexWait when 0) before it reads the database.
	ListIndexWait time.Duration
	// BulkBufferBytes bounds the input one bulk apply holds before writing it (default
	// 32 MiB); past it the server stops reading the body until lines are applied.
	BulkBufferBytes int64
	// KeepVersions is how many state versions to keep per workspace (0: all).
	KeepVersions int
	// BootstrapToken, when set, is the first admin token instead of a random one.
	BootstrapToken string
	// Logger receives JSON logs; slog.Default() when nil.
	Logger *slog.Logger
	// Version is reported by /version.
	Version string
	// MigrationLockTimeout bounds how long a migration statement waits for a table lock
	// (default db.DefaultMigrationLockTimeout); a timeout fails the start, nothing applied.
	MigrationLockTimeout time.Duration
	// ShutdownTimeout bounds the graceful shutdown (default 30s).
	ShutdownTimeout time.Duration
	// WaitForDatabase bounds how long OpenDatabase retries a database (given by URL) that
	// cannot be reached: 0 waits forever (serve's default), a negative value not at all.
	WaitForDatabase time.Duration
	// ChangesRetention and AuditRetention are how long rows of the changes log and of the
	// audit log are kept; 0 keeps them forever. The CLI's defaults are 7 days and 90 days
	// (DefaultChangesRetention, DefaultAuditRetention).
	ChangesRetention, AuditRetention time.Duration
	// SaltLegacyClients are comma-separated addresses or CIDR prefixes allowed to render
	// pillars through /v1/salt/pillar without a token (Salt 3005 and older send none). Empty
	// (the default) allows no one.
	SaltLegacyClients string
	// TrustedProxies are comma-separated addresses or CIDR prefixes of load balancers and
	// reverse proxies whose X-Forwarded-For / Forwarded header names the client.
	TrustedProxies string
	// EncryptionKeyFiles are the key-encryption keys' files (package secret): the first
	// encrypts new values, all decrypt. Empty with the embedded default: <DataDir>/encryption-key,
	// created on first start. Empty with DatabaseURL: no key, and secret categories and
	// encrypted projects are refused naming the flag.
	EncryptionKeyFiles []string
	// EncryptionKeyCommands fetch keys from a KMS or secret manager (secret.KeyFromCommand);
	// their keys come before the files' (the first command's key encrypts).
	EncryptionKeyCommands []string
	// SaltRenderTimeout bounds a Salt-facing pillar render (default 10s).
	SaltRenderTimeout time.Duration
	// WatchBookmarkInterval is how often a watch stream sends a BOOKMARK (default 30s).
	WatchBookmarkInterval time.Duration
	// WatchMaxDuration is the shortest lifetime of a watch stream; each lives a random
	// duration in [d, 2d) and then ends cleanly (default 30m).
	WatchMaxDuration time.Duration
	// Ready, when set, is called with the listener's address once the server accepts requests.
	Ready func(addr net.Addr)
}

// DefaultListen is the default HTTP address: loopback only, so a fresh install is not
// exposed to the network.
const DefaultListen = "127.0.0.1:7400"

// DefaultMaxBodyBytes is the default request body limit.
const DefaultMaxBodyBytes = 8 << 20

// DefaultBulkBufferBytes and DefaultWatchMaxDuration are the API's defaults, named here so
// the CLI's flags need only this package.
const (
	DefaultRenderCacheBytes = pillar.DefaultCacheBytes
	DefaultListIndexBytes   = resource.DefaultListIndexMaxBytes
	DefaultListIndexWait    = resource.DefaultListIndexWait
	DefaultBulkBufferBytes  = httpapi.DefaultBulkBufferBytes
	DefaultWatchMaxDuration = httpapi.DefaultWatchMaxDuration
)

func (c *Config) setDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.DataDir == "" {
		c.DataDir = pgembed.DefaultDataDir()
	}
	if c.Schema == "" {
		c.Schema = db.DefaultSchema
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
}

// Database is an open database, with the embedded cluster behind it when there is one.
type Database struct {
	DB      *db.DB
	cluster *pgembed.Cluster
	url     string
}

// URL is the connection string strata uses (the embedded cluster's socket URL, or the
// configured one).
func (d *Database) URL() string { return d.url }

// ClientURL is how other database clients (Terraform's pg backend) reach the database: the
// embedded cluster's TCP address when it has one, otherwise URL.
func (d *Database) ClientURL() string {
	if d.cluster != nil && d.cluster.TCPURL() != "" {
		return d.cluster.TCPURL()
	}
	return d.url
}

// Close closes the pool and stops the embedded cluster.
func (d *Database) Close(ctx context.Context) error {
	if d.DB != nil {
		d.DB.Close()
	}
	if d.cluster != nil {
		return d.cluster.Stop(ctx)
	}
	return nil
}

// OpenDatabase opens cfg's database, starting the embedded cluster when no URL is given. It
// does not migrate.
func OpenDatabase(ctx context.Context, cfg Config, observer db.QueryObserver) (*Database, error) {
	cfg.setDefaults()
	out := &Database{}
	url := cfg.DatabaseURL
	if url == "" {
		cluster, err := pgembed.Start(ctx, pgembed.Options{DataDir: cfg.DataDir, Logger: cfg.Logger, TCPListen: cfg.EmbeddedListen})
		if err != nil {
			return nil, fmt.Errorf("embedded PostgreSQL: %w", err)
		}
		out.cluster = cluster
		url = cluster.URL()
		cfg.Logger.Info("embedded PostgreSQL running", "data_dir", cfg.DataDir, "tcp", cfg.EmbeddedListen)
	}
	d, err := openWaiting(ctx, cfg, db.Options{URL: url, Schema: cfg.Schema, Logger: cfg.Logger, Observer: observer, MaxConns: 20}, out.cluster == nil)
	if err != nil {
		_ = out.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	out.DB = d
	out.url = url
	return out, nil
}

// openWaiting opens the pool, retrying while the database cannot be reached (connection
// refused, starting up, shutting down) with a growing pause, each attempt logged, for up to
// cfg.WaitForDatabase (0: until ctx ends). A database that answers with any other error (a
// wrong password, a missing database) fails at once: waiting would not mend it. The embedded
// cluster (wait false) is started by strata itself and is not waited for.
func openWaiting(ctx context.Context, cfg Config, opts db.Options, wait bool) (*db.DB, error) {
	start := time.Now()
	pause := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		d, err := db.Open(ctx, opts)
		if err == nil || !wait || cfg.WaitForDatabase < 0 || !errors.Is(err, db.ErrUnavailable) || ctx.Err() != nil {
			return d, err
		}
		if cfg.WaitForDatabase > 0 {
			// The whole bound is waited: the last pause is cut to what is left of it and one
			// more attempt is made at its end (giving up when the next pause would overshoot
			// gave up after 1.8 s of a 3 s bound).
			left := cfg.WaitForDatabase - time.Since(start)
			if left <= 0 {
				return nil, fmt.Errorf("the database did not become reachable within %v (--wait-for-database): %w", cfg.WaitForDatabase, err)
			}
			pause = min(pause, left)
		}
		cfg.Logger.Warn("waiting for the database", "attempt", attempt, "retry_in", pause.String(), "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 10*time.Second)
	}
}

// waitingHandler answers while the database is not open yet: /healthz 200 (the process is
// alive), everything else 503 with reason unavailable, so a balancer holds traffic back and
// a client retries.
var waitingHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"alive"}` + "\n"))
		return
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = fmt.Fprintf(w, `{"type":"https://strata.dev/problems/unavailable","title":"Service unavailable","status":503,"detail":"strata is starting: waiting for its database","instance":%q,"reason":"unavailable"}`+"\n", r.URL.Path)
})

// swapHandler serves through whichever handler was stored last.
type swapHandler struct{ h atomic.Pointer[http.Handler] }

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

func (s *swapHandler) set(h http.Handler) { s.h.Store(&h) }

// Run serves until ctx is cancelled, then shuts down gracefully.
func Run(ctx context.Context, cfg Config) (err error) {
	cfg.setDefaults()
	// Every record logged with a request's context carries its request_id.
	cfg.Logger = slog.New(httpapi.LogHandler(cfg.Logger.Handler()))
	logger := cfg.Logger
	if cfg.BootstrapToken != "" && cfg.DatabaseURL == "" {
		logger.Info("STRATA_BOOTSTRAP_TOKEN is set; it becomes the admin token on first start")
	}
	if cfg.EmbeddedListen != "" && cfg.DatabaseURL != "" {
		return errors.New("--embedded-listen applies to the embedded cluster only; it cannot be combined with --database-url")
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key must be given together")
	}
	// Check everything that needs no database before starting one, so a typo does not cost
	// an initdb.
	if err := cfg.validate(); err != nil {
		return err
	}
	tuneGC(ctx, logger)

	// Reload requests (SIGHUP) are taken from the start, so one sent while the database is
	// being opened does not stop the process; it is carried out once the replica serves.
	var reloads <-chan struct{}
	if r := reloaderFrom(ctx); r != nil {
		var release func()
		reloads, release = r.listen()
		defer release()
	}

	// Listen first: while the database is being waited for, /healthz answers and every other
	// request (and /readyz) a 503, so a supervisor sees the process alive and a balancer
	// sends nothing yet. "strata serving" is logged once the API serves.
	handler := &swapHandler{}
	handler.set(waitingHandler)
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		WriteTimeout:      5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	var certs *certReloader
	if cfg.TLSCert != "" {
		certs, err = newCertReloader(cfg.TLSCert, cfg.TLSKey, logger)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("load TLS certificate: %w", err)
		}
		// A renewed certificate (the files rewritten) is picked up without a restart.
		srv.TLSConfig = &tls.Config{GetCertificate: certs.GetCertificate, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	serving := false
	defer func() {
		if !serving {
			_ = srv.Close()
		}
	}()
	logger.Info("strata listening; opening the database", "addr", ln.Addr().String())

	reg, qm := newRegistry()
	registerBuildInfo(reg, cfg.Version)
	database, err := OpenDatabase(ctx, cfg, qm)
	if err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
		defer cancel()
		if cerr := database.Close(stopCtx); cerr != nil && err == nil {
			err = cerr
		}
	}()
	d := database.DB
	registerPoolMetrics(reg, d)

	if _, err := d.MigrateWith(ctx, db.MigrateOptions{LockTimeout: cfg.MigrationLockTimeout}); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}

	keys, err := loadKeys(ctx, cfg, d)
	if err != nil {
		return err
	}
	if keys.Primary() != "" {
		logger.Info("encryption keys loaded", "primary", keys.Primary(), "keys", keys.IDs())
	} else {
		logger.Info("no encryption key: secret pillar categories and encrypted projects are refused (--encryption-key-file)")
	}
	// A replica lacking a key the database references serves, but is not ready and refuses
	// every secret read and write (503 naming the ids) until restarted with it.
	if err := CheckKeys(ctx, d, keys); err != nil && len(keys.Missing()) == 0 {
		logger.Warn("cannot check the encryption keys against the database yet; /readyz checks again", "err", err)
	} else if err != nil {
		logger.Error("not ready: the database references encryption keys this replica lacks; secret reads and writes are refused until it is restarted with them",
			"missing", keys.Missing(), "held", keys.IDs())
	}

	tokens := auth.NewService(d)
	secret, err := tokens.Bootstrap(ctx, cfg.BootstrapToken)
	if err != nil {
		return fmt.Errorf("create the first admin token: %w", err)
	}
	if secret != "" {
		path := filepath.Join(cfg.DataDir, "admin-token")
		if cfg.BootstrapToken != "" {
			logger.Info("created the admin token from STRATA_BOOTSTRAP_TOKEN")
		} else if err := writeSecretFile(path, secret); err != nil {
			return fmt.Errorf("write admin token: %w", err)
		} else {
			logger.Info("created the first admin token", "file", path)
		}
	}

	sessionURL := cfg.SessionDatabaseURL
	switch sessionURL {
	case "":
		sessionURL = database.URL() // a direct connection: use it for the lock keeper too
	case "off":
		sessionURL = ""
	}
	citus, err := d.DetectCitus(ctx)
	if err != nil {
		return err
	}
	if citus != nil {
		logger.Info("Citus detected: Terraform projects become distributed schemas on its workers; everything else stays on the coordinator",
			"citus", citus.Version, "extension", citus.Extension, "coordinator", citus.Coordinator, "workers", citus.Workers)
	}
	state, err := tfstate.New(d, tfstate.Options{SessionURL: sessionURL, ClientURL: database.ClientURL(), KeepVersions: cfg.KeepVersions, MaxStateBytes: cfg.MaxStateBytes, Logger: logger, Keys: keys,
		DistributeProjects: citus != nil && len(citus.Workers) > 0})
	if err != nil {
		return err
	}
	if err := state.Start(ctx); err != nil {
		return fmt.Errorf("start state service: %w", err)
	}
	defer state.Close()

	// The pillar render cache needs a session to LISTEN for invalidations; without sessions
	// (a transaction-mode pooler and --session-database-url off) renders are not cached.
	pillars := pillar.NewService(d)
	pillars.ClientURL = database.ClientURL()
	pillars.UseKeys(keys)
	var pillarCache *pillar.Cache
	if sessionURL != "" {
		pillarCache = pillar.NewCache(cfg.RenderCacheBytes)
		pillars.UseCache(pillarCache)
		registerPillarCacheMetrics(reg, pillarCache)
		listenCtx, stopListen := context.WithCancel(ctx)
		defer stopListen()
		go pillarCache.Listen(listenCtx, func(ctx context.Context) (*db.Session, error) {
			return db.OpenSession(ctx, sessionURL, d.Schema(), "strata pillar cache")
		}, d.Schema(), logger)
		// Serve ready from the start when the subscription comes up promptly (it normally
		// takes one connection); otherwise /readyz says why until it does.
		for deadline := time.Now().Add(5 * time.Second); pillarCache.Ready() != nil && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	}

	// One schema registry, connected to the one resource service, so every write of every
	// kind runs its kind's schema; the built-in kinds' schemas of this release are registered
	// (through the same compatibility check as users' kinds) when the registry lacks them.
	resources := resource.NewService(d)
	resources.OnWrite(pillars.InvalidateCache) // read-your-writes for renders on this replica
	resources.OnRename(pillars.Renamed)        // a renamed node keeps its pillar history
	kinds := kind.NewService(d)
	resources.UseSchemas(kinds)
	// Typed pillar categories: their rows are validated by kinds and checked by kinds'
	// registrations like objects.
	pillars.UseKinds(kinds)
	kinds.SetHolder(pillars)
	// What the role cannot serve is said now, not at the first request that needs it.
	var doctorWarnings []string
	if checks, err := Doctor(ctx, d); err != nil {
		logger.Warn("cannot check the database role's privileges", "err", err)
	} else {
		doctorWarnings = DoctorWarnings(checks)
		for _, w := range doctorWarnings {
			logger.Warn("a feature is not available to this database role (strata doctor)", "detail", w)
		}
	}
	if err := kinds.EnsureBuiltin(ctx); err != nil {
		return err
	}
	// Tokens written before scopes named their target kind (pillars:write:web*) are
	// rewritten to what they were meant for (pillars:write:node/web*); each is logged and
	// audited once, whichever replica gets there first.
	migrated, err := tokens.MigrateScopes(ctx, resources.NamesMatch)
	for _, m := range migrated {
		logger.Warn("token scopes migrated to target-qualified names", "token", m.TokenID, "name", m.Name, "from", m.From, "to", m.To, "notes", m.Notes)
	}
	if err != nil {
		return fmt.Errorf("migrate token scopes: %w", err)
	}

	sweepCtx, stopSweep := context.WithCancel(ctx)
	defer stopSweep()
	go retentionLoop(sweepCtx, d, cfg, logger)
	go selectorSyncLoop(sweepCtx, d, logger)
	go keyCheckLoop(sweepCtx, d, keys, logger)

	// One change poller per replica serves every watch of it. It LISTENs for changes when
	// sessions are available and polls once a second regardless. Its context ends with the
	// server's, before the HTTP shutdown, so open watch streams end instead of holding the
	// shutdown up.
	var listenChanges func(context.Context) (*db.Session, error)
	if sessionURL != "" {
		listenChanges = func(ctx context.Context) (*db.Session, error) {
			return db.OpenSession(ctx, sessionURL, d.Schema(), "strata watch")
		}
	}
	hub := resource.NewHub(resources, listenChanges, logger)
	if pillarCache != nil {
		// Writes of objects stamp the renders they alter in the change log and announce
		// themselves after they commit (migration 0036): the poller drops those renders, and
		// the cache serves only while the poller is subscribed too.
		pillarCache.UseChangeFeed()
		hub.FeedRenders(pillarCache)
	}
	// The same poller feeds the replica's list index, from which lists are answered once it
	// has applied the database's current version (resource/index.go).
	var listIndex *resource.Index
	if cfg.ListIndexMaxBytes >= 0 {
		listIndex = hub.ServeLists()
		if cfg.ListIndexMaxBytes > 0 {
			listIndex.MaxBytes = cfg.ListIndexMaxBytes
		}
		if cfg.ListIndexWait > 0 {
			listIndex.Wait = cfg.ListIndexWait
		}
	}
	hubCtx, stopHub := context.WithCancel(ctx)
	defer stopHub()
	go hub.Run(hubCtx)
	// As for the pillar cache: start without a readiness warning when the subscription
	// comes up promptly (one connection).
	for deadline := time.Now().Add(5 * time.Second); listenChanges != nil && !hub.Listening() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}

	latest := migrations.Latest()
	trusted, err := httpapi.ParsePrefixes("trusted proxy", cfg.TrustedProxies)
	if err != nil {
		return err
	}
	saltLegacy, err := httpapi.ParseSaltLegacyClients(cfg.SaltLegacyClients)
	if err != nil {
		return fmt.Errorf("--salt-legacy-clients: %w", err)
	}
	replicaName, _ := os.Hostname()
	replicaName = fmt.Sprintf("%s/%d", replicaName, os.Getpid())
	// The readiness check: an error fails /readyz, except one whose reason only stops writes
	// (read-only, disk-full), which fails /readyz?writes=true alone (httpapi.WritesOnly); it
	// is returned last, so any reason that fails reads is reported before it.
	check := func(ctx context.Context) ([]string, error) {
		// A pooled connection that died (a failover, a terminated backend) fails once and is
		// discarded: try again while idle connections remain, each possibly as stale, so dead
		// connections do not flip readiness (the next check would pass — a flap). What still
		// fails on a fresh connection is the database's state (refused, out of connections).
		err := d.Ping(ctx)
		for try := 0; try < 32 && err != nil && httpapi.ReadyReason(err) == fault.ReasonUnavailable && d.PoolStats().Idle > 0 && ctx.Err() == nil; try++ {
			err = d.Ping(ctx)
		}
		if err != nil && httpapi.ReadyReason(err) == fault.ReasonUnavailable && ctx.Err() == nil {
			err = d.Ping(ctx) // the last idle one was stale: once more, on a new connection
		}
		if err != nil {
			return nil, fmt.Errorf("database: %w", err)
		}
		// Keys before writability: a replica lacking a key the data needs serves no secret
		// read either, so this must fail readiness even while the database refuses writes.
		if err := CheckKeys(ctx, d, keys); err != nil {
			return nil, err
		}
		var writesErr error
		if err := d.CheckWritable(ctx); err != nil {
			if !httpapi.WritesOnly(httpapi.ReadyReason(err)) {
				return nil, fmt.Errorf("database: %w", err)
			}
			writesErr = fmt.Errorf("database: %w", err)
		}
		// After a write failed for want of disk, only a write tells when space is back.
		if writesErr == nil && !db.DiskFullSince().IsZero() {
			if err := d.ProbeWrite(ctx, replicaName); err != nil {
				if !httpapi.WritesOnly(httpapi.ReadyReason(err)) {
					return nil, fmt.Errorf("database: %w", err)
				}
				writesErr = fmt.Errorf("database: %w", err)
			}
		}
		warnings, err := SchemaReadiness(ctx, d, latest)
		if err != nil {
			return nil, err
		}
		warnings = append(warnings, doctorWarnings...)
		if st := state.Readiness(ctx); !st.PGClientsExcluded || st.UnprotectedLocks > 0 {
			warnings = append(warnings, "terraform state: "+st.Detail)
		}
		if listenChanges != nil && !hub.Listening() {
			warnings = append(warnings, "watch: not subscribed to change notifications; events arrive by the once-a-second poll until it is again")
		}
		if pillarCache != nil {
			// Not subscribed means invalidations may be missed: not ready (renders are
			// still computed, never served stale, meanwhile).
			if err := pillarCache.Ready(); err != nil {
				return warnings, err
			}
		}
		return warnings, writesErr
	}
	readiness := newReadinessGate(check, logger).Check
	registerOpsMetrics(reg, state, hub, resources, pillarCache, d, readiness)
	if listIndex != nil {
		registerListIndexMetrics(reg, listIndex)
	}
	api := httpapi.New(httpapi.Options{
		Logger:       logger,
		Registry:     reg,
		MaxBodyBytes: cfg.MaxBodyBytes,
		MaxStateBytes: func() int64 {
			if cfg.MaxStateBytes > 0 {
				return cfg.MaxStateBytes
			}
			return tfstate.DefaultMaxStateBytes
		}(),
		BulkBufferBytes:   cfg.BulkBufferBytes,
		Tokens:            tokens,
		Resources:         resources,
		Kinds:             kinds,
		Pillars:           pillars,
		Keys:              keys,
		KeyRecord:         keyRecord{d: d, keys: keys, logger: logger},
		State:             state,
		SaltLegacyClients: saltLegacy,
		TrustedProxies:    trusted,
		SaltRenderTimeout: cfg.SaltRenderTimeout,
		Version:           cfg.Version,

		Watch:                 hub,
		WatchBookmarkInterval: cfg.WatchBookmarkInterval,
		WatchMaxDuration:      cfg.WatchMaxDuration,
		Status: func(ctx context.Context) (any, error) {
			checks, err := Doctor(ctx, d)
			if err != nil {
				return nil, err
			}
			kc, err := DoctorKeys(ctx, d, keys)
			if err != nil {
				return nil, err
			}
			checks = append(checks, kc)
			st := map[string]any{"version": cfg.Version, "schemaVersion": migrations.Latest(), "schema": cfg.Schema, "checks": checks}
			if c, err := d.DetectCitus(ctx); err != nil {
				return nil, err
			} else if c != nil {
				st["citus"] = c
			}
			return st, nil
		},
		Ready: readiness,
	})

	handler.set(api)
	serving = true
	logger.Info("strata serving", "addr", ln.Addr().String(), "tls", cfg.TLSCert != "", "schema", cfg.Schema, "version", cfg.Version)
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr())
	}
	if reloads != nil {
		go reloadLoop(ctx, reloads, func() {
			logger.Info("reload requested: re-reading the TLS pair and the encryption keys (flags and environment need a restart)")
			if certs != nil {
				_ = certs.Reload() // logged by Reload
			}
			if ReloadKeys(ctx, cfg, keys, logger) == nil { // logged by ReloadKeys
				// The keys just read are checked against the ones the data references now,
				// not at the next periodic check: readiness and secret requests follow at once.
				_ = CheckKeys(ctx, d, keys)
			}
		})
	}

	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		logger.Warn("graceful shutdown incomplete", "err", err)
	}
	return nil
}

// SchemaReadiness is the schema part of /readyz for a binary knowing versions up to known:
// ready on its own schema, ready with a warning on a newer schema that declares it compatible
// (a staged rollout: the previous release keeps serving while the next one migrates), and not
// ready on a schema it cannot run on or one with migrations still pending.
func SchemaReadiness(ctx context.Context, d *db.DB, known int64) ([]string, error) {
	st, err := d.CheckSchema(ctx, known)
	if err != nil {
		return nil, fmt.Errorf("schema version: %w", err)
	}
	if err := st.Err(); err != nil {
		return nil, err
	}
	if w := st.Warning(); w != "" {
		return []string{w}, nil
	}
	return nil, nil
}

// writeSecretFile writes a secret readable only by its owner; it is replaced atomically so a
// reader never sees half a token.
func writeSecretFile(path, secret string) error {
	// 0711: the embedded cluster's unprivileged user must be able to traverse the data dir.
	if err := os.MkdirAll(filepath.Dir(path), 0o711); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(secret+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// validate checks the settings that can be checked without a database.
func (c *Config) validate() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("--listen %q: want host:port (e.g. 127.0.0.1:7400): %w", c.Listen, err)
	}
	if err := db.ValidateSchemaName(c.Schema); err != nil {
		return fmt.Errorf("--schema: %w", err)
	}
	if _, err := httpapi.ParsePrefixes("--trusted-proxies", c.TrustedProxies); err != nil {
		return err
	}
	if _, err := httpapi.ParseSaltLegacyClients(c.SaltLegacyClients); err != nil {
		return fmt.Errorf("--salt-legacy-clients: %w", err)
	}
	if c.ChangesRetention < 0 || c.AuditRetention < 0 {
		return fmt.Errorf("--changes-retention and --audit-retention must be 0 (keep forever) or a positive duration")
	}
	if c.ListIndexWait < 0 {
		return fmt.Errorf("--list-index-wait must be positive")
	}
	if c.RenderCacheBytes < 0 {
		return fmt.Errorf("--render-cache-bytes %d: must be positive", c.RenderCacheBytes)
	}
	if c.BulkBufferBytes < 0 || (c.BulkBufferBytes > 0 && c.BulkBufferBytes < 1<<20) {
		// Below 1 MiB a bulk apply would run a few lines at a time.
		return fmt.Errorf("--bulk-buffer-bytes %d: must be at least 1048576 (1 MiB)", c.BulkBufferBytes)
	}
	if c.WatchBookmarkInterval < 0 {
		return fmt.Errorf("--watch-bookmark-interval must be positive")
	}
	if c.WatchMaxDuration < 0 || (c.WatchMaxDuration > 0 && c.WatchMaxDuration < time.Second) {
		// Zero means the default; below a second every client would spend its time reconnecting.
		return fmt.Errorf("--watch-max-duration %s: must be at least 1s", c.WatchMaxDuration)
	}
	if c.KeepVersions < 0 {
		return fmt.Errorf("--keep-versions %d: must be 0 (keep all) or more", c.KeepVersions)
	}
	if c.BootstrapToken != "" {
		if err := auth.ValidateSecret(c.BootstrapToken); err != nil {
			return fmt.Errorf("STRATA_BOOTSTRAP_TOKEN: %w", err)
		}
	}
	return nil
}
