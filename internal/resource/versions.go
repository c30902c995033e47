package resource

// resourceVersions without a database-wide lock.
//
// Writers draw a change's version from a plain sequence in the statement that records the
// change (ResourceStamp), and hold no lock to commit: their commits, and so their WAL
// flushes, overlap. Versions therefore become visible out of order — a transaction holding
// 6 can commit after one holding 7 — and a reader that took "everything up to 7" at face
// value would miss 6 forever. So no reader exposes a version until every version below it
// is resolved: committed, or settled as never to commit.
//
// A version is settled by VersionFill, an INSERT of a GAP row under its number with ON
// CONFLICT DO NOTHING, run by whoever finds it missing below a visible one. The primary key
// of changes decides, not timing: if the writer has inserted its change, the fill waits for
// the writer's transaction to end and then does nothing (committed) or goes in (rolled back);
// if the writer has drawn the number but not inserted yet, the fill goes in first, and the
// writer's own insert, also ON CONFLICT DO NOTHING, finds the number taken and draws again.
// After a fill returns, the version's fate is final and visible to every later snapshot.
//
// The readers:
//   - The change poller (Hub.poll) fans out changes strictly in version order and stops at
//     the first missing version; it fills it (waiting, in the common case, for one commit's
//     WAL flush) and reads again. Its head is thus always a resolved prefix, and a watch's
//     catch-up from the log up to the head, and every BOOKMARK, are complete.
//   - A list (List, ListSnapshot) reads its page in one snapshot and answers that snapshot's
//     newest version M. Versions below M the snapshot does not see are in flight at it (or
//     rolled back); the list settles them after its snapshot ends and applies their changes
//     to its page, so the page is exactly the state after every change up to M: a watch from
//     M misses nothing and repeats nothing. A writer in flight at the snapshot can only touch
//     objects no visible later change touched (the row lock orders writers of one object, and
//     the later writer draws its version after the earlier one committed), so applying its
//     change last is its place in version order too.
//
// Finding missing versions walks the primary key above a floor known to be resolved: the
// highest version this process saw resolved, raised in the query to watch_resolved (the
// pollers record theirs at most once a second) and the compaction point.

import (
	"context"
	"embed"
	"fmt"
	"sort"
	"strconv"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
)

//go:embed versions.sql
var versionsFS embed.FS

var versionQ = db.MustParseQueries(versionsFS, "versions.sql")

// maxVersionGaps bounds how many missing versions one list settles; far more than the writers
// a database can hold in flight, so reaching it means a huge rolled-back batch, and the list
// fails with a retryable error after settling that many (the next try goes on from there).
const maxVersionGaps = 10000

// noteResolved raises the process's resolved floor to v.
func (s *Service) noteResolved(v int64) {
	for {
		cur := s.resolved.Load()
		if v <= cur || s.resolved.CompareAndSwap(cur, v) {
			return
		}
	}
}

// versionGaps returns the versions at or below head that tx's snapshot does not see, above
// floor (a version through which all are known resolved, read before the snapshot began).
func versionGaps(ctx context.Context, tx *db.Tx, floor, head int64) ([]int64, error) {
	rows, err := tx.Query(ctx, versionQ.Get("VersionGaps"), floor, head, maxVersionGaps+1)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var gaps []int64
	for rows.Next() {
		var g int64
		if err := rows.Scan(&g); err != nil {
			return nil, err
		}
		gaps = append(gaps, g)
	}
	return gaps, rows.Err()
}

// settle resolves each version of gaps for good (VersionFill, one statement each) and
// returns the changes that hold them, GAP rows left out, in version order.
func (s *Service) settle(ctx context.Context, gaps []int64) ([]Change, error) {
	if len(gaps) > maxVersionGaps {
		gaps = gaps[:maxVersionGaps]
		if err := s.fill(ctx, gaps); err != nil {
			return nil, err
		}
		return nil, fault.New(fault.KindUnavailable, "more than %d versions were in flight or rolled back below this list's resourceVersion; they are being settled: retry the list",
			maxVersionGaps)
	}
	if err := s.fill(ctx, gaps); err != nil {
		return nil, err
	}
	var out []Change
	err := s.db.ReadTx(ctx, func(tx *db.Tx) error {
		cs, err := readChanges(ctx, tx, versionQ.Get("VersionChanges"), gaps)
		for _, c := range cs {
			if c.Type != "GAP" {
				out = append(out, c)
			}
		}
		return err
	})
	return out, err
}

// fill settles versions one at a time, lowest first.
func (s *Service) fill(ctx context.Context, versions []int64) error {
	return fillVersions(ctx, s.db, versions)
}

// fillVersions settles versions one at a time, lowest first, each in a transaction of its
// own that does not wait for its WAL flush (synchronous_commit off): a GAP row lost in a
// crash is harmless — no writer can commit under its number afterwards (PostgreSQL never
// hands a sequence value out twice, even across a crash), and a reader that has not passed it
// settles it again — while waiting for a flush per version would make a rolled-back bulk
// batch of 500 versions cost the poller 500 flushes.
func fillVersions(ctx context.Context, d *db.DB, versions []int64) error {
	ctx = db.WithoutTx(ctx) // each fill commits on its own, never inside a caller's transaction
	for _, v := range versions {
		err := d.InTx(ctx, func(tx *db.Tx) error {
			return tx.Pipeline(ctx, db.Step{Query: versionQ.Get("VersionFillNoSync")}, db.Step{Query: versionQ.Get("VersionFill"), Args: []any{v}})
		})
		if err != nil {
			return fmt.Errorf("settling resourceVersion %d: %w", v, err)
		}
	}
	return nil
}

// settleList makes a list read in a snapshot that missed versions at or below its own
// exact: it settles them and applies the changes of its kind and org among them to items
// (sorted by name), within the page's range — names after after, and up to last when more
// pages follow — keeping what opts lets through. It returns the items and the page's new
// last name.
func (s *Service) settleList(ctx context.Context, kind, org string, opts ListOptions, limit int, items []api.Object, last string, gaps []int64) ([]api.Object, string, error) {
	changes, err := s.settle(ctx, gaps)
	if err != nil {
		return nil, "", err
	}
	for _, c := range changes {
		if c.Kind != kind || c.Org != org || c.Name <= opts.After || (last != "" && c.Name > last) {
			continue
		}
		i := sort.Search(len(items), func(i int) bool { return items[i].Metadata.Name >= c.Name })
		present := i < len(items) && items[i].Metadata.Name == c.Name
		keep := c.Type != "DELETED" && opts.Filter.Allows(c.Name) && opts.Selector.Matches(c.Object.Metadata.Labels) && InOrg(c.Object, opts.orgMember, opts.InOrg)
		switch {
		case present && keep:
			items[i] = c.Object
		case present:
			items = append(items[:i], items[i+1:]...)
		case keep:
			items = append(items, api.Object{})
			copy(items[i+1:], items[i:])
			items[i] = c.Object
		}
	}
	if limit > 0 && len(items) > limit {
		items = items[:limit]
		last = items[limit-1].Metadata.Name
	}
	return items, last, nil
}

// listVersion parses the version a list page reports.
func listVersion(l api.ObjectList) int64 {
	v, _ := strconv.ParseInt(l.ResourceVersion, 10, 64)
	return v
}

// gapsOf is versionGaps, or none when the service exposes gaps (a test's control).
func (s *Service) gapsOf(ctx context.Context, tx *db.Tx, floor, head int64) ([]int64, error) {
	if s.exposeGaps {
		return nil, nil
	}
	return versionGaps(ctx, tx, floor, head)
}

// SnapshotVersions returns the newest version tx's snapshot sees and the versions at or
// below it that the snapshot misses (writers in flight when it was taken, or rolled back):
// together they say exactly which changes the snapshot holds, so a reader that later needs
// "everything that changed since" asks for versions above the first or among the second.
// A kind registration's unlocked scan uses it (internal/kind).
func SnapshotVersions(ctx context.Context, tx *db.Tx) (int64, []int64, error) {
	var head int64
	if err := tx.QueryRow(ctx, watchQ.Get("WatchHead")).Scan(&head); err != nil {
		return 0, nil, err
	}
	missing, err := versionGaps(ctx, tx, 0, head)
	if err != nil {
		return 0, nil, err
	}
	if len(missing) > maxVersionGaps {
		return 0, nil, fault.New(fault.KindUnavailable, "more than %d versions are in flight or unsettled; retry", maxVersionGaps)
	}
	return head, missing, nil
}
