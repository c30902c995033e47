package resource

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
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
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		g, n, err := lockMembership(ctx, tx, org, group, node)
		if err != nil {
			return err
		}
		rows, err := tx.Exec(ctx, q.Get("MemberAdd"), g, n)
		added = rows == 1
		return err
	})
	return added, err
}

// RemoveMember ends node's static membership of group (idempotent: removing a membership
// that does not exist is not an error, so retries and concurrent removals all succeed). It
// reports whether there was one.
func (s *Service) RemoveMember(ctx context.Context, org, group, node string) (bool, error) {
	var removed bool
	defer s.wrote(Ref{Kind: KindNode, Name: node})
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		var groupID int64
		err := tx.QueryRow(ctx, q.Get("GroupLockShare"), KindGroup, org, group).Scan(&groupID)
		if errors.Is(err, db.ErrNotFound) {
			return notFound(Ref{Kind: KindGroup, Org: org, Name: group})
		}
		if err != nil {
			return err
		}
		rows, err := tx.Exec(ctx, q.Get("MemberRemove"), groupID, KindNode, node)
		removed = rows == 1
		return err
	})
	return removed, err
}

// Members returns a page of group's members in node-name order: its static members and the
// nodes of its org its selector matches. after is the last node name of the previous page.
func (s *Service) Members(ctx context.Context, org, group, after string, limit int) (client.MemberList, string, error) {
	out := client.MemberList{Items: []client.Member{}}
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
		var m client.Member
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
