package resource

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/stratahq/strata/api"
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
// (spec.org, required, an existing org). Placing a node in an org, or taking it out of one,
// needs orgs:attach on that org besides nodes:write on the node: the node's org decides which
// org and group pillars it renders.
func NodeKind() *Kind {
	return &Kind{Name: KindNode, Plural: "nodes", Param: "node", Scope: ScopeGlobal, Family: "nodes",
		ValidateName: ValidateNodeName, Prepare: nodePrepare, AfterWrite: nodeAfterWrite, BeforeDelete: nodeBeforeDelete, Renamable: true,
		OrgMember:  "org",
		References: []Reference{{Member: "org", Kind: KindOrg, Family: "orgs", Verb: "attach"}}}
}

// GroupKind describes groups: named sets of an org's nodes, with a priority (spec.priority,
// an integer, default 0) and an optional label selector (spec.selector) that adds the org's
// nodes it matches to the static members.
func GroupKind() *Kind {
	return &Kind{Name: KindGroup, Plural: "groups", Param: "group", Scope: ScopeOrg, Family: "groups",
		Prepare: groupPrepare, AfterWrite: groupAfterWrite}
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
func NodeOrg(obj api.Object) string {
	var s struct {
		Org any `json:"org"`
	}
	_ = json.Unmarshal(obj.Spec, &s)
	org, _ := s.Org.(string)
	return org
}

func nodePrepare(ctx context.Context, tx *db.Tx, obj *api.Object, prev *api.Object) error {
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
			return fault.UnprocessableFields("invalid node: its org does not exist", []fault.FieldError{{Field: "/spec/org", Message: fmt.Sprintf("org %q does not exist", fault.Truncate(org, 80))}})
		}
		return err
	}
	return nil
}

// nodeAfterWrite drops the static memberships a move to another org made invalid, in the
// moving transaction: a node belongs only to groups of its own org.
func nodeAfterWrite(ctx context.Context, tx *db.Tx, id int64, obj api.Object, prev *api.Object) error {
	if prev == nil || NodeOrg(*prev) == NodeOrg(obj) {
		return nil
	}
	left, err := groupIDs(ctx, tx, q.Get("NodeDropForeignMemberships"), id, NodeOrg(obj), KindGroup)
	touchGroups(ctx, tx, left...)
	return err
}

// nodeBeforeDelete drops the node's static memberships itself (rather than leaving them to
// the foreign key's cascade), so each group it leaves is stamped with its new member count.
func nodeBeforeDelete(ctx context.Context, s *Service, tx *db.Tx, id int64, node api.Object, cascade bool) error {
	left, err := groupIDs(ctx, tx, q.Get("NodeMembershipsDrop"), id)
	touchGroups(ctx, tx, left...)
	return err
}

// groupIDs runs a statement returning group ids.
func groupIDs(ctx context.Context, tx *db.Tx, query *db.Query, args ...any) ([]int64, error) {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

func groupPrepare(ctx context.Context, tx *db.Tx, obj *api.Object, prev *api.Object) error {
	if prev == nil {
		obj.Status = groupStatus(0) // memberships change it (groups.go)
	}
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
			errs = append(errs, fault.FieldError{Field: "/spec/priority", Message: fmt.Sprintf("must be an integer from %d to %d, not %s", int32(-1<<31), int32(1<<31-1), fault.Truncate(p.String(), 40))})
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

// groupAfterWrite stores the group's parsed selector in group_selectors (migration 0009), in
// the writing transaction, for SQL that evaluates membership (node_pillars); no selector, no
// row. The trigger of migration 0009 has already made the row's existence and selector text
// right; this fills in the requirements.
func groupAfterWrite(ctx context.Context, tx *db.Tx, id int64, obj api.Object, prev *api.Object) error {
	var s struct {
		Selector string `json:"selector"`
	}
	if err := json.Unmarshal(obj.Spec, &s); err != nil {
		return err
	}
	if s.Selector == "" {
		_, err := tx.Exec(ctx, q.Get("GroupSelectorDelete"), id)
		return err
	}
	reqs, err := SelectorRequirementsJSON(s.Selector)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, q.Get("GroupSelectorPut"), id, s.Selector, reqs)
	return err
}

// selectorRequirement is one requirement as group_selectors stores it: Key is the label key
// as written (prefix/name, or name), which is how node_pillars looks labels up.
type selectorRequirement struct {
	Key    string   `json:"key"`
	Prefix string   `json:"prefix"`
	Name   string   `json:"name"`
	Op     string   `json:"op"`
	Values []string `json:"values"`
}

// SelectorRequirementsJSON parses a label selector into the JSON array group_selectors
// stores: one {"key", "prefix", "name", "op", "values"} per requirement, op one of in, notin,
// exists and ! (metadata.Op), values [] for exists and !.
func SelectorRequirementsJSON(selector string) ([]byte, error) {
	sel, err := metadata.ParseSelector(selector)
	if err != nil {
		return nil, err
	}
	out := make([]selectorRequirement, 0, len(sel.Requirements))
	for _, r := range sel.Requirements {
		vs := r.Values
		if vs == nil {
			vs = []string{}
		}
		out = append(out, selectorRequirement{Key: r.Key, Prefix: r.Prefix, Name: r.Name, Op: string(r.Op), Values: vs})
	}
	return json.Marshal(out)
}

// SyncGroupSelectors parses the pending rows of group_selectors (requirements NULL: groups
// that existed before migration 0009, or whose selector a release without this code
// changed) and returns how many it filled. Every replica may run it at any time: a row is
// written only if its selector text is still the one parsed, and two replicas parse one text
// to the same value.
func SyncGroupSelectors(ctx context.Context, d *db.DB) (int, error) {
	rows, err := d.Query(ctx, q.Get("GroupSelectorsPending"))
	if err != nil {
		return 0, err
	}
	type pending struct {
		id  int64
		sel string
	}
	var ps []pending
	for rows.Next() {
		var p pending
		if err := rows.Scan(&p.id, &p.sel); err != nil {
			rows.Close()
			return 0, err
		}
		ps = append(ps, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, p := range ps {
		reqs, err := SelectorRequirementsJSON(p.sel)
		if err != nil {
			// Only a selector this release refuses (written by another release) gets here; the
			// row stays pending, so node_pillars keeps failing loudly for that org.
			errs = append(errs, fmt.Errorf("group selector of group id %d: %w", p.id, err))
			continue
		}
		tag, err := d.Exec(ctx, q.Get("GroupSelectorFill"), p.id, p.sel, reqs)
		if err != nil {
			return n, err
		}
		n += int(tag)
	}
	return n, errors.Join(errs...)
}

// GroupSelector returns a group's spec.selector, parsed.
func GroupSelector(obj api.Object) (metadata.Selector, error) {
	var s struct {
		Selector string `json:"selector"`
	}
	if err := json.Unmarshal(obj.Spec, &s); err != nil {
		return metadata.Selector{}, err
	}
	return metadata.ParseSelector(s.Selector)
}

// orgBeforeDelete refuses to delete an org that still has nodes, groups or objects of user
// kinds (409), or, with cascade, deletes them first, each with its own DELETED change so
// watchers see them go. Left behind, objects of user kinds would reappear in a new org of
// the same name. The org's row lock (taken by Delete) keeps new objects out meanwhile.
func orgBeforeDelete(ctx context.Context, s *Service, tx *db.Tx, id int64, org api.Object, cascade bool) error {
	var nodes, groups, others int64
	if err := tx.QueryRow(ctx, q.Get("OrgDependents"), org.Metadata.Name, KindNode, KindGroup).Scan(&nodes, &groups, &others); err != nil {
		return err
	}
	if nodes+groups+others == 0 {
		return nil
	}
	if !cascade {
		what := fmt.Sprintf("%d nodes and %d groups", nodes, groups)
		if others > 0 {
			what = fmt.Sprintf("%d nodes, %d groups and %d objects of other kinds", nodes, groups, others)
		}
		return fault.Conflict("org %q still has %s: delete them first, or delete the org with ?cascade=true to delete them with it", org.Metadata.Name, what)
	}
	rows, err := tx.Query(ctx, q.Get("OrgDependentsLock"), org.Metadata.Name, KindNode)
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
		if err := deleteLocked(ctx, tx, d.id, d.obj, false); err != nil {
			return err
		}
	}
	return nil
}
