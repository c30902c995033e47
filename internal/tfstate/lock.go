package tfstate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/sabotage"
	"github.com/stratahq/strata/internal/secret"
)

// heldLock is a tf_locks row.
type heldLock struct {
	ID      string
	Info    api.LockInfo
	StateID int64
	Owner   string
	// CreatedBy is the actor (token) that took the lock.
	CreatedBy string
	Created   time.Time
	// UnprotectedSince is set while the keeper has recorded a gap: it lost or could not take
	// the lock's advisory key, so a pg client may hold it.
	UnprotectedSince *time.Time
	// LastGapStart and LastGapEnd are the last recorded gap that has ended.
	LastGapStart, LastGapEnd *time.Time
	// KeyHeld is the fact, read in the same statement (tf_lock_key_held): a keeper holds
	// the lock's witness key, and so its key, exclusively, so no pg client can.
	KeyHeld bool
}

// Protected is whether the lock excludes pg clients now: its owner's keeper holds the key,
// and no gap is open (a gap closes only once the key is verified).
func (h heldLock) Protected() bool { return h.KeyHeld && h.UnprotectedSince == nil }

// usableBy refuses a lock's ID to anyone but the token that took the lock, unless the actor
// may force-unlock. A lock's ID is not a secret — the 423 answer and GET …/lock show it, as
// Terraform needs — so presenting it proves nothing; the token does.
func (h heldLock) usableBy(actor Actor, project, workspace string) error {
	if h.CreatedBy == "" || h.CreatedBy == actor.Name || actor.CanForceUnlock {
		return nil
	}
	return fault.Forbidden("lock %s on %s/%s was taken by %s; only that token, or one with state:force-unlock:%s, may use or release it", h.ID, project, workspace, h.CreatedBy, project)
}

func scanLock(row db.Row) (heldLock, bool, error) {
	var h heldLock
	var info string
	err := row.Scan(&h.ID, &info, &h.StateID, &h.Owner, &h.CreatedBy, &h.UnprotectedSince, &h.Created,
		&h.LastGapStart, &h.LastGapEnd, &h.KeyHeld)
	if errors.Is(err, db.ErrNotFound) {
		return heldLock{}, false, nil
	}
	if err != nil {
		return heldLock{}, false, err
	}
	_ = json.Unmarshal([]byte(info), &h.Info)
	return h, true, nil
}

// errSameLock ends a LOCK transaction that found the caller's own lock (a retried LOCK):
// nothing to write, and the answer is success.
var errSameLock = errors.New("same lock")

func heldBy(project, workspace string, h heldLock, id string) error {
	if h.ID == id {
		return errSameLock
	}
	return lockedError(fmt.Sprintf("workspace %s/%s is locked by %s (lock %s, %s)", project, workspace, h.Info.Who, h.ID, h.Info.Operation), h.Info)
}

// ParseLockInfo reads a LOCK body: Terraform's LockInfo JSON. ID is required.
func ParseLockInfo(body []byte) (api.LockInfo, error) {
	var info api.LockInfo
	// Created is read apart: an empty or missing time is filled in by Lock, and a bad one
	// is a 400 that names the field rather than Go's time layout.
	var raw struct {
		ID, Operation, Info, Who, Version, Path string
		Created                                 string
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return info, fault.Invalid("", "lock body must be Terraform's LockInfo JSON object with string fields ID, Operation, Info, Who, Version, Created, Path")
	}
	info = api.LockInfo{ID: raw.ID, Operation: raw.Operation, Info: raw.Info, Who: raw.Who, Version: raw.Version, Path: raw.Path}
	if raw.Created != "" {
		t, err := time.Parse(time.RFC3339Nano, raw.Created)
		if err != nil {
			return info, fault.Invalid("/Created", "must be an RFC 3339 time such as 2026-11-22T06:00:00Z, or empty")
		}
		info.Created = t
	}
	if info.ID == "" {
		return info, fault.Invalid("/ID", "lock ID is required")
	}
	for field, v := range map[string]string{"ID": info.ID, "Operation": info.Operation, "Info": info.Info, "Who": info.Who, "Version": info.Version, "Path": info.Path} {
		if strings.ContainsRune(v, 0) || !utf8.ValidString(v) {
			return info, fault.Invalid("/"+field, "must be UTF-8 text without NUL characters")
		}
	}
	if len(info.ID) > 1024 {
		return info, fault.Invalid("/ID", "lock ID is longer than 1024 bytes")
	}
	return info, nil
}

// Lock takes the HTTP lock of a workspace for the LockInfo in body and returns the stored
// LockInfo. Taking a lock the caller already holds (same ID) succeeds again, since clients
// retry a LOCK whose answer they lost. A lock held by someone else answers KindLocked with
// the holder's LockInfo as Body, whether the holder is an HTTP client or a pg backend
// client holding the workspace's advisory key (or a creation key, for a new workspace).
//
// A workspace without a row gets one now, holding a placeholder state, so that the lock
// keeper holds a key that pg clients will try and so that they cannot create the workspace
// meanwhile. The advisory key is taken by the keeper before the lock row commits: there is
// no instant in which the row says "locked" and the key is free.
func (s *Service) Lock(ctx context.Context, actor Actor, project, workspace string, body []byte) (api.LockInfo, error) {
	if err := s.validate(project, workspace); err != nil {
		return api.LockInfo{}, err
	}
	info, err := ParseLockInfo(body)
	if err != nil {
		return api.LockInfo{}, err
	}
	if info.Created.IsZero() {
		info.Created = time.Now().UTC()
	}
	if info.Who == "" {
		info.Who = actor.Name
	}
	stored, _ := json.Marshal(info)

	// A key held by another replica's keeper that is letting go (an UNLOCK it has not yet
	// acted on) is worth a short wait; a pg client's key is not.
	for attempt := 0; ; attempt++ {
		var existing api.LockInfo
		err = s.lockOnce(ctx, actor, project, workspace, info, stored, &existing)
		if errors.Is(err, errSameLock) {
			return existing, nil
		}
		if errors.Is(err, errLockGone) {
			if attempt < 100 {
				continue
			}
			err = fault.New(fault.KindUnavailable, "workspace %s/%s is being locked and unlocked too fast to take; retry", project, workspace)
		}
		if errors.Is(err, errKeeperBusy) && attempt < 30 {
			select {
			case <-ctx.Done():
				return api.LockInfo{}, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if errors.Is(err, errKeeperBusy) {
			err = lockedError(fmt.Sprintf("workspace %s/%s is still held by a strata replica; retry", project, workspace), api.LockInfo{
				ID: "strata-replica", Operation: "releasing", Info: "another strata replica is releasing this lock", Created: time.Now().UTC(), Path: project + "/" + workspace,
			})
		}
		if err != nil {
			return api.LockInfo{}, categorizeIn(project, err)
		}
		return info, nil
	}
}

// errLockGone: LOCK lost the insert race to a lock that was released before it could read
// the holder; the workspace is free again, so LOCK retries at once rather than answer a 409
// that Terraform would not understand.
var errLockGone = errors.New("lock released concurrently")

// errKeeperBusy: the keeper could not take a key that no pg client holds, so another
// replica's keeper holds it.
var errKeeperBusy = errors.New("advisory key held by another strata keeper")

// lockOnce is one attempt at LOCK. With a keeper, it first waits for the keeper's slot
// (bounded by ctx and Options.KeeperWait, holding no pool connection meanwhile), then runs
// the transaction holding it: the keeper takes the key before the row commits, and lets it
// go again when the transaction rolls back.
func (s *Service) lockOnce(ctx context.Context, actor Actor, project, workspace string, info api.LockInfo, stored []byte, existing *api.LockInfo) error {
	deadline := time.Now().Add(s.opts.KeeperWait)
	slotHeld := false
	if s.keeper != nil {
		if err := s.keeper.acquireSlot(ctx); err != nil {
			return err
		}
		slotHeld = true
		defer func() {
			if slotHeld {
				s.keeper.releaseSlot()
			}
		}()
	}
	var took int64
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		// One round trip for the project, the lock and the workspace's row id.
		var (
			exists, ok, haveRow bool
			h                   heldLock
			id                  int64
		)
		err := tx.Pipeline(ctx, projectStep(project, &exists), lockStep("LockGetForShare", project, workspace, &h, &ok),
			db.Step{Query: pq("StateGetID", project), Args: []any{workspace}, Scan: func(r db.Row) error {
				err := r.Scan(&id)
				if haveRow = err == nil; errors.Is(err, db.ErrNotFound) {
					return nil
				}
				return err
			}})
		if err := s.checkedProject(ctx, project, exists, err); err != nil {
			return err
		}
		if ok {
			*existing = h.Info
			return heldBy(project, workspace, h, info.ID)
		}
		if !haveRow {
			if id, err = s.ensureRow(ctx, tx, actor, project, workspace); err != nil {
				return err
			}
		}
		owner := ""
		if s.keeper != nil {
			owner = s.replica
		}
		// The insert and its audit record in one round trip: when the insert loses the race,
		// the error below rolls the record back with everything else.
		rec, err := auditStep(ctx, actor, "state.lock", project+"/"+workspace, map[string]any{"id": info.ID, "operation": info.Operation, "who": info.Who})
		if err != nil {
			return err
		}
		var got string
		err = tx.Pipeline(ctx, db.Step{Query: q.Get("LockAcquire"), Args: []any{project, workspace, info.ID, string(stored), id, owner, actor.Name, actor.RemoteAddr},
			Scan: func(r db.Row) error { return r.Scan(&got) }}, rec)
		if errors.Is(err, db.ErrNotFound) {
			// A concurrent LOCK committed first.
			h, ok, err := scanLock(tx.QueryRow(ctx, q.Get("LockGetForShare"), project, workspace))
			if err != nil {
				return err
			}
			if !ok {
				return errLockGone // released between our INSERT and this read: try again
			}
			*existing = h.Info
			return heldBy(project, workspace, h, info.ID)
		}
		if err != nil {
			return err
		}
		if s.keeper != nil {
			ok, err := s.keeper.takeBy(ctx, deadline, project, id)
			if errors.Is(err, errKeeperLate) {
				slotHeld = false // the keeper's call holds it now
				return errKeeperUnavailable(fmt.Errorf("waited %v for the lock keeper", s.opts.KeeperWait))
			}
			if err != nil {
				return errKeeperUnavailable(err)
			}
			if !ok {
				return s.keyRefused(ctx, tx, project, workspace, id)
			}
			took = id
		} else {
			// No keeper: at least refuse while a pg client holds the key now.
			ok, err := rowKey(ctx, tx, "StateRowKey", project, id)
			if err != nil {
				return err
			}
			if !ok {
				return pgLocked(ctx, tx, project, workspace, id)
			}
		}
		return nil
	})
	if took != 0 && err != nil {
		s.keeper.release(ctx, took)
	}
	return err
}

// ensureRow returns the workspace's row id, creating the row with a placeholder state when
// there is none (taking the creation keys for that instant).
func (s *Service) ensureRow(ctx context.Context, tx *db.Tx, actor Actor, project, workspace string) (int64, error) {
	var id int64
	err := tx.QueryRow(ctx, pq("StateGetID", project), workspace).Scan(&id)
	if err == nil || !errors.Is(err, db.ErrNotFound) {
		return id, err
	}
	// One round trip: the creation keys, the actor and the insert. When a pg client holds a
	// creation key the insert has run for nothing, and the error rolls it back.
	tofu := OpenTofuCreationKey(project, "states")
	var (
		keyA, keyB, raced bool
		x, y              string
	)
	// In an encrypted project the placeholder is sealed too: every row of its table holds
	// ciphertext, and the trigger refuses plaintext there.
	placeholder := string(placeholderState())
	encrypted, err := projectEncrypted(ctx, tx, project)
	if err != nil {
		return 0, err
	}
	if encrypted {
		if placeholder, err = SealState(s.keys, project, workspace, []byte(placeholder)); err != nil {
			return 0, secret.Fault(err)
		}
	}
	err = tx.Pipeline(ctx,
		db.Step{Query: q.Get("StateCreationKeys"), Args: []any{tofu}, Scan: func(r db.Row) error { return r.Scan(&keyA, &keyB) }},
		db.Step{Query: pq("StateSetActor", project), Args: []any{actor.Name, "placeholder"}, Scan: func(r db.Row) error { return r.Scan(&x, &y) }},
		db.Step{Query: pq("StateInsert", project), Args: []any{workspace, placeholder}, Scan: func(r db.Row) error {
			err := r.Scan(&id)
			if raced = errors.Is(err, db.ErrNotFound); raced {
				return nil
			}
			return err
		}})
	if err != nil {
		return 0, err
	}
	if err := creationKeysHeld(ctx, tx, project, workspace, tofu, keyA, keyB); err != nil {
		return 0, err
	}
	if raced {
		// Created concurrently (the insert waited for that transaction): use that row.
		err = tx.QueryRow(ctx, pq("StateGetID", project), workspace).Scan(&id)
	}
	return id, err
}

// UnlockRequest is an UNLOCK: the lock ID to release, or Force (Terraform's force-unlock
// sends an empty body; strata's CLI asks for it explicitly).
type UnlockRequest struct {
	ID    string
	Force bool
}

// ParseUnlockBody reads an UNLOCK body: Terraform's full LockInfo or OpenTofu's
// {"ID": …} (both name the lock), or an empty body, which is Terraform's force-unlock (it
// does not send the lock ID).
func ParseUnlockBody(body []byte) (UnlockRequest, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return UnlockRequest{Force: true}, nil
	}
	var info struct {
		ID string `json:"ID"`
	}
	if err := json.Unmarshal(body, &info); err != nil {
		return UnlockRequest{}, fault.Invalid("/", "unlock body must be Terraform's LockInfo JSON or empty: %v", err)
	}
	if info.ID == "" {
		return UnlockRequest{Force: true}, nil
	}
	if strings.ContainsRune(info.ID, 0) || !utf8.ValidString(info.ID) {
		return UnlockRequest{}, fault.Invalid("/ID", "must be UTF-8 text without NUL characters")
	}
	return UnlockRequest{ID: info.ID}, nil
}

// Unlock releases a workspace's lock. With an ID it releases that lock only (another
// holder answers KindLocked with its LockInfo); unlocking what is not locked succeeds, since
// clients retry an UNLOCK whose answer they lost. Force needs Actor.CanForceUnlock and ends
// whatever holds the workspace: an HTTP lock whatever its ID, or a pg client, by
// terminating the PostgreSQL backend that holds the workspace's key. Forced unlocks are
// audited with what they ended.
//
// A lock that made a placeholder row, when nothing was written, takes the row with it.
func (s *Service) Unlock(ctx context.Context, actor Actor, project, workspace string, req UnlockRequest) error {
	if err := s.validate(project, workspace); err != nil {
		return err
	}
	if req.Force && !actor.CanForceUnlock {
		return fault.Forbidden("force-unlock of %s/%s needs the state:force-unlock scope", project, workspace)
	}
	if !req.Force && req.ID == "" {
		return fault.Invalid("/ID", "lock ID is required (or force)")
	}
	var released heldLock
	var terminated []pgHolder
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		var (
			exists, ok bool
			h          heldLock
		)
		err := tx.Pipeline(ctx, projectStep(project, &exists), lockStep("LockGetForUpdate", project, workspace, &h, &ok))
		if err := s.checkedProject(ctx, project, exists, err); err != nil {
			return err
		}
		if !ok {
			if !req.Force {
				return nil
			}
			terminated, err = s.terminatePGHolders(ctx, tx, project, workspace)
			if err != nil {
				return err
			}
			if len(terminated) == 0 {
				return nil
			}
			return audit(ctx, tx, actor, "state.force-unlock", project+"/"+workspace, map[string]any{"kind": "pg", "holders": terminated})
		}
		if !req.Force && h.ID != req.ID && !sabotage.Active("earlyunlock") {
			return lockedError(fmt.Sprintf("workspace %s/%s is locked by %s with another lock ID (%s)", project, workspace, h.Info.Who, h.ID), h.Info)
		}
		if !req.Force {
			if err := h.usableBy(actor, project, workspace); err != nil {
				return err
			}
		}
		// The release, its audit record and the forward to the owner's keeper go out in one
		// round trip (NOTIFY is delivered at commit).
		action, detail := "state.unlock", map[string]any{"id": h.ID}
		if req.Force {
			action, detail = "state.force-unlock", map[string]any{"kind": "http", "id": h.ID, "who": h.Info.Who, "operation": h.Info.Operation}
		}
		rec, err := auditStep(ctx, actor, action, project+"/"+workspace, detail)
		if err != nil {
			return err
		}
		steps := []db.Step{{Query: q.Get("LockRelease"), Args: []any{project, workspace}}, rec}
		if h.Owner != "" && h.Owner != s.replica {
			var ignored string
			steps = append(steps, db.Step{Query: q.Get("LockNotify"), Args: []any{s.channel, h.Owner}, Scan: func(r db.Row) error { return r.Scan(&ignored) }})
		}
		if err := tx.Pipeline(ctx, steps...); err != nil {
			return err
		}
		n, err := tx.Exec(ctx, pq("PlaceholderStateDelete", project), workspace)
		if err != nil {
			return err
		}
		if n > 0 {
			if _, err := tx.Exec(ctx, pq("PlaceholderDelete", project), workspace); err != nil {
				return err
			}
		}
		released = h
		return nil
	})
	if err != nil {
		return categorizeIn(project, err)
	}
	if released.Owner != "" {
		s.afterUnlock(context.WithoutCancel(ctx), released.Owner, released.StateID)
	}
	return nil
}

// afterUnlock makes the advisory key follow the deleted lock row. This replica's keeper
// lets go at once. Another replica's keeper was told by NOTIFY; give it a moment, and when
// that replica has stopped heart-beating (gone, while its backend lingers), terminate its
// keeper backend, whose other locks this replica's keeper then takes over.
func (s *Service) afterUnlock(ctx context.Context, owner string, key int64) {
	if owner == s.replica {
		if s.keeper != nil {
			s.keeper.releaseAfterUnlock(ctx, key)
		}
		return
	}
	var pid int32
	var start, beat time.Time
	var age time.Duration
	if err := s.db.QueryRow(ctx, q.Get("KeeperGet"), owner).Scan(&pid, &start, &beat, &age); err != nil {
		return
	}
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		var holding bool
		if err := s.db.QueryRow(ctx, q.Get("LockKeeperHolding"), pid, key).Scan(&holding); err != nil || !holding {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	if age < 5*s.opts.HeartbeatInterval {
		s.log.Warn("owner replica has not released an unlocked key yet; it will at its next reconcile", "owner", owner, "key", key)
		return
	}
	var ok bool
	if err := s.db.QueryRow(ctx, q.Get("KeeperTerminate"), owner).Scan(&ok); err != nil {
		s.log.Warn("cannot terminate a dead replica's keeper backend", "owner", owner, "pid", pid, "err", err)
		return
	}
	s.log.Warn("terminated the keeper backend of a replica that stopped heart-beating", "owner", owner, "pid", pid)
	if s.keeper != nil {
		s.keeper.poke()
	}
}

// LockStatus tells who holds a workspace: an HTTP client (its LockInfo), or a pg client
// (the backend's pid, address, application and since when), or nobody.
//
// For an HTTP lock, Protected is read in the same statement (a keeper holds the lock's
// witness key, and so its key; tf_lock_key_held), not taken from a stored flag, so a lock is never
// shown protected after its owner's keeper backend is gone; unprotectedSince and lastGap
// come from the gaps the keeper recorded. A lock whose owner's keeper is gone makes this
// replica's keeper look at once, to take it over.
func (s *Service) LockStatus(ctx context.Context, project, workspace string) (api.LockStatus, error) {
	if err := s.validate(project, workspace); err != nil {
		return api.LockStatus{}, err
	}
	if err := requireProject(ctx, s.db, project); err != nil {
		return api.LockStatus{}, categorizeIn(project, err)
	}
	h, ok, err := scanLock(s.db.QueryRow(ctx, q.Get("LockGet"), project, workspace))
	if err != nil {
		return api.LockStatus{}, categorizeIn(project, err)
	}
	if !ok {
		st, err := s.pgLockStatus(ctx, project, workspace)
		return st, categorizeIn(project, err)
	}
	if !h.KeyHeld && h.Owner != s.replica && s.keeper != nil {
		s.keeper.poke()
	}
	return h.status(), nil
}

// status is the API's view of an HTTP lock.
func (h heldLock) status() api.LockStatus {
	created := h.Created
	st := api.LockStatus{Locked: true, Kind: "http", Info: &api.LockInfo{}, Since: &created, Protected: h.Protected()}
	*st.Info = h.Info
	if !st.Protected && h.Owner != "" {
		since := h.UnprotectedSince
		if since == nil {
			// Not yet noticed by a keeper: the key is not held now, which is all we know.
			now := time.Now().UTC()
			since = &now
		}
		st.UnprotectedSince = since
	}
	if h.LastGapStart != nil && h.LastGapEnd != nil {
		st.LastGap = &api.LockGap{From: h.LastGapStart.UTC(), To: h.LastGapEnd.UTC()}
	}
	return st
}

// LockCounts reports the HTTP locks held (across replicas), how many are marked unprotected,
// and for how many seconds the oldest has been, for metrics and alerts.
func (s *Service) LockCounts(ctx context.Context) (held, unprotected int64, oldestSeconds float64, err error) {
	err = s.db.QueryRow(ctx, q.Get("LockCounts")).Scan(&held, &unprotected, &oldestSeconds)
	return held, unprotected, oldestSeconds, err
}
