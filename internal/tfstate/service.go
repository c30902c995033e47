package tfstate

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
)

//go:embed sql/*.sql
var sqlFS embed.FS

var q = loadQueries()

func loadQueries() db.Queries {
	all := db.Queries{}
	for _, f := range []string{"project", "state", "lock", "version", "keeper"} {
		for name, query := range db.MustParseQueries(sqlFS, "sql/"+f+".sql") {
			if _, dup := all[name]; dup {
				panic("tfstate: query " + name + " defined twice")
			}
			all[name] = query
		}
	}
	return all
}

// pq returns the named query with {{project}} bound to a project's schema. Callers have
// validated the name (ValidateProject); it is quoted as an identifier in any case.
func pq(name, project string) *db.Query { return q.Get(name).WithIdent("project", project) }

// DefaultMaxStateBytes is the state size limit when Options.MaxStateBytes is 0.
const DefaultMaxStateBytes = 64 << 20

// lockProjectDDL is the second int4 of the transaction advisory key
// (db.SchemaKey(schema), lockProjectDDL) that serializes project DDL. ("tf" + 1; the
// two-int4 key space never meets the pg backend's single-bigint keys.)
const lockProjectDDL int32 = 0x74660001

// Options configure a Service. The zero value of every field is usable.
type Options struct {
	// SessionURL reaches PostgreSQL directly or through a session-mode pooler. The lock
	// keeper holds pg clients' advisory keys and LISTENs on a dedicated session opened with
	// it. Empty means no keeper: HTTP locks are rows only, pg backend clients are not
	// excluded by them, and Readiness says so. Never give a transaction-mode pooler here.
	SessionURL string
	// ClientURL is how pg backend clients reach this database: the base of the conn_str that
	// ProjectCredentials prints (its user and password are replaced). SessionURL, or the
	// pool's URL, when empty.
	ClientURL string
	// KeepVersions is how many versions to keep per workspace; 0 keeps all.
	KeepVersions int
	// MaxStateBytes limits the size of a state write; DefaultMaxStateBytes when 0.
	MaxStateBytes int64
	// Logger receives lock keeper events; slog.Default() when nil.
	Logger *slog.Logger
	// ReplicaID names this strata process among replicas (lock ownership, NOTIFY routing);
	// hostname-pid-random when empty. It need not survive restarts: locks of a replica
	// whose keeper session is gone are taken over by the next keeper that looks.
	ReplicaID string
	// HeartbeatInterval is how often the keeper proves its session alive and how fast it
	// notices a lost one; 2s when 0. A replica silent for 5 intervals counts as gone.
	HeartbeatInterval time.Duration
	// PruneInterval is how often versions beyond KeepVersions are deleted for writes made by
	// pg clients (strata's own writes prune at once); 1m when 0.
	PruneInterval time.Duration
}

// Actor is who calls: the name recorded in versions and the audit log, the address the
// request came from, and whether the caller may force-unlock (a scope check the HTTP layer
// has made).
type Actor struct {
	Name           string
	RemoteAddr     string
	CanForceUnlock bool
}

// Service is the Terraform/OpenTofu state capability. Create it with New, call Start to run
// the lock keeper, Close to stop it.
type Service struct {
	db      *db.DB
	opts    Options
	log     *slog.Logger
	replica string
	channel string
	keeper  *keeper

	mu      sync.Mutex
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started bool
}

// New builds a Service on d. It does not connect anything; Start does.
func New(d *db.DB, opts Options) (*Service, error) {
	if opts.MaxStateBytes <= 0 {
		opts.MaxStateBytes = DefaultMaxStateBytes
	}
	if opts.KeepVersions < 0 {
		return nil, fmt.Errorf("keep versions must not be negative (0 keeps all)")
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = 2 * time.Second
	}
	if opts.PruneInterval <= 0 {
		opts.PruneInterval = time.Minute
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	replica := opts.ReplicaID
	if replica == "" {
		host, _ := os.Hostname()
		replica = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), newLineage()[:8])
	}
	s := &Service{
		db:      d,
		opts:    opts,
		log:     logger.With("component", "tfstate"),
		replica: replica,
		// One channel per strata schema, so two installations in one database never hear
		// each other.
		channel: d.Schema() + "_tfstate",
	}
	if opts.SessionURL != "" {
		s.keeper = newKeeper(s, opts.SessionURL)
	}
	return s, nil
}

// ReplicaID is this process's name among replicas.
func (s *Service) ReplicaID() string { return s.replica }

// Start runs the lock keeper (when a session URL was given) and the retention sweep in the
// background until Close or until ctx ends. The keeper's first connection is tried here;
// when it fails, Start still returns nil and keeps retrying (Readiness reports it), so a
// database that is briefly unreachable at boot does not stop strata.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("tfstate: already started")
	}
	s.started = true
	ctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	if s.keeper != nil {
		s.keeper.mu.Lock()
		if err := s.keeper.ensure(ctx); err != nil {
			s.log.Warn("lock keeper cannot connect yet; pg clients are not excluded until it does", "err", err)
		} else {
			s.keeper.reconcile(ctx)
		}
		s.keeper.mu.Unlock()
		s.wg.Add(2)
		go func() { defer s.wg.Done(); s.keeper.run(ctx) }()
		go func() { defer s.wg.Done(); s.keeper.listen(ctx) }()
	}
	if s.opts.KeepVersions > 0 {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.pruneLoop(ctx) }()
	}
	return nil
}

// Close stops the background work and ends the keeper's session, which releases its
// advisory keys. The lock rows stay: another replica's keeper (or this one after a restart)
// takes them over and holds their keys again.
func (s *Service) Close() error {
	s.mu.Lock()
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	s.wg.Wait()
	if s.keeper != nil {
		s.keeper.close()
	}
	return nil
}

// Readiness reports whether HTTP locks also exclude pg backend clients, for /readyz.
type Readiness struct {
	// PGClientsExcluded is true when the lock keeper's session is up.
	PGClientsExcluded bool `json:"pgClientsExcluded"`
	// Detail explains a false PGClientsExcluded, or counts unprotected locks.
	Detail string `json:"detail,omitempty"`
	// KeeperPID is the backend pid of the keeper's session.
	KeeperPID uint32 `json:"keeperPid,omitempty"`
	// UnprotectedLocks counts this replica's locks whose advisory key it could not get back.
	UnprotectedLocks int64 `json:"unprotectedLocks"`
}

// Readiness reports the lock keeper's state. It never fails the readiness of strata as a
// whole, since everything but LOCK works without the keeper: with no keeper configured, HTTP
// locks are rows only; with a keeper configured whose session is down, LOCK answers 503 until
// it reconnects (a lock that would not exclude pg clients is never handed out silently).
func (s *Service) Readiness(ctx context.Context) Readiness {
	if s.keeper == nil {
		return Readiness{Detail: "no lock-keeper session (--session-database-url off): HTTP state locks do not exclude pg backend clients"}
	}
	r := s.keeper.status()
	if r.PGClientsExcluded {
		if err := s.db.QueryRow(ctx, q.Get("KeeperUnprotectedCount"), s.replica).Scan(&r.UnprotectedLocks); err == nil && r.UnprotectedLocks > 0 {
			r.Detail = fmt.Sprintf("%d lock(s) could not re-take their advisory key: pg clients may hold them", r.UnprotectedLocks)
		}
	}
	return r
}

func (s *Service) pruneLoop(ctx context.Context) {
	t := time.NewTicker(s.opts.PruneInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := s.PruneVersions(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("prune state versions", "err", err)
			}
		}
	}
}

// requireProject answers NotFound unless project is a registered project.
func requireProject(ctx context.Context, qr db.Querier, project string) error {
	var ok bool
	if err := qr.QueryRow(ctx, q.Get("StateProjectExists"), project).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return fault.NotFound("project %q not found", project)
	}
	return nil
}

func (s *Service) validate(project, workspace string) error {
	if err := ValidateProject(project, s.db.Schema()); err != nil {
		return err
	}
	return ValidateWorkspace(workspace)
}

func audit(ctx context.Context, qr db.Querier, actor Actor, action, target string, detail any) error {
	return auth.RecordAudit(ctx, qr, auth.AuditEntry{
		Actor: actor.Name, Action: action, Target: target, RemoteAddr: actor.RemoteAddr, Detail: detail,
	})
}

// categorize turns database errors that escape a method into fault categories the HTTP
// layer maps; fault errors pass unchanged.
func categorize(err error) error {
	if err == nil {
		return nil
	}
	var fe *fault.Error
	if errors.As(err, &fe) {
		return err
	}
	switch {
	case errors.Is(err, db.ErrUnavailable):
		return fault.Wrap(fault.KindUnavailable, err, "database unavailable")
	case errors.Is(err, db.ErrLockNotAvailable):
		return fault.Wrap(fault.KindUnavailable, err, "the database is busy with a conflicting change; retry")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return err
}

// lockedError is a 423 whose body is the holder's LockInfo, which Terraform and OpenTofu
// parse from a conflict answer (and fail on anything else).
func lockedError(detail string, holder client.LockInfo) error {
	body, _ := json.Marshal(holder)
	return &fault.Error{Kind: fault.KindLocked, Detail: detail, Body: body, ContentType: "application/json"}
}

// pgHolder is a PostgreSQL backend holding an advisory key, as pg_locks ⨝ pg_stat_activity
// tell (user, address and application are empty unless strata's role may read other
// roles' activity: pg_read_all_stats).
type pgHolder struct {
	Key   int64
	PID   int
	User  string
	Addr  string
	App   string
	Since time.Time
	// Exclusive is false for shared holds: strata's own creators of other workspaces.
	Exclusive bool
}

func (h pgHolder) status() *client.PGHolder {
	return &client.PGHolder{PID: h.PID, User: h.User, ClientAddr: h.Addr, ApplicationName: h.App, Since: h.Since.UTC(), Key: h.Key}
}

// lockInfo synthesizes a LockInfo for a pg client, which stores none: HTTP clients can only
// show a holder they can parse.
func (h pgHolder) lockInfo(project, workspace string) client.LockInfo {
	op := "pg backend lock"
	if h.Key <= 0 {
		op = "pg backend workspace creation"
	}
	who := h.User
	if h.Addr != "" {
		who += "@" + h.Addr
	}
	var b strings.Builder
	fmt.Fprintf(&b, "held by a pg backend client: PostgreSQL backend pid %d", h.PID)
	if h.App != "" {
		fmt.Fprintf(&b, ", application %q", h.App)
	}
	fmt.Fprintf(&b, ", advisory key %d; strata state unlock --force ends it", h.Key)
	return client.LockInfo{
		ID: fmt.Sprintf("pg-backend-pid-%d", h.PID), Operation: op, Info: b.String(), Who: who,
		Created: h.Since.UTC(), Path: project + "/" + workspace,
	}
}

func pgHolders(ctx context.Context, qr db.Querier, keys ...int64) ([]pgHolder, error) {
	rows, err := qr.Query(ctx, q.Get("LockHolders"), keys)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []pgHolder
	for rows.Next() {
		var h pgHolder
		var pid int32
		if err := rows.Scan(&h.Key, &pid, &h.User, &h.Addr, &h.App, &h.Since, &h.Exclusive); err != nil {
			return nil, err
		}
		h.PID = int(pid)
		out = append(out, h)
	}
	return out, rows.Err()
}

// pgLocked builds the 423 for keys held by a pg client, naming the first holder found.
func pgLocked(ctx context.Context, qr db.Querier, project, workspace string, keys ...int64) error {
	holders, err := pgHolders(ctx, qr, keys...)
	if err != nil {
		return err
	}
	if len(holders) == 0 {
		// Released between the try and the look-up, or held by another replica's keeper
		// that is about to let go: the client retries (-lock-timeout).
		return lockedError(fmt.Sprintf("workspace %s/%s is locked by another session; retry", project, workspace), client.LockInfo{
			ID: "pg-backend", Operation: "pg backend lock", Info: "the workspace's advisory key was held; retry",
			Created: time.Now().UTC(), Path: project + "/" + workspace,
		})
	}
	h := holders[0]
	what := "locked"
	if h.Key <= 0 {
		what = "being created"
	}
	return lockedError(fmt.Sprintf("workspace %s/%s is %s by a pg backend client (PostgreSQL backend pid %d)", project, workspace, what, h.PID), h.lockInfo(project, workspace))
}

// creationKeys takes both workspace-creation keys, shared, for the transaction.
func creationKeys(ctx context.Context, tx *db.Tx, project, workspace string) error {
	tofu := OpenTofuCreationKey(project, "states")
	var a, b bool
	if err := tx.QueryRow(ctx, q.Get("StateCreationKeys"), tofu).Scan(&a, &b); err != nil {
		return err
	}
	if a && b {
		return nil
	}
	var keys []int64
	if !a {
		keys = append(keys, TerraformCreationKey)
	}
	if !b {
		keys = append(keys, tofu)
	}
	return pgLocked(ctx, tx, project, workspace, keys...)
}

func setActor(ctx context.Context, tx *db.Tx, actor Actor, source string) error {
	var a, b string
	return tx.QueryRow(ctx, q.Get("StateSetActor"), actor.Name, source).Scan(&a, &b)
}
