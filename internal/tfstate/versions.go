package tfstate

import (
	"cmp"
	"context"
	"errors"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
)

func scanVersion(row interface{ Scan(...any) error }, data *string) (api.StateVersion, error) {
	var v api.StateVersion
	dest := []any{&v.N, &v.Serial, &v.Lineage, &v.MD5, &v.Size, &v.Source, &v.CreatedBy, &v.CreatedAt}
	if data != nil {
		dest = append(dest, data)
	}
	err := row.Scan(dest...)
	v.CreatedAt = v.CreatedAt.UTC()
	return v, err
}

// VersionList lists a workspace's versions, newest first. Versions outlive the workspace's
// deletion, so a deleted workspace still lists (and can restore) its history.
func (s *Service) VersionList(ctx context.Context, project, workspace string) ([]api.StateVersion, error) {
	if err := s.validate(project, workspace); err != nil {
		return nil, err
	}
	if err := requireProject(ctx, s.db, project); err != nil {
		return nil, categorizeIn(project, err)
	}
	rows, err := s.db.Query(ctx, pq("VersionList", project), workspace)
	if err != nil {
		return nil, categorizeIn(project, err)
	}
	defer rows.Close()
	out := []api.StateVersion{}
	for rows.Next() {
		v, err := scanVersion(rows, nil)
		if err != nil {
			return nil, categorizeIn(project, err)
		}
		out = append(out, v)
	}
	return out, categorizeIn(project, rows.Err())
}

// VersionGet returns version n of a workspace's state with its bytes, verbatim (decrypted,
// for an encrypted project).
func (s *Service) VersionGet(ctx context.Context, project, workspace string, n int64) (api.StateVersion, []byte, error) {
	if err := s.validate(project, workspace); err != nil {
		return api.StateVersion{}, nil, err
	}
	if err := requireProject(ctx, s.db, project); err != nil {
		return api.StateVersion{}, nil, categorizeIn(project, err)
	}
	var data string
	v, err := scanVersion(s.db.QueryRow(ctx, pq("VersionGet", project), workspace, n), &data)
	if errors.Is(err, db.ErrNotFound) {
		return api.StateVersion{}, nil, fault.NotFound("workspace %s/%s has no version %d", project, workspace, n)
	}
	if err != nil {
		return api.StateVersion{}, nil, categorizeIn(project, err)
	}
	plain, err := s.open(project, workspace, data)
	if err != nil {
		return api.StateVersion{}, nil, err
	}
	return v, plain, nil
}

// VersionRestore writes version n back as the workspace's current state, with a serial
// above the current one (so clients that read it take it as newer) and its own lineage; it
// becomes a new version itself. The lock rules of a write apply (lockID while locked); the
// lineage rule does not, since going back to an older lineage is what a restore may be for.
// A version strata cannot read (encrypted) is written back unchanged.
func (s *Service) VersionRestore(ctx context.Context, actor Actor, project, workspace string, n int64, lockID string) (WriteResult, error) {
	_, data, err := s.VersionGet(ctx, project, workspace, n)
	if err != nil {
		return WriteResult{}, err
	}
	bump := func(cur []byte, exists bool) []byte {
		v := parseState(data)
		if !v.Readable {
			return data
		}
		serial := v.Serial
		if c := parseState(cur); exists && c.Readable && c.Serial >= serial {
			serial = c.Serial
		}
		out, ok := withSerial(data, serial+1)
		if !ok {
			return data
		}
		return out
	}
	res, err := s.write(ctx, actor, project, workspace, lockID, data, writeOptions{
		source:  "restore",
		prepare: bump,
		after: func(tx *db.Tx, res WriteResult) error {
			return audit(ctx, tx, actor, "state.restore", project+"/"+workspace, map[string]any{"from": n, "version": res.Version})
		},
	})
	return res, categorizeIn(project, err)
}

// PruneVersions applies KeepVersions to every workspace and reports how many versions it
// deleted. strata's own writes prune their workspace at once; this catches writes made by
// pg clients. Start runs it periodically, one statement per project (each project's
// versions live in its own schema, on Citus on its own worker).
func (s *Service) PruneVersions(ctx context.Context) (int64, error) {
	if s.opts.KeepVersions <= 0 {
		return 0, nil
	}
	projects, err := projectNames(ctx, s.db)
	if err != nil {
		return 0, categorize(err)
	}
	var total int64
	var firstErr error
	for _, p := range projects {
		n, err := s.db.Exec(ctx, pq("VersionPruneAll", p), s.opts.KeepVersions)
		if err != nil {
			// One project's failure (deleted meanwhile, or its Citus worker down) does
			// not keep the others from being pruned.
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		total += n
	}
	return total, categorize(firstErr)
}
