package resource

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/metadata"
)

// The built-in kinds. Orgs and nodes are global; groups live in an org.
const (
	KindNode  = "Node"
	KindGroup = "Group"
)

// OrgKind describes orgs. Deleting an org that still has nodes or groups is refused unless
// the caller asks for the cascade.
func OrgKind() *Kind {
	return &Kind{Name: KindOrg, Plural: "orgs", Param: "org", Scope: ScopeGlobal, Family: "orgs",
		BeforeDelete: orgBeforeDelete}
}

// NodeKind describes nodes: Salt minions, named by their minion id, each in one org
// (spec.org, required, an existing org).
func NodeKind() *Kind {
	return &Kind{Name: KindNode, Plural: "nodes", Param: "node", Scope: ScopeGlobal, Family: "nodes",
		ValidateName: ValidateNodeName, Prepare: nodePrepare, AfterWrite: nodeAfterWrite}
}

// GroupKind describes groups: named sets of an org's nodes, with a priority (spec.priority,
// an integer, default 0) and an optional label selector (spec.selector) that adds the org's
// nodes it matches to the static members.
func GroupKind() *Kind {
	return &Kind{Name: KindGroup, Plural: "groups", Param: "group", Scope: ScopeOrg, Family: "groups",
		Prepare: groupPrepare}
}

// specMap decodes a canonical spec (normalize has checked it is an object).
func specMap(spec json.RawMessage) (map[string]any, error) {
	v, err := decodeJSON(spec)
	if err != nil {
		return nil, fault.Invalid("/spec", "spec is not valid JSON: %v", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fault.Invalid("/spec", "spec must be a JSON object")
	}
	return m, nil
}

func encodeSpec(m map[string]any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// NodeOrg returns a node's org from its spec ("" when missing or not a string).
func NodeOrg(obj client.Object) string {
	var s struct {
		Org any `json:"org"`
	}
	_ = json.Unmarshal(obj.Spec, &s)
	org, _ := s.Org.(string)
	return org
}

func nodePrepare(ctx context.Context, tx *db.Tx, obj *client.Object, prev *client.Object) error {
	m, err := specMap(obj.Spec)
	if err != nil {
		return err
	}
	raw, ok := m["org"]
	if !ok || raw == nil {
		return fault.UnprocessableFields("invalid node: spec.org is required", []fault.FieldError{{Field: "/spec/org", Message: "required: the org this node belongs to"}})
	}
	org, ok := raw.(string)
	if !ok || org == "" {
		return fault.UnprocessableFields("invalid node: spec.org must be an org name", []fault.FieldError{{Field: "/spec/org", Message: "must be the name of an org (a non-empty string)"}})
	}
	if prev != nil && NodeOrg(*prev) == org {
		// Staying in its org: the node's row lock (held by the caller) is enough, since a
		// cascading org deletion locks the node's row too, and a refusing one counts it.
		return nil
	}
	// The org row is locked FOR SHARE until commit: an org deletion either waits for this
	// write (and then sees the node) or has committed (and the org is gone here).
	if _, err := LockOrg(ctx, tx, org); err != nil {
		if fault.KindOf(err) == fault.KindNotFound {
			return fault.UnprocessableFields("invalid node: its org does not exist", []fault.FieldError{{Field: "/spec/org", Message: fmt.Sprintf("org %q does not exist", truncate(org, 80))}})
		}
		return err
	}
	return nil
}

// nodeAfterWrite drops the static memberships a move to another org made invalid, in the
// moving transaction: a node belongs only to groups of its own org.
func nodeAfterWrite(ctx context.Context, tx *db.Tx, id int64, obj client.Object, prev *client.Object) error {
	if prev == nil || NodeOrg(*prev) == NodeOrg(obj) {
		return nil
	}
	_, err := tx.Exec(ctx, q.Get("NodeDropForeignMemberships"), id, NodeOrg(obj), KindGroup)
	return err
}

func groupPrepare(ctx context.Context, tx *db.Tx, obj *client.Object, prev *client.Object) error {
	m, err := specMap(obj.Spec)
	if err != nil {
		return err
	}
	var errs []fault.FieldError
	switch p := m["priority"].(type) {
	case nil:
		m["priority"] = json.Number("0")
	case json.Number:
		if n, err := strconv.ParseInt(p.String(), 10, 32); err != nil {
			errs = append(errs, fault.FieldError{Field: "/spec/priority", Message: fmt.Sprintf("must be an integer from %d to %d, not %s", int32(-1<<31), int32(1<<31-1), truncate(p.String(), 40))})
		} else {
			m["priority"] = json.Number(strconv.FormatInt(n, 10))
		}
	default:
		errs = append(errs, fault.FieldError{Field: "/spec/priority", Message: "must be an integer"})
	}
	switch sel := m["selector"].(type) {
	case nil:
		delete(m, "selector")
	case string:
		if _, err := metadata.ParseSelector(sel); err != nil {
			errs = append(errs, fault.FieldError{Field: "/spec/selector", Message: "invalid label selector: " + err.Error()})
		}
	default:
		errs = append(errs, fault.FieldError{Field: "/spec/selector", Message: "must be a label selector string, e.g. \"env=prod,tier in (web,db)\""})
	}
	if len(errs) > 0 {
		return fault.UnprocessableFields("invalid group: "+errs[0].Message, errs)
	}
	obj.Spec, err = encodeSpec(m)
	return err
}

// GroupSelector returns a group's spec.selector, parsed.
func GroupSelector(obj client.Object) (metadata.Selector, error) {
	var s struct {
		Selector string `json:"selector"`
	}
	if err := json.Unmarshal(obj.Spec, &s); err != nil {
		return metadata.Selector{}, err
	}
	return metadata.ParseSelector(s.Selector)
}

// orgBeforeDelete refuses to delete an org that still has nodes or groups (409), or, with
// cascade, deletes them first, each with its own DELETED change so watchers see them go.
// The org's row lock (taken by Delete) keeps new nodes and groups out meanwhile.
func orgBeforeDelete(ctx context.Context, s *Service, tx *db.Tx, id int64, org client.Object, cascade bool) error {
	var nodes, groups int64
	if err := tx.QueryRow(ctx, q.Get("OrgDependents"), org.Metadata.Name, KindNode, KindGroup).Scan(&nodes, &groups); err != nil {
		return err
	}
	if nodes+groups == 0 {
		return nil
	}
	if !cascade {
		return fault.Conflict("org %q still has %d nodes and %d groups: delete them first, or delete the org with ?cascade=true to delete them with it", org.Metadata.Name, nodes, groups)
	}
	rows, err := tx.Query(ctx, q.Get("OrgDependentsLock"), org.Metadata.Name, KindNode, KindGroup)
	if err != nil {
		return err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	// Read after locking, in a statement of its own (see ResourceLockAndGet).
	deps, err := getByID(ctx, tx, ids)
	if err != nil {
		return err
	}
	for _, d := range deps {
		if err := deleteLocked(ctx, tx, d.id, d.obj); err != nil {
			return err
		}
	}
	return nil
}
