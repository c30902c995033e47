package tfstate

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/secret"
)

// State is a workspace's current state, its bytes exactly as written (decrypted, for an
// encrypted project), and their MD5 (the HTTP layer sends it as Content-MD5).
type State struct {
	Data []byte
	MD5  [md5.Size]byte
}

// StateGet returns a workspace's state. A workspace without a row, or whose row only holds
// a lock's placeholder, answers NotFound: Terraform reads 404 as "no state yet".
func (s *Service) StateGet(ctx context.Context, project, workspace string) (State, error) {
	if err := s.validate(project, workspace); err != nil {
		return State{}, err
	}
	var (
		exists, found, placeholder bool
		data                       *string
	)
	// One round trip: the project check, then the read (which fails when the project's
	// schema does not exist, after the check has said so).
	err := s.db.ReadPipeline(ctx, projectStep(project, &exists),
		db.Step{Query: pq("StateGet", project), Args: []any{workspace}, Scan: func(r db.Row) error {
			err := r.Scan(&data, &placeholder)
			if found = err == nil; errors.Is(err, db.ErrNotFound) {
				return nil
			}
			return err
		}})
	if err := s.checkedProject(ctx, project, exists, err); err != nil {
		return State{}, categorizeIn(project, err)
	}
	if !found || placeholder || data == nil || *data == "" {
		return State{}, fault.NotFound("workspace %s/%s has no state", project, workspace)
	}
	b, err := s.open(project, workspace, *data)
	if err != nil {
		return State{}, err
	}
	return State{Data: b, MD5: md5.Sum(b)}, nil
}

// WriteRequest is a state write: the body as sent, the lock ID from ?ID= (empty when the
// client holds no lock), and the request's Content-MD5 decoded (nil when absent).
type WriteRequest struct {
	LockID     string
	Body       []byte
	ContentMD5 []byte
}

// WriteResult describes a stored write.
type WriteResult struct {
	// Version is strata's version number of the state now stored.
	Version int64
	MD5     [md5.Size]byte
	// Unchanged is true for a retry: the same bytes were already stored; nothing was written.
	Unchanged bool
}

// StateWrite stores a state (POST or PUT on the state URL); its first write creates the
// workspace. It enforces, in one transaction:
//
//   - size (KindTooLarge) and Content-MD5 (KindInvalid);
//   - the lock: while the workspace is locked, the write must carry the lock's ID
//     (KindLocked with the holder otherwise); a write naming a lock that is no longer held
//     (force-unlocked meanwhile) is refused (KindConflict), since its writer no longer has
//     the exclusion it thinks it has; an unlocked write without ID (-lock=false) is allowed
//     unless a pg client holds the workspace's key;
//   - the write rules (KindConflict): a lower serial on the same lineage, or another lineage
//     over a state that still has resources. Identical bytes are a retry (Unchanged).
func (s *Service) StateWrite(ctx context.Context, actor Actor, project, workspace string, req WriteRequest) (WriteResult, error) {
	if err := s.validate(project, workspace); err != nil {
		return WriteResult{}, err
	}
	if int64(len(req.Body)) > s.opts.MaxStateBytes {
		return WriteResult{}, fault.New(fault.KindTooLarge, "state of %d bytes exceeds the limit of %d bytes", len(req.Body), s.opts.MaxStateBytes)
	}
	sum := md5.Sum(req.Body)
	if req.ContentMD5 != nil && !bytes.Equal(req.ContentMD5, sum[:]) {
		return WriteResult{}, fault.Invalid("/Content-MD5", "Content-MD5 does not match the body")
	}
	if len(bytes.TrimSpace(req.Body)) == 0 {
		// An empty row makes pg clients fail with "no state".
		return WriteResult{}, fault.Invalid("/", "state is empty")
	}
	if !utf8.Valid(req.Body) || bytes.IndexByte(req.Body, 0) >= 0 {
		return WriteResult{}, fault.Invalid("/", "state must be UTF-8 text without NUL bytes (the pg backend stores it as text)")
	}
	if err := checkStateShape(req.Body); err != nil {
		return WriteResult{}, err
	}
	res, err := s.write(ctx, actor, project, workspace, req.LockID, req.Body, writeOptions{source: "http"})
	return res, categorizeIn(project, err)
}

// writeRules decides whether next may replace cur (both readable states): nil to write,
// errUnchanged for a retry, a KindConflict otherwise.
func writeRules(project, workspace string, cur, next []byte) error {
	if bytes.Equal(cur, next) {
		return errUnchanged
	}
	c, n := parseState(cur), parseState(next)
	if !c.Readable || !n.Readable {
		return nil
	}
	if n.Lineage != c.Lineage {
		if c.HasResources {
			return fault.Conflict("state of %s/%s has lineage %s and still has resources; a state of lineage %s cannot replace it (destroy the resources, or restore a version)", project, workspace, c.Lineage, n.Lineage)
		}
		return nil
	}
	if n.Serial < c.Serial {
		return fault.Conflict("stale state for %s/%s: serial %d is lower than the stored serial %d", project, workspace, n.Serial, c.Serial)
	}
	if n.Serial == c.Serial {
		// Terraform and OpenTofu raise the serial with every change they persist, so other
		// bytes under the stored serial come from a writer that started from an older state:
		// two -lock=false runs that read the same serial, or state push -force of a file one
		// serial behind.
		return fault.Conflict("stale state for %s/%s: serial %d is already stored with other content (another writer started from the same state)", project, workspace, n.Serial)
	}
	return nil
}

var errUnchanged = errors.New("unchanged")

// writeOptions vary the one write path between StateWrite and VersionRestore.
type writeOptions struct {
	// source is recorded with the version: http or restore.
	source string
	// prepare, when set, rewrites the body given the current state (restore bumps the
	// serial) and replaces the write rules.
	prepare func(cur []byte, exists bool) []byte
	// after runs in the write's transaction once the state is stored (audit).
	after func(tx *db.Tx, res WriteResult) error
}

// write is the one write path, for StateWrite and VersionRestore.
func (s *Service) write(ctx context.Context, actor Actor, project, workspace, lockID string, body []byte, o writeOptions) (WriteResult, error) {
	prepare, source := o.prepare, o.source
	var res WriteResult
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		// One round trip for the checks and the read: the project, the lock (FOR SHARE, so
		// an UNLOCK cannot slip in before commit), and the state row FOR UPDATE (a concurrent
		// writer waits here and then reads what this one wrote, so the write rules judge it
		// against the state it would replace: TestConcurrentWriters).
		read := "StateGetForUpdate"
		if s.noRowLock {
			read = "StateGetNoRowLock"
		}
		var (
			projectExists, encrypted, locked, exists, placeholder bool
			lock                                                  heldLock
			id                                                    int64
			cur                                                   string
		)
		projectExists = true // until the check says otherwise (see projectStep)
		err := tx.Pipeline(ctx, db.Step{Query: q.Get("StateProjectForWrite"), Args: []any{project},
			Scan: func(r db.Row) error { return r.Scan(&projectExists, &encrypted) }},
			lockStep("LockGetForShare", project, workspace, &lock, &locked),
			db.Step{Query: pq(read, project), Args: []any{workspace}, Scan: func(r db.Row) error {
				err := r.Scan(&id, &cur, &placeholder)
				if exists = err == nil; errors.Is(err, db.ErrNotFound) {
					return nil
				}
				return err
			}})
		if err := s.checkedProject(ctx, project, projectExists, err); err != nil {
			return err
		}
		if s.afterRead != nil {
			s.afterRead()
		}
		switch {
		case locked && lock.ID != lockID:
			return lockedError(fmt.Sprintf("workspace %s/%s is locked by %s (lock %s); a write must carry that lock's ID", project, workspace, lock.Info.Who, lock.ID), lock.Info)
		case !locked && lockID != "":
			return staleLock(ctx, tx, project, workspace, lockID)
		}
		if locked {
			if err := lock.usableBy(actor, project, workspace); err != nil {
				return err
			}
		}
		if exists {
			if err := pgClientCheck(ctx, tx, project, workspace, id, lock, locked); err != nil {
				return err
			}
		}
		hasState := exists && !placeholder && cur != ""
		if hasState {
			plain, err := s.open(project, workspace, cur)
			if err != nil {
				return err
			}
			cur = string(plain)
		}
		if prepare != nil {
			body = prepare([]byte(cur), hasState)
		} else if hasState {
			if err := writeRules(project, workspace, []byte(cur), body); err != nil {
				if errors.Is(err, errUnchanged) {
					res.Unchanged = true
					res.MD5 = md5.Sum(body)
					return tx.QueryRow(ctx, pq("VersionLatest", project), workspace).Scan(&res.Version)
				}
				return err
			}
		}
		res.MD5 = md5.Sum(body)
		// The rest in one round trip: who writes (for the versions trigger), the write, the
		// version it made, and the pruning of old versions.
		var a, b string
		steps := []db.Step{{Query: pq("StateSetActor", project), Args: []any{actor.Name, source}, Scan: func(r db.Row) error { return r.Scan(&a, &b) }}}
		stored := string(body)
		if encrypted {
			var err error
			if stored, err = SealState(s.keys, project, workspace, body); err != nil {
				return secret.Fault(err)
			}
			steps = append(steps, plainStep(project, workspace, body), keyRefStep(stored))
		}
		if !exists {
			if err := creationKeys(ctx, tx, project, workspace); err != nil {
				return err
			}
			steps = append(steps, db.Step{Query: pq("StateInsert", project), Args: []any{workspace, stored}, Scan: func(r db.Row) error {
				err := r.Scan(&id)
				if errors.Is(err, db.ErrNotFound) {
					return fault.Conflict("workspace %s/%s was created concurrently; retry", project, workspace)
				}
				return err
			}})
		} else {
			steps = append(steps, db.Step{Query: pq("StateUpdate", project), Args: []any{id, stored}})
		}
		steps = append(steps, db.Step{Query: pq("VersionLatest", project), Args: []any{workspace}, Scan: func(r db.Row) error { return r.Scan(&res.Version) }})
		if s.opts.KeepVersions > 0 {
			steps = append(steps, db.Step{Query: pq("VersionPrune", project), Args: []any{workspace, s.opts.KeepVersions}})
		}
		if err := tx.Pipeline(ctx, steps...); err != nil {
			return err
		}
		if o.after != nil {
			return o.after(tx, res)
		}
		return nil
	})
	return res, err
}

// pgClientCheck makes sure no pg client holds the workspace's key while a write or delete
// commits. A lock whose keeper holds the key exclusively (KeyHeld, read by the statement
// that read the lock row, in this transaction) needs no more: no
// pg client can hold it. Otherwise — no lock, a lock without keeper, or one whose keeper
// lost the key (its session broke, timed out, or its replica died, whether or not a keeper
// has noticed yet) — the write takes the row's key shared for the transaction, which fails
// while a pg client holds it exclusively.
//
// Why the fact and not the stored flag: unprotected_since is written only after a keeper
// notices a loss, and the window before that is exactly when a pg client gets in. Why not
// the try alone: the owner's keeper holds the key exclusively, so the shared try would
// refuse the lock's own holder; a probe of the lock's witness key (migration 0017), which
// only keepers take, does not. It replaced a join of pg_locks and pg_stat_activity that cost
// 0.20 ms per read (docs/benchmarks.md, "Round trips back under 1.1× local").
func pgClientCheck(ctx context.Context, tx *db.Tx, project, workspace string, id int64, lock heldLock, locked bool) error {
	if locked && lock.KeyHeld {
		return nil
	}
	ok, err := rowKey(ctx, tx, "StateRowKey", project, id)
	if err != nil {
		return err
	}
	if !ok {
		return pgLocked(ctx, tx, project, workspace, id)
	}
	return nil
}

// StateDelete removes a workspace's state (its versions stay, so it can be restored). While
// the workspace is locked, lockID must be the lock's; the lock goes with the state.
func (s *Service) StateDelete(ctx context.Context, actor Actor, project, workspace, lockID string) error {
	if err := s.validate(project, workspace); err != nil {
		return err
	}
	var released heldLock
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		if err := requireProject(ctx, tx, project); err != nil {
			return err
		}
		lock, locked, err := scanLock(tx.QueryRow(ctx, q.Get("LockGetForUpdate"), project, workspace))
		if err != nil {
			return err
		}
		if locked && lock.ID != lockID {
			return lockedError(fmt.Sprintf("workspace %s/%s is locked by %s (lock %s)", project, workspace, lock.Info.Who, lock.ID), lock.Info)
		}
		if locked {
			if err := lock.usableBy(actor, project, workspace); err != nil {
				return err
			}
		}
		var id int64
		var cur string
		var placeholder bool
		err = tx.QueryRow(ctx, pq("StateGetForUpdate", project), workspace).Scan(&id, &cur, &placeholder)
		if errors.Is(err, db.ErrNotFound) {
			return fault.NotFound("workspace %s/%s has no state", project, workspace)
		}
		if err != nil {
			return err
		}
		if err := pgClientCheck(ctx, tx, project, workspace, id, lock, locked); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, pq("StateDelete", project), id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, pq("PlaceholderDelete", project), workspace); err != nil {
			return err
		}
		if locked {
			if _, err := tx.Exec(ctx, q.Get("LockRelease"), project, workspace); err != nil {
				return err
			}
			if lock.Owner != "" && lock.Owner != s.replica {
				var ignored string
				if err := tx.QueryRow(ctx, q.Get("LockNotify"), s.channel, lock.Owner).Scan(&ignored); err != nil {
					return err
				}
			}
			released = lock
		}
		return audit(ctx, tx, actor, "state.delete", project+"/"+workspace, map[string]any{"placeholder": placeholder})
	})
	if err != nil {
		return categorizeIn(project, err)
	}
	if released.Owner != "" {
		s.afterUnlock(context.WithoutCancel(ctx), released.Owner, released.StateID)
	}
	return nil
}

// WorkspaceList lists a page of a project's workspaces with their lock holders (HTTP or pg),
// in byte order of their names, and reports whether more follow the page.
func (s *Service) WorkspaceList(ctx context.Context, project string, opts WorkspaceListOptions) ([]api.Workspace, bool, error) {
	if err := ValidateProject(project, s.db.Schema()); err != nil {
		return nil, false, err
	}
	if err := requireProject(ctx, s.db, project); err != nil {
		return nil, false, categorizeIn(project, err)
	}
	var limit *int
	if opts.Limit > 0 {
		n := opts.Limit + 1
		limit = &n
	}
	rows, err := s.db.Query(ctx, pq("WorkspaceList", project), project, opts.After, limit)
	if err != nil {
		return nil, false, categorizeIn(project, err)
	}
	defer rows.Close()
	out := []api.Workspace{}
	for rows.Next() {
		var w api.Workspace
		var pid *int32
		var user, addr, app *string
		var since *time.Time
		var key *int64
		// The lock columns are NULL without an HTTP lock: scanned as pointers, then copied.
		var lockID, info, owner, createdBy *string
		var stateID *int64
		var created *time.Time
		var keyHeld *bool
		var h heldLock
		if err := rows.Scan(&w.Name, &w.Size, &w.Serial, &w.Lineage, &w.Placeholder, &w.Version, &w.UpdatedAt,
			&pid, &user, &addr, &app, &since, &key,
			&lockID, &info, &stateID, &owner, &createdBy, &h.UnprotectedSince, &created,
			&h.LastGapStart, &h.LastGapEnd, &keyHeld); err != nil {
			return nil, false, categorizeIn(project, err)
		}
		if w.Placeholder {
			w.Size, w.Serial, w.Lineage = 0, nil, ""
		}
		switch {
		case lockID != nil:
			h.ID, h.StateID, h.Owner, h.CreatedBy, h.Created, h.KeyHeld = *lockID, *stateID, *owner, *createdBy, *created, *keyHeld
			_ = json.Unmarshal([]byte(*info), &h.Info)
			st := h.status()
			w.Lock = &st
		case pid != nil:
			ph := pgHolder{Key: *key, PID: int(*pid), User: *user, Addr: *addr, App: *app, Since: *since}
			t := ph.Since.UTC()
			w.Lock = &api.LockStatus{Locked: true, Kind: "pg", PG: ph.status(), Since: &t}
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, false, categorizeIn(project, err)
	}
	more := opts.Limit > 0 && len(out) > opts.Limit
	if more {
		out = out[:opts.Limit]
	}
	return out, more, nil
}

// WorkspaceListOptions page through a project's workspaces in byte order of their names.
type WorkspaceListOptions struct {
	// After is the last name of the previous page ("" from the start).
	After string
	// Limit is the page size; 0 means no limit.
	Limit int
}

// staleLock is the 409 for a write whose lock ID this workspace does not hold. When another
// workspace of the project holds it, the client's lock_address points there (a backend block
// whose address alone was changed for a second workspace): the answer names that workspace
// and the fix, since "force-unlocked?" would send the operator looking for the wrong culprit.
// Only the project's own workspaces are looked at: the caller's scope covers the project.
func staleLock(ctx context.Context, tx *db.Tx, project, workspace, lockID string) error {
	var other string
	err := tx.QueryRow(ctx, q.Get("LockWorkspaceOf"), project, lockID).Scan(&other)
	switch {
	case err == nil:
		return fault.Conflict("lock %s is held on %s/%s, not on %s/%s: the client's lock_address points at %s/%s while its address points at %s/%s; the write was refused (each workspace needs its own address, lock_address and unlock_address: strata project backend-config %s %s)",
			lockID, project, other, project, workspace, project, other, project, workspace, project, workspace)
	case errors.Is(err, db.ErrNotFound):
		return fault.Conflict("lock %s on %s/%s is no longer held (force-unlocked?); the write was refused", lockID, project, workspace)
	}
	return err
}
