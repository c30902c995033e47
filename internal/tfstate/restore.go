package tfstate

import (
	"context"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
)

// ReleaseRestoredLocks releases every lock a database restored from a backup holds: they
// belonged to Terraform runs and replicas of the installation the backup was taken from, and
// no process here holds their keys. Each release is audited as state.force-unlock with the
// reason, so `GET …/lock` answers "not locked" and the audit log says why. It also forgets the
// old replicas' lock keepers. It returns how many locks it released.
func ReleaseRestoredLocks(ctx context.Context, d *db.DB, actor string) (int, error) {
	n := 0
	err := d.InTx(ctx, func(tx *db.Tx) error {
		rows, err := tx.Query(ctx, q.Get("LocksReleaseRestored"))
		if err != nil {
			return err
		}
		type released struct{ project, workspace, id, info, by string }
		var all []released
		for rows.Next() {
			var r released
			if err := rows.Scan(&r.project, &r.workspace, &r.id, &r.info, &r.by); err != nil {
				rows.Close()
				return err
			}
			all = append(all, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range all {
			if err := auth.RecordAudit(ctx, tx, auth.AuditEntry{Actor: actor, Action: "state.force-unlock", Target: r.project + "/" + r.workspace,
				Detail: map[string]any{"reason": "restored from a backup: the lock's holder belongs to the installation the backup was taken from", "lockId": r.id, "heldBy": r.by}}); err != nil {
				return err
			}
		}
		n = len(all)
		_, err = tx.Exec(ctx, q.Get("KeepersForget"))
		return err
	})
	return n, err
}

// PrepareRestore makes what a backup's project schemas may use but do not hold: the pg
// backend's sequence public.global_states_id_seq, shared by all projects in Terraform's own
// DDL, which states tables of backups taken before migration 0034 name (a project's own
// sequence is in its schema, and in the backup).
func PrepareRestore(ctx context.Context, d *db.DB) error {
	_, err := d.Exec(ctx, q.Get("SharedSequenceCreate"))
	return err
}

// AdvanceSequence moves the shared sequence past every restored states row.
func AdvanceSequence(ctx context.Context, d *db.DB) error {
	rows, err := d.Query(ctx, q.Get("ProjectNamesAll"))
	if err != nil {
		return err
	}
	var projects []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			rows.Close()
			return err
		}
		projects = append(projects, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var top int64
	for _, p := range projects {
		var m int64
		if err := d.QueryRow(ctx, pq("ProjectStatesMaxID", p)).Scan(&m); err != nil {
			return err
		}
		top = max(top, m)
	}
	if top == 0 {
		return nil
	}
	var v int64
	return d.QueryRow(ctx, q.Get("SequenceAdvance"), top).Scan(&v)
}
