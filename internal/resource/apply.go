package resource

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
)

// ApplyItem is one line of a bulk apply: the desired node, and, when Groups is not nil, the
// complete set of groups of the node's org it is a static member of.
type ApplyItem struct {
	Line   int
	Obj    api.Object
	Groups []string
	// HasGroups distinguishes "groups": [] (no static memberships) from no "groups" key
	// (leave memberships as they are).
	HasGroups bool
}

// ApplyNodes makes each item's node exist exactly as given (spec, labels, annotations and,
// with HasGroups, static memberships): created when missing, rewritten when different,
// untouched (no new resourceVersion) when already so, so applying an inventory twice changes
// nothing the second time. The items run in one transaction; when one fails, the batch is
// rolled back and every item is retried in a transaction of its own, so a bad line costs only
// itself — unless the batch's COMMIT ended with its outcome unknown: then every item reports
// that error (the batch may have committed) and nothing is sent again. The returned results are in item order; Err is set on the items that failed.
func (s *Service) ApplyNodes(ctx context.Context, items []ApplyItem) []ApplyOutcome {
	k, _ := s.kinds.Get(KindNode)
	refs := make([]Ref, len(items))
	for i, it := range items {
		refs[i] = Ref{Kind: KindNode, Name: it.Obj.Metadata.Name}
	}
	defer s.wrote(refs...)
	results := make([]ApplyOutcome, len(items))
	for i, it := range items {
		results[i] = ApplyOutcome{Line: it.Line, Name: it.Obj.Metadata.Name}
	}
	err := s.writeTx(ctx, func(tx *db.Tx) error {
		for i := range items {
			r, err := applyOne(ctx, tx, k, items[i])
			if err != nil {
				return err
			}
			results[i].Result = r
		}
		return nil
	})
	// A batch whose COMMIT ended with its outcome unknown may have committed: sending its
	// lines again one by one would report "unchanged" for what the batch wrote, or a plain
	// failure for a line it did write. Every line says the outcome is unknown instead, and the
	// client reads before it retries (found by the robustness harness's bulk check).
	var de *db.Error
	unknown := errors.As(err, &de) && de.OutcomeUnknown
	if err == nil || ctx.Err() != nil || unknown {
		if err != nil {
			for i := range results {
				results[i].Result, results[i].Err = "error", err
			}
		}
		return results
	}
	for i := range items {
		var r string
		err := s.writeTx(ctx, func(tx *db.Tx) error {
			var err error
			r, err = applyOne(ctx, tx, k, items[i])
			return err
		})
		if fault.KindOf(err) == fault.KindConflict && ctx.Err() == nil {
			// Created by another writer between our look and our insert: it exists now.
			err = s.writeTx(ctx, func(tx *db.Tx) error {
				var err error
				r, err = applyOne(ctx, tx, k, items[i])
				return err
			})
		}
		if err != nil {
			results[i].Result, results[i].Err = "error", err
			continue
		}
		results[i].Result = r
	}
	return results
}

// ApplyOutcome is what ApplyNodes did with one item: Result is created, updated, unchanged
// or error (then Err says why).
type ApplyOutcome struct {
	Line   int
	Name   string
	Result string
	Err    error
}

// applyOne applies one normalized-on-entry item in tx and says what it did.
func applyOne(ctx context.Context, tx *db.Tx, k *Kind, it ApplyItem) (string, error) {
	ref := Ref{Kind: KindNode, Name: it.Obj.Metadata.Name}
	obj := it.Obj
	if err := normalize(k, ref, &obj); err != nil {
		return "", err
	}
	id, cur, err := lockForWrite(ctx, tx, k, ref, "")
	result := "unchanged"
	switch {
	case fault.KindOf(err) == fault.KindNotFound:
		var out api.Object
		if id, err = createTx(ctx, tx, k, ref, obj, &out, stampNow); err != nil {
			return "", err
		}
		result = "created"
	case err != nil:
		return "", err
	case !sameObject(cur, obj):
		var out api.Object
		if err := updateTx(ctx, tx, k, id, cur, obj, &out, stampNow); err != nil {
			return "", err
		}
		result = "updated"
	}
	if it.HasGroups {
		n, err := syncMemberships(ctx, tx, id, NodeOrg(obj), it.Groups)
		if err != nil {
			return "", err
		}
		if n > 0 && result == "unchanged" {
			result = "updated"
		}
	}
	return result, nil
}

// sameObject reports whether the stored cur already is what obj asks for. Both specs are in
// canonical form (jsonb's key order and spacing differ from ours, so compare decoded).
func sameObject(cur, obj api.Object) bool {
	if !maps.Equal(cur.Metadata.Labels, obj.Metadata.Labels) || !maps.Equal(cur.Metadata.Annotations, obj.Metadata.Annotations) {
		return false
	}
	if bytes.Equal(cur.Spec, obj.Spec) {
		return true
	}
	a, err1 := canonicalSpec(cur.Spec)
	b, err2 := canonicalSpec(obj.Spec)
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}

// syncMemberships makes groups (names in org) the node's complete set of static
// memberships and returns how many memberships it added or removed. A group that does not
// exist is a 422 for the line.
func syncMemberships(ctx context.Context, tx *db.Tx, nodeID int64, org string, groups []string) (int64, error) {
	groups = slices.Clone(groups)
	slices.Sort(groups)
	groups = slices.Compact(groups)
	// Not nil: pgx sends a nil slice as NULL, and NOT (group_id = ANY(NULL)) is NULL, so
	// "groups": [] would delete nothing.
	ids := make([]int64, 0, len(groups))
	rows, err := tx.Query(ctx, q.Get("GroupsLockShare"), KindGroup, org, groups)
	if err != nil {
		return 0, err
	}
	found := map[string]bool{}
	for rows.Next() {
		var (
			id   int64
			name string
		)
		if err := rows.Scan(&id, &name); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
		found[name] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	for _, g := range groups {
		if !found[g] {
			return 0, fault.UnprocessableFields("group does not exist", []fault.FieldError{{Field: "/groups", Message: "group " + fault.Truncate(g, 80) + " does not exist in org " + fault.Truncate(org, 80)}})
		}
	}
	var changed []int64
	if err := tx.QueryRow(ctx, q.Get("MembershipsSync"), nodeID, ids).Scan(&changed); err != nil {
		return 0, err
	}
	touchGroups(ctx, tx, changed...)
	return int64(len(changed)), nil
}

// Analyze refreshes the planner's statistics of the tables a bulk apply grows.
func (s *Service) Analyze(ctx context.Context) error {
	_, err := s.db.Exec(ctx, q.Get("AnalyzeResources"))
	return err
}
