package robustness

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/stratahq/strata/internal/db"
)

//go:embed truth.sql
var sqlFiles embed.FS

var queries = db.MustParseQueries(sqlFiles, "truth.sql")

// Drain waits until no transaction that began before the call is still running in the
// database, so that nothing a client gave up on can commit after ground truth is read (a
// timed-out request may still commit after its client left).
func Drain(ctx context.Context, d *db.DB, within time.Duration) error {
	var since time.Time
	if err := d.QueryRow(ctx, queries.Get("Now")).Scan(&since); err != nil {
		return err
	}
	deadline := time.Now().Add(within)
	for {
		var n int
		if err := d.QueryRow(ctx, queries.Get("Busy"), since).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("drain: %d transactions begun before %s still run after %v", n, since.Format(time.RFC3339Nano), within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ReadTruth reads the ground truth of a drained run from the database: the changes of
// kind, the pillar writes, the audited request ids and the compaction floor.
func ReadTruth(ctx context.Context, d *db.DB, kind string) (Truth, error) {
	t := Truth{PillarWrites: map[string]string{}, Audited: map[string]bool{}}
	rows, err := d.Query(ctx, queries.Get("TruthChanges"), kind)
	if err != nil {
		return t, err
	}
	for rows.Next() {
		var c Change
		var labels []byte
		if err := rows.Scan(&c.RV, &c.Kind, &c.Org, &c.Name, &c.Type, &c.Marker, &labels, &c.SpecOrg); err != nil {
			rows.Close()
			return t, err
		}
		if err := json.Unmarshal(labels, &c.Labels); err != nil {
			rows.Close()
			return t, err
		}
		if len(c.Labels) == 0 {
			c.Labels = nil
		}
		t.Changes = append(t.Changes, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return t, err
	}
	rows, err = d.Query(ctx, queries.Get("TruthPillarWrites"))
	if err != nil {
		return t, err
	}
	for rows.Next() {
		var marker string
		var id, rev int64
		if err := rows.Scan(&marker, &id, &rev); err != nil {
			rows.Close()
			return t, err
		}
		t.PillarWrites[marker] = `"` + strconv.FormatInt(id, 36) + "." + strconv.FormatInt(rev, 10) + `"`
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return t, err
	}
	rows, err = d.Query(ctx, queries.Get("TruthAudited"))
	if err != nil {
		return t, err
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return t, err
		}
		t.Audited[id] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return t, err
	}
	err = d.QueryRow(ctx, queries.Get("TruthCompaction")).Scan(&t.CompactedThrough)
	return t, err
}

// Head is the newest resourceVersion handed out so far: a phase's watchers start there.
func Head(ctx context.Context, d *db.DB) (int64, error) {
	var h int64
	err := d.QueryRow(ctx, queries.Get("TruthHead")).Scan(&h)
	return h, err
}

// StateID is the row id of a workspace's state, the advisory key a pg-backend client takes.
func StateID(ctx context.Context, d *db.DB, project, workspace string) (int64, error) {
	var id int64
	err := d.QueryRow(ctx, queries.Get("StateID").WithIdent("project", project), workspace).Scan(&id)
	return id, err
}
