package tfstate

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/secret"
)

//go:embed sql/*.sql
var sqlFS embed.FS

var q = loadQueries()

func loadQueries() db.Queries {
	all := db.Queries{}
	for _, f := range []string{"project", "state", "lock", "version", "keeper", "encrypt"} {
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
	// Keys encrypts the states of encrypted projects (nil: no key; such projects are
	// refused with secret.ErrNoKey).
	Keys *secret.Keyring
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
	// ReconcileInterval is how often the keeper compares the keys it holds with the lock
	// rows it owns (taking over locks of replicas whose keeper is gone, letting go of keys
	// unlocked elsewhere); 2 heartbeats when 0, never when negative (then only NOTIFY
	// forwards, reconnects and look-ups that find a gone owner trigger it).
	ReconcileInterval time.Duration
	// KeeperTimeout bounds every round trip on the keeper's session; 10s when 0. A call
	// that times out closes the session (the driver cannot tell a slow backend from a dead
	// one), so the keeper marks its locks unprotected and starts over on a new one.
	KeeperTimeout time.Duration
	// KeeperWait bounds how long a request (LOCK) waits for the keeper when it is busy,
	// within the request's own deadline; 5s when 0. Then the request answers 503.
	KeeperWait time.Duration
	// DistributeProjects makes each project schema strata creates or adopts a distributed
	// schema of the Citus cluster the database belongs to (citus_schema_distribute), so
	// projects spread over its workers; the server sets it when it detects Citus with workers.
	// Everything else is the same code on one PostgreSQL.
	DistributeProjects bool
	// PruneInterval is how often versions beyond KeepVersions are deleted for writes made by
	// pg clients (strata's own writes prune at once); 1m when 0.
	PruneInterval time.Duration
}

// keeperStuckAfter is how long a keeper call may take before Readiness reports the keeper
// as not answering.
func (o Options) keeperStuckAfter() time.Duration {
	return min(o.KeeperWait, max(o.HeartbeatInterval, time.Second))
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
	keys    *secret.Keyring
	log     *slog.Logger
	replica string
	channel string
	keeper  *keeper

	mu      sync.Mutex
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started bool

	// Test-only: the control of the concurrent-writers test reads the state without the
	// row lock (noRowLock), and afterRead runs between a write's read and its update.
	noRowLock bool
	afterRead func()
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
	if opts.ReconcileInterval == 0 {
		opts.ReconcileInterval = 2 * opts.HeartbeatInterval
	}
	if opts.KeeperTimeout <= 0 {
		opts.KeeperTimeout = 10 * time.Second
	}
	if opts.KeeperWait <= 0 {
		opts.KeeperWait = 5 * time.Second
	}
	if opts.DistributeProjects {
		citusHolders.Store(true)
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
		keys:    opts.Keys,
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
		s.keeper.withSlot(ctx, func() {
			if err := s.keeper.ensure(ctx); err != nil {
				s.log.Warn("lock keeper cannot connect yet; pg clients are not excluded until it does", "err", err)
			} else {
				s.keeper.reconcile(ctx)
			}
		})
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
// locks are rows only; with a keeper configured whose session is down or not answering, LOCK
// answers 503 until it is back (a lock that would not exclude pg clients is never handed out
// silently). It reads a snapshot the keeper keeps, never waiting for the keeper or the pool,
// so /readyz answers even while the keeper's backend is frozen.
func (s *Service) Readiness(context.Context) Readiness {
	if s.keeper == nil {
		return Readiness{Detail: "no lock-keeper session (--session-database-url off): HTTP state locks do not exclude pg backend clients"}
	}
	return s.keeper.status()
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

// auditStep is audit as a pipeline step.
func auditStep(ctx context.Context, actor Actor, action, target string, detail any) (db.Step, error) {
	return auth.AuditStep(ctx, auth.AuditEntry{Actor: actor.Name, Action: action, Target: target, RemoteAddr: actor.RemoteAddr, Detail: detail})
}

// projectStep is the project check as the first step of a pipeline: the statements after it
// may name the project's schema and fail when it does not exist, so callers look at
// pass the outcome to checkedProject.
func projectStep(project string, exists *bool) db.Step {
	*exists = true // until the check says otherwise (a pipeline that failed before it)
	return db.Step{Query: q.Get("StateProjectExists"), Args: []any{project}, Scan: func(r db.Row) error { return r.Scan(exists) }}
}

// checkedProject turns the outcome of a pipeline that began with projectStep into the
// answer: a 404 when the project does not exist — said by the check, or, when the pipeline
// failed before the check ran (PostgreSQL prepares every statement first, and one naming a
// missing project's schema fails there), by the check run again on its own.
func (s *Service) checkedProject(ctx context.Context, project string, exists bool, err error) error {
	if !exists {
		return fault.NotFound("project %q not found", project)
	}
	if err != nil {
		if perr := requireProject(ctx, s.db, project); perr != nil && fault.KindOf(perr) == fault.KindNotFound {
			return perr
		}
	}
	return err
}

// lockStep reads the workspace's lock (LockGet, LockGetForShare or LockGetForUpdate) as a
// pipeline step.
func lockStep(query, project, workspace string, h *heldLock, locked *bool) db.Step {
	return db.Step{Query: q.Get(query), Args: []any{project, workspace}, Scan: func(r db.Row) error {
		var err error
		*h, *locked, err = scanLock(r)
		return err
	}}
}

func audit(ctx context.Context, qr db.Querier, actor Actor, action, target string, detail any) error {
	return auth.RecordAudit(ctx, qr, auth.AuditEntry{
		Actor: actor.Name, Action: action, Target: target, RemoteAddr: actor.RemoteAddr, Detail: detail,
	})
}

// categorize turns database errors that escape a method into fault categories, by the one
// mapping in db.Fault; fault errors and others pass unchanged.
func categorize(err error) error { return db.Fault(err) }

// categorizeIn is categorize for an operation on one project: on Citus, a worker that does
// not answer makes only the projects it holds unavailable, so the 503 names the project and
// the node (the rest of strata, and other projects, keep working).
func categorizeIn(project string, err error) error {
	if node, ok := db.RemoteNodeDown(err); ok {
		return fault.Unavailable(fault.ReasonUnavailable, err, "project %q is unavailable: the database node holding it (%s) does not answer; other projects are not affected", project, node)
	}
	return categorize(err)
}

// lockedError is a 423 whose body is the holder's LockInfo, which Terraform and OpenTofu
// parse from a conflict answer (and fail on anything else).
func lockedError(detail string, holder api.LockInfo) error {
	body, _ := json.Marshal(holder)
	return &fault.Error{Kind: fault.KindLocked, Detail: detail, Body: body, ContentType: "application/json"}
}

// creationKeys takes both workspace-creation keys, shared, for the transaction.
func creationKeys(ctx context.Context, tx *db.Tx, project, workspace string) error {
	tofu := OpenTofuCreationKey(project, "states")
	var a, b bool
	if err := tx.QueryRow(ctx, q.Get("StateCreationKeys"), tofu).Scan(&a, &b); err != nil {
		return err
	}
	return creationKeysHeld(ctx, tx, project, workspace, tofu, a, b)
}

// creationKeysHeld answers StateCreationKeys' result: nil when both creation keys were
// taken (a and b), else the 423 naming the pg clients that hold them.
func creationKeysHeld(ctx context.Context, tx *db.Tx, project, workspace string, tofu int64, a, b bool) error {
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

// projectNames lists every project, for the jobs that visit each project's schema in turn
// (retention, encryption sweeps, key counts): each project's history lives in its own schema.
func projectNames(ctx context.Context, qr db.Querier) ([]string, error) {
	rows, err := qr.Query(ctx, q.Get("ProjectNamesAll"))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// keyRefStep records the key a sealed value is wrapped with in key_refs (migration 0031), in
// the writing transaction. The versions trigger does so too where strata's schema is in
// the same database as the project's table; on Citus the trigger runs on a worker that has
// no key_refs, so strata records it here, on both (ON CONFLICT DO NOTHING).
func keyRefStep(sealed string) db.Step {
	return db.Step{Query: q.Get("KeyRefRecord"), Args: []any{sealed}}
}
