package tfstate

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/secret"
)

// This file is encryption at rest for Terraform state (issue 22): encrypted projects.
//
// # Storage
//
// An encrypted project keeps the pg backend's layout; only what its states rows hold
// changes. Every state is sealed by package secret (AES-256-GCM under a fresh data key,
// wrapped by the primary key-encryption key) and stored in the same text column as
// SealedPrefix followed by the sealed bytes in standard base64: text, because the column is
// text; recognisable, so every reader (this package, the offline `strata state decrypt`, an
// operator with psql) can tell a sealed state from a plain one, and a project half-way
// through its conversion holds both.
//
// # Associated data
//
// A sealed state is bound to its project and workspace (stateAAD), not to its serial. The
// versions trigger copies a state's stored text verbatim into tf_state_versions, so a
// version must open with the identity the states row had, and nothing else the trigger
// knows: binding the serial would need the serial outside the ciphertext to open it, and
// the trigger would have to be trusted to keep the two in step. Binding project and
// workspace is what matters: access is granted per project, outputs-only tokens read one
// project's workspaces, and a ciphertext moved to another workspace's or project's row
// (by someone with write access to the database but not the key) fails to open (ErrTampered,
// a 500 that serves nothing) instead of being served under the other name. Within one
// workspace, putting an older version's ciphertext back is a rollback anyone with the key
// can do through restore anyway. A backup restored under the same project and workspace
// names, with the same key, opens.
//
// # What the trigger records
//
// The trigger cannot read a sealed state, so strata passes serial, lineage, MD5 and size of
// the plaintext in the writing transaction (StateSetPlain; migration 0026), and versions
// list, compare and restore by the plaintext clients see. Content-MD5 of a read is the
// plaintext's MD5. A plaintext write into an encrypted project (a pg backend client with
// credentials from before the conversion) is refused by the trigger: the pg backend cannot
// use an encrypted project, and `project credentials` refuses one.
//
// # Converting a project
//
// ProjectEncrypt converts an existing project in batches, each one transaction. The first
// batch refuses (423) while any workspace is locked, by an HTTP lock or by a pg client
// holding its advisory key: a run in progress would otherwise read or write across the
// change (a pg client's final write would be refused, leaving its run's state in
// errored.tfstate). It then marks the project encrypted, so from that commit every write is
// sealed and plaintext writes are refused, and every batch locks the rows it seals (FOR
// UPDATE, and for states the row's advisory key exclusively for the transaction), so no
// writer, HTTP or pg, interleaves with a row's conversion. Between batches HTTP clients
// keep working: reads open sealed and plain rows alike. A batch that finds a workspace
// locked answers 423 and the conversion resumes where it stopped when called again.

// SealedPrefix starts a sealed state in a states row or a version.
const SealedPrefix = "strata:sv1:"

// DefaultEncryptBatch is how many states and versions one ProjectEncrypt call seals when
// the caller gives no limit.
const DefaultEncryptBatch = 100

// IsSealedState reports whether stored text is a sealed state.
func IsSealedState(stored string) bool { return strings.HasPrefix(stored, SealedPrefix) }

// stateAAD is the identity a sealed state is bound to: project and workspace.
func stateAAD(project, workspace string) []byte {
	return []byte("strata tfstate\x00" + project + "\x00" + workspace)
}

// SealState seals a state's plaintext for project/workspace in the stored form.
func SealState(keys *secret.Keyring, project, workspace string, plain []byte) (string, error) {
	if err := keys.Require(); err != nil {
		return "", err
	}
	sealed, err := keys.Seal(plain, stateAAD(project, workspace))
	if err != nil {
		return "", err
	}
	return SealedPrefix + base64.StdEncoding.EncodeToString(sealed), nil
}

// OpenState returns the plaintext of stored text from project/workspace's row or versions:
// plain text as it is, a sealed state opened with keys (secret.ErrNoKey without keys,
// secret.ErrMissingKey naming the key, secret.ErrTampered when it was altered or belongs to
// another workspace).
func OpenState(keys *secret.Keyring, project, workspace, stored string) ([]byte, error) {
	enc, ok := strings.CutPrefix(stored, SealedPrefix)
	if !ok {
		return []byte(stored), nil
	}
	if err := keys.Require(); err != nil {
		return nil, err
	}
	sealed, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, secret.ErrTampered
	}
	return keys.Open(sealed, stateAAD(project, workspace))
}

// rewrapState re-wraps a sealed state's data key under the primary key.
func rewrapState(keys *secret.Keyring, project, workspace, stored string) (string, error) {
	enc, ok := strings.CutPrefix(stored, SealedPrefix)
	if !ok {
		return stored, nil
	}
	sealed, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", secret.ErrTampered
	}
	out, err := keys.Rewrap(sealed, stateAAD(project, workspace))
	if err != nil {
		return "", err
	}
	return SealedPrefix + base64.StdEncoding.EncodeToString(out), nil
}

// open is OpenState with the service's keys, its errors made faults.
func (s *Service) open(project, workspace, stored string) ([]byte, error) {
	b, err := OpenState(s.keys, project, workspace, stored)
	if err != nil {
		if errors.Is(err, secret.ErrTampered) {
			s.log.Error("a sealed state does not open (altered, or moved from another workspace)", "project", project, "workspace", workspace)
		}
		return nil, secret.Fault(err)
	}
	return b, nil
}

// plainStep tells the versions trigger, in the writing transaction, what it cannot read
// from a sealed state: serial, lineage, MD5 and size of the plaintext.
func plainStep(project, workspace string, plain []byte) db.Step {
	m := parseState(plain)
	serial, lineage := "", ""
	if m.Readable {
		serial, lineage = strconv.FormatInt(m.Serial, 10), m.Lineage
	}
	sum := md5.Sum(plain)
	var a, b, c, d, e string
	return db.Step{Query: pq("StateSetPlain", project),
		Args: []any{workspace, serial, lineage, hex.EncodeToString(sum[:]), strconv.Itoa(len(plain))},
		Scan: func(r db.Row) error { return r.Scan(&a, &b, &c, &d, &e) }}
}

// projectEncrypted reports, in a transaction about to create a row, whether the project is
// encrypted (holding off a conversion until the transaction ends).
func projectEncrypted(ctx context.Context, tx *db.Tx, project string) (bool, error) {
	var enc bool
	err := tx.QueryRow(ctx, q.Get("EncryptProjectEncrypted"), project).Scan(&enc)
	return enc, err
}

// ProjectEncrypt converts up to limit (DefaultEncryptBatch when 0) of a project's plain
// states and versions to sealed ones, in one transaction, and reports how many remain. The
// first call marks the project encrypted; call again until Done. See "Converting a project"
// above for the locking.
func (s *Service) ProjectEncrypt(ctx context.Context, actor Actor, project string, limit int) (api.ProjectEncryption, error) {
	if err := ValidateProject(project, s.db.Schema()); err != nil {
		return api.ProjectEncryption{}, err
	}
	if limit <= 0 {
		limit = DefaultEncryptBatch
	}
	if err := s.keys.Require(); err != nil {
		return api.ProjectEncryption{}, secret.Fault(err)
	}
	out := api.ProjectEncryption{Project: project}
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		p, err := scanProject(tx.QueryRow(ctx, q.Get("ProjectGetForUpdate"), project))
		if errors.Is(err, db.ErrNotFound) {
			return fault.NotFound("project %q not found", project)
		}
		if err != nil {
			return err
		}
		if !p.Encryption {
			if err := audit(ctx, tx, actor, "project.encrypt", project, map[string]any{"phase": "start", "key": s.keys.Primary()}); err != nil {
				return err
			}
		}
		n, remaining, err := s.encryptBatch(ctx, tx, actor, project, !p.Encryption, limit)
		if err != nil {
			return err
		}
		out.Converted, out.Remaining, out.Done = n, remaining, remaining == 0
		if out.Done && (n > 0 || !p.Encryption) {
			return audit(ctx, tx, actor, "project.encrypt", project, map[string]any{"phase": "done", "key": s.keys.Primary()})
		}
		return nil
	})
	if err != nil {
		return api.ProjectEncryption{}, categorize(secret.Fault(err))
	}
	return out, nil
}

// encryptBatch seals up to limit plain states and versions of project in tx (whose caller
// holds the project row FOR UPDATE), marking the project encrypted first when mark is set,
// and returns how many it sealed and how many plain ones remain.
func (s *Service) encryptBatch(ctx context.Context, tx *db.Tx, actor Actor, project string, mark bool, limit int) (int, int64, error) {
	var ws, info string
	err := tx.QueryRow(ctx, q.Get("EncryptFirstLock"), project).Scan(&ws, &info)
	if err == nil {
		var li api.LockInfo
		_ = json.Unmarshal([]byte(info), &li)
		// The request named only the project: the body's Path says which workspace is locked.
		li.Path = project + "/" + ws
		return 0, 0, lockedError(fmt.Sprintf("workspace %s/%s is locked by %s (lock %s); convert the project when no run holds a lock", project, ws, li.Who, li.ID), li)
	}
	if !errors.Is(err, db.ErrNotFound) {
		return 0, 0, err
	}
	if mark {
		// Every workspace's key, so no pg client is in a run that the change would break.
		var id int64
		err := tx.QueryRow(ctx, pq("EncryptRowKeys", project)).Scan(&ws, &id)
		if err == nil {
			return 0, 0, pgLocked(ctx, tx, project, ws, id)
		}
		if !errors.Is(err, db.ErrNotFound) {
			return 0, 0, err
		}
		if err := markEncrypted(ctx, tx, project); err != nil {
			return 0, 0, err
		}
	}
	var a, b string
	if err := tx.QueryRow(ctx, pq("EncryptSetSource", project), actor.Name).Scan(&a, &b); err != nil {
		return 0, 0, err
	}
	done := 0
	type row struct {
		id         int64
		name, data string
		n          int64
	}
	rows, err := tx.Query(ctx, pq("EncryptPlainStates", project), limit)
	if err != nil {
		return 0, 0, err
	}
	var states []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.name, &r.data); err != nil {
			rows.Close()
			return 0, 0, err
		}
		states = append(states, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, 0, err
	}
	for _, r := range states {
		took, err := rowKey(ctx, tx, "EncryptRowKey", project, r.id)
		if err != nil {
			return 0, 0, err
		}
		if !took {
			return 0, 0, pgLocked(ctx, tx, project, r.name, r.id)
		}
		sealed, err := SealState(s.keys, project, r.name, []byte(r.data))
		if err != nil {
			return 0, 0, err
		}
		if err := tx.Pipeline(ctx, db.Step{Query: pq("EncryptStoreState", project), Args: []any{r.id, sealed}}, keyRefStep(sealed)); err != nil {
			return 0, 0, err
		}
		done++
	}
	if left := limit - done; left > 0 {
		rows, err := tx.Query(ctx, pq("EncryptPlainVersions", project), left)
		if err != nil {
			return 0, 0, err
		}
		var versions []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.name, &r.n, &r.data); err != nil {
				rows.Close()
				return 0, 0, err
			}
			versions = append(versions, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, 0, err
		}
		for _, r := range versions {
			sealed, err := SealState(s.keys, project, r.name, []byte(r.data))
			if err != nil {
				return 0, 0, err
			}
			if err := tx.Pipeline(ctx, db.Step{Query: pq("EncryptStoreVersion", project), Args: []any{r.name, r.n, sealed}}, keyRefStep(sealed)); err != nil {
				return 0, 0, err
			}
			done++
		}
	}
	var remaining int64
	if err := tx.QueryRow(ctx, pq("EncryptRemaining", project)).Scan(&remaining); err != nil {
		return 0, 0, err
	}
	return done, remaining, nil
}

// RewrapBatch re-wraps up to limit sealed states and versions whose data key is not wrapped
// by the primary key (key rotation), in one transaction with the rows locked, and returns
// how many it changed. The values' own ciphertext stays; a re-wrapped state records no
// version (its plaintext did not change).
//
// A batch skips the values writers (or another rotation) hold, so a rotation never makes a
// Terraform run wait, and those are found by a later batch. A batch that finds none free
// waits for one held value instead (rewrapWait), holding none itself, and re-wraps it if its
// holder left it under another key. So 0 means none is left under another key, even with
// writers running: it is what a rotation loop (`strata keys rotate`) stops on, and what makes
// a rotation resumable — run it again after an interruption and it continues.
func (s *Service) RewrapBatch(ctx context.Context, limit int) (int, error) {
	if err := s.keys.Require(); err != nil {
		return 0, secret.Fault(err)
	}
	if limit <= 0 {
		return 0, nil
	}
	primary := s.keys.Primary()
	done := 0
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		projects, err := encryptedProjects(ctx, tx)
		if err != nil {
			return err
		}
		r := &rewrapper{keys: s.keys, tx: tx, primary: primary, projects: projects, sourced: map[string]bool{}}
		if done, err = r.pass(ctx, "RewrapStates", "RewrapVersions", limit); err != nil {
			return err
		}
		if done == 0 {
			if done, err = r.pass(ctx, "RewrapStatesWait", "RewrapVersionsWait", rewrapWait); err != nil {
				return err
			}
		}
		return rewrapAudit(ctx, tx, done, primary)
	})
	if err != nil {
		return 0, categorize(secret.Fault(err))
	}
	return done, nil
}

// rewrapWait is how many values a batch that found none free waits for: one, so that it
// holds no row while it waits (a writer never waits behind a waiting batch, and two waiting
// batches cannot deadlock). PostgreSQL checks a held row again when its holder ends and
// waits for the next one when the row no longer qualifies, so one is enough for 0 to mean
// none is left.
const rewrapWait = 1

// rewrapper is one RewrapBatch transaction: the encrypted projects, in order, and which of
// them had the transaction's strata.source set (EncryptSetSource, needed before a states
// row is written, so the versions trigger records no version for a re-wrap).
type rewrapper struct {
	keys     *secret.Keyring
	tx       *db.Tx
	primary  string
	projects []string
	sourced  map[string]bool
}

// pass re-wraps up to limit values not under the primary, states (found by statesQuery) of
// every project first, then versions (versionsQuery), and returns how many it re-wrapped.
// Versions come last so that a pass also sees those the commits of the writers it waited
// for left (READ COMMITTED: each query sees what committed before it started).
func (r *rewrapper) pass(ctx context.Context, statesQuery, versionsQuery string, limit int) (int, error) {
	done := 0
	type row struct {
		id         int64
		name, data string
	}
	for _, p := range r.projects {
		if done >= limit {
			return done, nil
		}
		if !r.sourced[p] {
			var a, b string
			if err := r.tx.QueryRow(ctx, pq("EncryptSetSource", p), "rewrap").Scan(&a, &b); err != nil {
				return 0, err
			}
			r.sourced[p] = true
		}
		rows, err := r.tx.Query(ctx, pq(statesQuery, p), r.primary, limit-done)
		if err != nil {
			return 0, err
		}
		var rs []row
		for rows.Next() {
			var x row
			if err := rows.Scan(&x.id, &x.name, &x.data); err != nil {
				rows.Close()
				return 0, err
			}
			rs = append(rs, x)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, err
		}
		for _, x := range rs {
			out, err := rewrapState(r.keys, p, x.name, x.data)
			if err != nil {
				return 0, fmt.Errorf("state %s/%s: %w", p, x.name, err)
			}
			if err := r.tx.Pipeline(ctx, db.Step{Query: pq("EncryptStoreState", p), Args: []any{x.id, out}}, keyRefStep(out)); err != nil {
				return 0, err
			}
			done++
		}
	}
	type vrow struct {
		workspace, data string
		n               int64
	}
	for _, p := range r.projects {
		if done >= limit {
			return done, nil
		}
		rows, err := r.tx.Query(ctx, pq(versionsQuery, p), r.primary, limit-done)
		if err != nil {
			return 0, err
		}
		var vs []vrow
		for rows.Next() {
			var v vrow
			if err := rows.Scan(&v.workspace, &v.n, &v.data); err != nil {
				rows.Close()
				return 0, err
			}
			vs = append(vs, v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, err
		}
		for _, v := range vs {
			out, err := rewrapState(r.keys, p, v.workspace, v.data)
			if err != nil {
				return 0, fmt.Errorf("version %d of %s/%s: %w", v.n, p, v.workspace, err)
			}
			if err := r.tx.Pipeline(ctx, db.Step{Query: pq("RewrapStoreVersion", p), Args: []any{v.workspace, v.n, out}}, keyRefStep(out)); err != nil {
				return 0, err
			}
			done++
		}
	}
	return done, nil
}

// rewrapAudit records a rotation batch that re-wrapped n states and versions (none: nothing).
func rewrapAudit(ctx context.Context, tx *db.Tx, n int, primary string) error {
	if n == 0 {
		return nil
	}
	return auth.RecordAudit(ctx, tx, auth.AuditEntry{Actor: auth.AuditActorFrom(ctx).Actor, Action: "keys.rotate", Target: "state",
		Detail: map[string]any{"rewrapped": n, "primary": primary}})
}

// SealedByKey counts sealed states and versions per key id (hex, as secret.KeyID gives), so
// rotation can tell when no value needs an old key any more.
func (s *Service) SealedByKey(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	err := s.db.LockingReadTx(ctx, func(tx *db.Tx) error {
		clear(out)
		projects, err := encryptedProjects(ctx, tx)
		if err != nil {
			return err
		}
		count := func(query *db.Query) error {
			rows, err := tx.Query(ctx, query)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id string
				var n int64
				if err := rows.Scan(&id, &n); err != nil {
					return err
				}
				out[id] += n
			}
			return rows.Err()
		}
		for _, p := range projects {
			if err := count(pq("SealedStatesByKey", p)); err != nil {
				return err
			}
			if err := count(pq("SealedVersionsByKey", p)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, categorize(err)
	}
	return out, nil
}

// markEncrypted marks a project encrypted, in strata's tf_projects and in the project's own
// tf_project, which the versions trigger reads.
func markEncrypted(ctx context.Context, tx *db.Tx, project string) error {
	return tx.Pipeline(ctx, db.Step{Query: q.Get("EncryptMarkProject"), Args: []any{project}}, db.Step{Query: pq("EncryptMarkProjectMeta", project)})
}

func encryptedProjects(ctx context.Context, tx *db.Tx) ([]string, error) {
	rows, err := tx.Query(ctx, q.Get("EncryptedProjects"))
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

// ReadStored reads the stored text of a workspace's state straight from the database, for
// the offline `strata state decrypt`: the current state when version is 0, else that
// version (-1: the latest version, for a workspace whose row is gone).
func ReadStored(ctx context.Context, d *db.DB, project, workspace string, version int64) (string, error) {
	if err := ValidateProject(project, d.Schema()); err != nil {
		return "", err
	}
	if err := ValidateWorkspace(workspace); err != nil {
		return "", err
	}
	var data *string
	var err error
	switch {
	case version == 0:
		err = d.QueryRow(ctx, pq("OfflineState", project), workspace).Scan(&data)
	case version < 0:
		err = d.QueryRow(ctx, pq("OfflineLatestVersion", project), workspace).Scan(&data)
	default:
		err = d.QueryRow(ctx, pq("OfflineVersion", project), workspace, version).Scan(&data)
	}
	if errors.Is(err, db.ErrNotFound) || (err == nil && data == nil) {
		if version > 0 {
			return "", fault.NotFound("workspace %s/%s has no version %d", project, workspace, version)
		}
		return "", fault.NotFound("workspace %s/%s has no state", project, workspace)
	}
	if err != nil {
		return "", err
	}
	return *data, nil
}
