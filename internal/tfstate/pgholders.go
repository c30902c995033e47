package tfstate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
)

// This file is the one home of pg-holder discovery: which PostgreSQL backends (pg backend
// clients, never strata's own keepers) hold a workspace's advisory keys, how they are shown
// (GET …/lock, the 423 answer's LockInfo) and how force-unlock ends them.

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

func (h pgHolder) status() *api.PGHolder {
	return &api.PGHolder{PID: h.PID, User: h.User, ClientAddr: h.Addr, ApplicationName: h.App, Since: h.Since.UTC(), Key: h.Key}
}

// lockInfo synthesizes a LockInfo for a pg client, which stores none: HTTP clients can only
// show a holder they can parse.
func (h pgHolder) lockInfo(project, workspace string) api.LockInfo {
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
	return api.LockInfo{
		ID: fmt.Sprintf("pg-backend-pid-%d", h.PID), Operation: op, Info: b.String(), Who: who,
		Created: h.Since.UTC(), Path: project + "/" + workspace,
	}
}

// citusHolders is set when a Service distributes projects on Citus (Options.
// DistributeProjects): pg clients' keys are then held on the workers, and pgHolders reads
// them from citus_locks (LockHoldersCitus), a view that exists only with Citus. A process
// serves one database, so one flag serves it.
var citusHolders atomic.Bool

// rowKey takes a workspace's key for the transaction without waiting (query StateRowKey,
// shared, or EncryptRowKey, exclusive) and reports whether it got it. On Citus it takes the
// key on the project's worker as well (the …Worker variant), where the pg backend takes it.
func rowKey(ctx context.Context, tx *db.Tx, query, project string, id int64) (bool, error) {
	var ok bool
	if err := tx.QueryRow(ctx, q.Get(query), id).Scan(&ok); err != nil || !ok || !citusHolders.Load() {
		return ok, err
	}
	err := tx.QueryRow(ctx, pq(query+"Worker", project), id).Scan(&ok)
	return ok, err
}

func pgHolders(ctx context.Context, qr db.Querier, keys ...int64) ([]pgHolder, error) {
	query := q.Get("LockHolders")
	if citusHolders.Load() {
		query = q.Get("LockHoldersCitus")
	}
	rows, err := qr.Query(ctx, query, keys)
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
		return lockedError(fmt.Sprintf("workspace %s/%s is locked by another session; retry", project, workspace), api.LockInfo{
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

// keyRefused explains why the keeper could not take key: a pg client holds it (423 at
// once), or nobody visible does, which means another replica's keeper (errKeeperBusy).
func (s *Service) keyRefused(ctx context.Context, tx *db.Tx, project, workspace string, key int64) error {
	holders, err := pgHolders(ctx, tx, key)
	if err != nil {
		return err
	}
	if len(holders) == 0 {
		return errKeeperBusy
	}
	return pgLocked(ctx, tx, project, workspace, key)
}

// workspaceKeys are the keys a pg client holds to lock a workspace: its row id, or, for a
// workspace without a row, the creation keys of its schema (OpenTofu's key for this schema,
// and Terraform's -1, which a first apply holds for its whole run).
func workspaceKeys(ctx context.Context, qr db.Querier, project, workspace string) ([]int64, error) {
	var id int64
	err := qr.QueryRow(ctx, pq("StateGetID", project), workspace).Scan(&id)
	switch {
	case err == nil:
		return []int64{id}, nil
	case errors.Is(err, db.ErrNotFound):
		return []int64{TerraformCreationKey, OpenTofuCreationKey(project, "states")}, nil
	}
	return nil, err
}

// pgLockStatus is LockStatus for a workspace without an HTTP lock: the first pg client
// holding one of its keys exclusively, or not locked.
func (s *Service) pgLockStatus(ctx context.Context, project, workspace string) (api.LockStatus, error) {
	keys, err := workspaceKeys(ctx, s.db, project, workspace)
	if err != nil {
		return api.LockStatus{}, err
	}
	holders, err := pgHolders(ctx, s.db, keys...)
	if err != nil || len(holders) == 0 || !holders[0].Exclusive {
		return api.LockStatus{}, err
	}
	h := holders[0]
	since := h.Since.UTC()
	return api.LockStatus{Locked: true, Kind: "pg", PG: h.status(), Since: &since}, nil
}

// terminatePGHolders ends the PostgreSQL backends of pg clients holding the workspace: its
// row id key, or, for a workspace without a row, the creation keys of its schema (OpenTofu's
// key for this schema, and Terraform's -1, which a first apply holds for its whole run).
func (s *Service) terminatePGHolders(ctx context.Context, tx *db.Tx, project, workspace string) ([]pgHolder, error) {
	keys, err := workspaceKeys(ctx, tx, project, workspace)
	if err != nil {
		return nil, err
	}
	holders, err := pgHolders(ctx, tx, keys...)
	if err != nil {
		return nil, err
	}
	var ended []pgHolder
	for _, h := range holders {
		if !h.Exclusive {
			continue // strata's own creators, for an instant
		}
		var ok bool
		if err := tx.QueryRow(ctx, q.Get("LockTerminate"), h.PID).Scan(&ok); err != nil {
			if errors.Is(err, db.ErrPermission) {
				return nil, s.terminateRefused(ctx, h.PID, err)
			}
			return nil, err
		}
		if ok {
			s.log.Warn("force-unlock terminated a pg backend client", "project", project, "workspace", workspace, "pid", h.PID, "key", h.Key, "user", h.User, "addr", h.Addr)
			ended = append(ended, h)
		}
	}
	return ended, nil
}

// terminateRefused explains a force-unlock that PostgreSQL refused to end backend pid: the
// role lacks pg_signal_backend (grant it), or the backend is a superuser's, which no role but
// a superuser may end — there the grant is not the answer, and saying so sent an operator who
// had granted it in circles (issue 28). PostgreSQL's own words come with it. The reasons are
// read on a pool connection: the transaction of the refused statement is aborted.
func (s *Service) terminateRefused(ctx context.Context, pid int, err error) error {
	var member, super bool
	var user string
	if qerr := s.db.QueryRow(ctx, q.Get("LockTerminateRefusal"), int32(pid)).Scan(&member, &user, &super); qerr != nil {
		return fault.Wrap(fault.KindForbidden, err, "strata's database role may not terminate backend %d: PostgreSQL refused: %s", pid, db.ServerMessage(err))
	}
	switch {
	case !member:
		return fault.Wrap(fault.KindForbidden, err, "strata's database role may not terminate backend %d of role %q (grant it pg_signal_backend): PostgreSQL refused: %s", pid, user, db.ServerMessage(err))
	case super:
		return fault.Wrap(fault.KindForbidden, err, "backend %d, which holds the lock, is of the superuser role %q, and PostgreSQL lets only a superuser end a superuser's backend (pg_signal_backend, which strata's role has, is not enough): have that client let go, or end it as a superuser with SELECT pg_terminate_backend(%d). PostgreSQL refused: %s", pid, user, pid, db.ServerMessage(err))
	}
	return fault.Wrap(fault.KindForbidden, err, "strata's database role may not terminate backend %d of role %q: PostgreSQL refused: %s", pid, user, db.ServerMessage(err))
}
