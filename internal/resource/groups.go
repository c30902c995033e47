package resource

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/sabotage"
)

// lockMembership locks the group (FOR SHARE) and the node (FOR SHARE) of one static
// membership and checks that the node is in the group's org. A node moving to another org
// holds its row FOR UPDATE, so the check and the membership write cannot interleave with
// the move: either the move waits, or this sees the node's new org.
func lockMembership(ctx context.Context, tx *db.Tx, org, group, node string) (groupID, nodeID int64, err error) {
	err = tx.QueryRow(ctx, q.Get("GroupLockShare"), KindGroup, org, group).Scan(&groupID)
	if errors.Is(err, db.ErrNotFound) {
		return 0, 0, notFound(Ref{Kind: KindGroup, Org: org, Name: group})
	}
	if err != nil {
		return 0, 0, err
	}
	var nodeOrg string
	err = tx.QueryRow(ctx, q.Get("NodeLockShare"), KindNode, node).Scan(&nodeID, &nodeOrg)
	if errors.Is(err, db.ErrNotFound) {
		return 0, 0, notFound(Ref{Kind: KindNode, Name: node})
	}
	if err != nil {
		return 0, 0, err
	}
	if nodeOrg != org && !CanRead(ctx, "nodes", node) {
		// A node of another org the caller cannot read answers as a node that does not exist:
		// naming its org would reveal another org's inventory.
		return 0, 0, notFound(Ref{Kind: KindNode, Name: node})
	}
	if nodeOrg != org {
		return 0, 0, fault.New(fault.KindUnprocessable, "node %q belongs to org %q, not %q: a node can only be a member of its own org's groups", fault.Truncate(node, 80), fault.Truncate(nodeOrg, 80), fault.Truncate(org, 80))
	}
	return groupID, nodeID, nil
}

// AddMember makes node a static member of group (idempotent). It reports whether the
// membership is new.
func (s *Service) AddMember(ctx context.Context, org, group, node string) (bool, error) {
	var added bool
	defer s.wrote(Ref{Kind: KindNode, Name: node})
	err := s.writeTx(ctx, func(tx *db.Tx) error {
		g, n, err := lockMembership(ctx, tx, org, group, node)
		if err != nil {
			return err
		}
		rows, err := tx.Exec(ctx, q.Get("MemberAdd"), g, n)
		if added = rows == 1; added {
			touchGroups(ctx, tx, g)
		}
		return err
	})
	return added || sabotage.Active("memberstatus"), err
}

// RemoveMember ends node's static membership of group (idempotent: removing a membership
// that does not exist is not an error, so retries and concurrent removals all succeed). It
// reports whether there was one.
func (s *Service) RemoveMember(ctx context.Context, org, group, node string) (bool, error) {
	var removed bool
	defer s.wrote(Ref{Kind: KindNode, Name: node})
	err := s.writeTx(ctx, func(tx *db.Tx) error {
		var groupID int64
		err := tx.QueryRow(ctx, q.Get("GroupLockShare"), KindGroup, org, group).Scan(&groupID)
		if errors.Is(err, db.ErrNotFound) {
			return notFound(Ref{Kind: KindGroup, Org: org, Name: group})
		}
		if err != nil {
			return err
		}
		rows, err := tx.Exec(ctx, q.Get("MemberRemove"), groupID, KindNode, node)
		if removed = rows == 1; removed {
			touchGroups(ctx, tx, groupID)
		}
		return err
	})
	return removed, err
}

// Members returns a page of group's members in node-name order: its static members and the
// nodes of its org its selector matches. after is the last node name of the previous page.
func (s *Service) Members(ctx context.Context, org, group, after string, limit int) (api.MemberList, string, error) {
	out := api.MemberList{Items: []api.Member{}}
	g, err := s.Get(ctx, Ref{Kind: KindGroup, Org: org, Name: group})
	if err != nil {
		return out, "", err
	}
	sel, err := GroupSelector(g)
	if err != nil {
		return out, "", fmt.Errorf("stored selector of group %s/%s: %w", org, group, err)
	}
	if limit <= 0 || limit > MaxListLimit {
		limit = MaxListLimit
	}
	query, selArgs := withSelector(q.Get("GroupMembers"), sel, 8, false)
	rows, err := s.db.Query(ctx, query, append([]any{KindGroup, org, group, KindNode, len(sel.Requirements) > 0, after, limit + 1}, selArgs...)...)
	if err != nil {
		return out, "", err
	}
	defer rows.Close()
	for rows.Next() {
		var m api.Member
		if err := rows.Scan(&m.Node, &m.Static, &m.Selected); err != nil {
			return out, "", err
		}
		out.Items = append(out.Items, m)
	}
	if err := rows.Err(); err != nil {
		return out, "", err
	}
	if len(out.Items) > limit {
		out.Items = out.Items[:limit]
		return out, out.Items[limit-1].Node, nil
	}
	return out, "", nil
}

// Static memberships are changes of their group: a transaction that adds or removes any
// stamps each group it touched MODIFIED once, just before it commits, with the group's
// status.staticMembers, so a group watch (and any consumer of the changes log) sees
// membership changes in version order with everything else. Stamping at the end, in group-id
// order, under FOR NO KEY UPDATE (GroupsLockForStatus), keeps the cost to one change per group
// per transaction (a bulk batch of 500 nodes joining one group stamps it once) and makes two
// transactions that touched the same groups queue for them in one order instead of
// deadlocking. Membership writers hold their groups only FOR KEY SHARE before that point.

// touchedGroups is the Tx.Memo key of a transaction's set of touched groups.
type touchedGroups struct{}

// touchGroups records that tx changed the static memberships of groups ids.
func touchGroups(ctx context.Context, tx *db.Tx, ids ...int64) {
	if len(ids) == 0 {
		return
	}
	v, _ := tx.Memo(touchedGroups{}, func() (any, error) {
		set := map[int64]bool{}
		tx.BeforeCommit(func(ctx context.Context) error { return stampGroups(ctx, tx, set) })
		return set, nil
	})
	set := v.(map[int64]bool)
	for _, id := range ids {
		set[id] = true
	}
}

// stampGroups stamps each group of set whose static member count differs from its status.
func stampGroups(ctx context.Context, tx *db.Tx, set map[int64]bool) error {
	ids := make([]int64, 0, len(set))
	for id := range set {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	rows, err := tx.Query(ctx, q.Get("GroupsLockForStatus"), ids)
	if err != nil {
		return err
	}
	locked := ids[:0]
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		locked = append(locked, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(locked) == 0 {
		return nil // every touched group was deleted
	}
	counts := map[int64]int64{}
	rows, err = tx.Query(ctx, q.Get("GroupStaticCounts"), locked)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id, n int64
		if err := rows.Scan(&id, &n); err != nil {
			rows.Close()
			return err
		}
		counts[id] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	groups, err := getByID(ctx, tx, locked)
	if err != nil {
		return err
	}
	for _, g := range groups {
		status := groupStatus(counts[g.id])
		if bytes.Equal(g.obj.Status, status) {
			continue
		}
		obj := g.obj
		obj.Status = status
		if _, err := writeAndStamp(ctx, tx, g.id, "MODIFIED", obj, &g.obj, ""); err != nil {
			return err
		}
	}
	return nil
}

// groupStatus is a group's status with n static members, in the form jsonb gives back (so a
// stored status compares equal byte for byte).
func groupStatus(n int64) json.RawMessage {
	return json.RawMessage(`{"staticMembers": ` + strconv.FormatInt(n, 10) + `}`)
}
