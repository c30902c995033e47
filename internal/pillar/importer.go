package pillar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/pillar/sls"
	"github.com/stratahq/strata/internal/resource"
)

// ImportOptions qualify an import of a file-based pillar tree.
type ImportOptions struct {
	// Org receives the nodes and groups the tree's top.sls targets (a Salt tree has no orgs).
	Org string
	// DryRun computes and checks everything, then rolls back.
	DryRun bool
	// SkipUnsupported imports what can be translated faithfully and leaves out the rest;
	// without it an import with anything unsupported imports nothing.
	SkipUnsupported bool
	// Progress, when set, is called before each row with its index and the number of rows.
	Progress func(done, total int)
	// OnRow, when set, is called after each row is written in the import's transaction,
	// with the row's 1-based index and the number of rows (the NDJSON result stream of
	// POST /v1/pillars:import). The rows are committed only when Import returns no error.
	OnRow func(row ImportedRow, index, total int)
}

// ImportedRow is one pillar row of an import and what the import did with it.
type ImportedRow struct {
	Target   string   `json:"target"`
	Category string   `json:"category"`
	Sources  []string `json:"sources"`
	Match    string   `json:"match,omitempty"`
	// Action is created, updated or unchanged.
	Action string `json:"action"`
	// Secret marks a row holding decrypted PGP values: the importer stores such rows in a secret category.
	Secret bool `json:"secret,omitempty"`
}

// ImportedGroup is a group an import made for a top.sls target that is a list, glob or
// nodegroup.
type ImportedGroup struct {
	Name     string   `json:"name"`
	Match    string   `json:"match"`
	Members  []string `json:"members,omitempty"`
	Selector string   `json:"selector,omitempty"`
	// Snapshot: the members are the nodes a glob matched at import time; nodes created later
	// do not join the group, unlike in Salt.
	Snapshot bool `json:"snapshot,omitempty"`
	Created  bool `json:"created"`
}

// ImportReport is the plan an import carried out (or, with DryRun, checked).
type ImportReport struct {
	Org          string            `json:"org"`
	Rows         []ImportedRow     `json:"rows"`
	Groups       []ImportedGroup   `json:"groups"`
	CreatedOrgs  []string          `json:"createdOrgs,omitempty"`
	CreatedNodes []string          `json:"createdNodes"`
	Unsupported  []sls.Unsupported `json:"unsupported"`
	DryRun       bool              `json:"dryRun"`
	Applied      bool              `json:"applied"`
}

var errDryRun = errors.New("dry run")

// Import applies a plan read from a file-based pillar tree in one transaction: the nodes the
// tree names (created in opts.Org when missing), the groups its list, glob and nodegroup
// targets become (with their static members or selector), and every pillar row. A row equal
// to the stored one is left alone, so importing the same tree twice changes nothing. Anything
// the plan could not translate faithfully makes the import a 422 listing it, unless
// opts.SkipUnsupported.
func (s *Service) Import(ctx context.Context, res *resource.Service, plan sls.Plan, opts ImportOptions, actor string) (ImportReport, error) {
	rep := ImportReport{Org: opts.Org, Rows: []ImportedRow{}, Groups: []ImportedGroup{}, CreatedNodes: []string{}, Unsupported: plan.Unsupported, DryRun: opts.DryRun}
	if rep.Unsupported == nil {
		rep.Unsupported = []sls.Unsupported{}
	}
	if len(plan.Unsupported) > 0 && !opts.SkipUnsupported {
		var fields []fault.FieldError
		for _, u := range plan.Unsupported {
			fields = append(fields, fault.FieldError{Field: fmt.Sprintf("%s:%d", u.File, u.Line), Message: u.Reason})
		}
		things := fmt.Sprintf("%d things in the tree cannot", len(fields))
		if len(fields) == 1 {
			things = "1 thing in the tree cannot"
		}
		return rep, fault.UnprocessableFields(things+" be imported faithfully; nothing was imported (fix them, or import the rest with skipUnsupported)", fields)
	}
	if opts.Org == "" && needsOrg(plan) {
		return rep, fault.Invalid("org", "the tree targets nodes or groups: name the org they belong to")
	}
	defer s.wrote()
	err := s.inTxOrDryRun(ctx, opts.DryRun, func(tx *db.Tx) error {
		ctx := db.WithTx(ctx, tx)
		// Rows holding decrypted PGP values go into secret categories, made secret before
		// any of their rows is written (in this transaction: a dry run leaves them as they were).
		if err := s.secretCategoriesFor(ctx, plan.Rows); err != nil {
			return err
		}
		orgs := map[string]bool{}
		ensureOrg := func(name string) error {
			if orgs[name] {
				return nil
			}
			orgs[name] = true
			_, err := res.Get(ctx, resource.Ref{Kind: resource.KindOrg, Name: name})
			if fault.KindOf(err) != fault.KindNotFound {
				return err
			}
			if _, err := res.Create(ctx, resource.Ref{Kind: resource.KindOrg, Name: name}, api.Object{}); err != nil {
				return fmt.Errorf("org %s: %w", name, err)
			}
			rep.CreatedOrgs = append(rep.CreatedOrgs, name)
			return nil
		}
		// nodeOrgs are the orgs of the nodes ensureNode has seen (created or checked).
		nodeOrgs := map[string]string{}
		// ensureNode creates a node the tree names in org (the placement's, else opts.Org).
		// A node that exists keeps its org: a strata-export comment (placedAt) claiming
		// another org for it is refused (422 naming the comment), since the tree then
		// describes some other installation and the caller was authorized for the claimed
		// org, not the node's; and the caller needs orgs:attach on the org the node is
		// really in, as for any write that touches a node of that org.
		ensureNode := func(org, name, placedAt string) error {
			if real, seen := nodeOrgs[name]; seen {
				return placementMatches(org, real, name, placedAt)
			}
			cur, err := res.Get(ctx, resource.Ref{Kind: resource.KindNode, Name: name})
			if err == nil {
				real := resource.NodeOrg(cur)
				if err := placementMatches(org, real, name, placedAt); err != nil {
					return err
				}
				if err := res.CheckHeld(ctx, cur, "importing into"); err != nil {
					return err
				}
				nodeOrgs[name] = real
				return nil
			}
			if fault.KindOf(err) != fault.KindNotFound {
				return err
			}
			if org == "" {
				org = opts.Org // which must exist: a typo in --org creates nothing
			} else if err := ensureOrg(org); err != nil {
				return err // an exported tree's orgs are made where they are missing
			}
			spec, _ := json.Marshal(map[string]string{"org": org})
			if _, err := res.Create(ctx, resource.Ref{Kind: resource.KindNode, Name: name}, api.Object{Spec: spec}); err != nil {
				return fmt.Errorf("node %s: %w", name, err)
			}
			rep.CreatedNodes = append(rep.CreatedNodes, name)
			nodeOrgs[name] = org
			return nil
		}
		groups := map[string]bool{}
		for i, row := range plan.Rows {
			if opts.Progress != nil {
				opts.Progress(i, len(plan.Rows))
			}
			var t Target
			switch row.Target.Kind {
			case "global":
				t = Global
			case "org":
				if err := ensureOrg(row.Target.Name); err != nil {
					return err
				}
				t = Target{Kind: "org", Org: row.Target.Name}
			case "node":
				if err := ensureNode(row.Target.Org, row.Target.Name, row.Target.PlacedAt); err != nil {
					return err
				}
				t = Target{Kind: "node", Node: row.Target.Name}
			case "group":
				org := opts.Org
				if row.Target.Placed {
					org = row.Target.Org
				}
				t = Target{Kind: "group", Org: org, Group: row.Target.Name}
				if key := org + "/" + row.Target.Name; !groups[key] {
					groups[key] = true
					placedOrg := ""
					if row.Target.Placed {
						placedOrg = org
						if err := ensureOrg(org); err != nil {
							return err
						}
					}
					g, err := s.importGroup(ctx, res, org, row.Target, func(name string) error { return ensureNode(placedOrg, name, row.Target.PlacedAt) })
					if err != nil {
						return err
					}
					rep.Groups = append(rep.Groups, g)
				}
			default:
				return fmt.Errorf("import: unknown target kind %q", row.Target.Kind)
			}
			action, err := s.importRow(ctx, t, row.Category, row.Data, actor)
			if err != nil {
				if row.Secret {
					err = withholdValues(err)
				}
				return fmt.Errorf("%s %s: %w", t, row.Category, err)
			}
			done := ImportedRow{Target: t.String(), Category: row.Category, Sources: row.Sources, Match: row.Target.Match, Action: action, Secret: row.Secret}
			rep.Rows = append(rep.Rows, done)
			if opts.OnRow != nil {
				opts.OnRow(done, i+1, len(plan.Rows))
			}
		}
		return nil
	})
	rep.Applied, err = dryRunOutcome(opts.DryRun, err)
	return rep, err
}

// placementMatches refuses a strata-export comment (at placedAt) that places node name in
// claimed when the node is in real: a 422 naming the comment's file and line, and the
// node's org (an import needs nodes:write:*, which implies reading every node). No claim
// (claimed "") always matches: the node is then targeted where it is.
func placementMatches(claimed, real, name, placedAt string) error {
	if claimed == "" || claimed == real {
		return nil
	}
	where := fmt.Sprintf("org %q", fault.Truncate(real, 80))
	if placedAt == "" {
		placedAt = "/files"
	}
	return fault.UnprocessableFields(
		fmt.Sprintf("a strata-export comment places node %q in org %q, but it is in %s; nothing was imported (an import never moves a node: move it first, or fix the comment)", fault.Truncate(name, 80), fault.Truncate(claimed, 80), where),
		[]fault.FieldError{{Field: placedAt, Message: fmt.Sprintf("the strata-export comment claims org %q for node %q, which is in %s", fault.Truncate(claimed, 80), fault.Truncate(name, 80), where)}})
}

// inTxOrDryRun runs fn in a transaction that commits, or with dryRun rolls back after fn
// succeeded (dryRunOutcome tells the two apart).
func (s *Service) inTxOrDryRun(ctx context.Context, dryRun bool, fn func(tx *db.Tx) error) error {
	return s.db.InTx(ctx, func(tx *db.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if dryRun {
			return errDryRun
		}
		return nil
	})
}

// dryRunOutcome reads inTxOrDryRun's error: applied when it committed, no error when a dry
// run rolled back as it should.
func dryRunOutcome(dryRun bool, err error) (applied bool, _ error) {
	if dryRun && errors.Is(err, errDryRun) {
		return false, nil
	}
	return err == nil, err
}

// needsOrg reports whether the plan has rows only opts.Org can place: nodes and groups that
// no strata-export comment puts in an org.
func needsOrg(plan sls.Plan) bool {
	for _, r := range plan.Rows {
		if r.Target.Kind != "global" && !(r.Target.Placed && (r.Target.Org != "" || r.Target.Kind == "org")) {
			return true
		}
	}
	return false
}

// importGroup makes the group of a list, glob or nodegroup target exist with its static
// members and selector.
func (s *Service) importGroup(ctx context.Context, res *resource.Service, org string, t sls.Target, ensureNode func(string) error) (ImportedGroup, error) {
	members := t.Members
	if t.Placed && t.Selector != "" {
		members = nil // a selector group's members at export time, listed for Salt only
	}
	g := ImportedGroup{Name: t.Name, Match: t.Match, Members: members, Selector: t.Selector, Snapshot: t.Snapshot}
	ref := resource.Ref{Kind: resource.KindGroup, Org: org, Name: t.Name}
	if _, err := res.Get(ctx, ref); fault.KindOf(err) == fault.KindNotFound {
		spec := map[string]any{}
		if t.Selector != "" {
			spec["selector"] = t.Selector
		}
		if t.Priority != 0 {
			spec["priority"] = t.Priority
		}
		b, _ := json.Marshal(spec)
		if _, err := res.Create(ctx, ref, api.Object{Spec: b}); err != nil {
			return g, fmt.Errorf("group %s: %w", t.Name, err)
		}
		g.Created = true
	} else if err != nil {
		return g, err
	}
	for _, m := range members {
		if err := ensureNode(m); err != nil {
			return g, err
		}
		if _, err := res.AddMember(ctx, org, t.Name, m); err != nil {
			return g, fmt.Errorf("group %s member %s: %w", t.Name, m, err)
		}
	}
	return g, nil
}

// importRow stores one pillar row unless the stored one is already equal and the caller may
// be told so (mayCompare): a secret row the caller may not read is always written.
func (s *Service) importRow(ctx context.Context, t Target, category string, data map[string]any, actor string) (string, error) {
	cur, err := s.get(ctx, t, category, true)
	switch {
	case fault.KindOf(err) == fault.KindNotFound:
		if _, _, err := s.Put(ctx, t, category, data, "", actor); err != nil {
			return "", err
		}
		return "created", nil
	case err != nil:
		return "", err
	}
	a, _ := json.Marshal(cur.Data)
	b, _ := json.Marshal(data)
	if bytes.Equal(a, b) && mayCompare(ctx, t, cur) {
		return "unchanged", nil
	}
	if _, _, err := s.Put(ctx, t, category, data, "", actor); err != nil {
		return "", err
	}
	return "updated", nil
}

// withholdValues rewords a secret row's refusal (a typed category's schema check) for the
// client: such messages quote the value ("pattern: \"…\" does not match …"), and a row
// holding decrypted PGP values must never echo its plaintext in an answer. The fault's kind,
// detail and fields stay, each message keeps its keyword (enum, pattern, type…). An error
// that is not a fault is internal: logged, never shown, so it passes unchanged.
func withholdValues(err error) error {
	var f *fault.Error
	if !errors.As(err, &f) {
		return err
	}
	out := &fault.Error{Kind: f.Kind, Detail: f.Detail + " (the row is secret, so the messages do not quote its values)"}
	for _, fe := range f.Fields {
		keyword, _, _ := strings.Cut(fe.Message, ":")
		out.Fields = append(out.Fields, fault.FieldError{Field: fe.Field, Message: keyword + ": the value is secret and not shown"})
	}
	return out
}

// secretCategoriesFor makes secret the categories of rows that hold decrypted PGP values and
// are not secret yet. That changes a property every target shares, so it needs what
// setting it directly needs (pillars:write:*); otherwise the import is refused saying so.
func (s *Service) secretCategoriesFor(ctx context.Context, rows []sls.Row) error {
	done := map[string]bool{}
	for _, row := range rows {
		if !row.Secret || done[row.Category] {
			continue
		}
		done[row.Category] = true
		cur, err := s.GetCategory(ctx, row.Category)
		if err != nil && fault.KindOf(err) != fault.KindNotFound {
			return err
		}
		if cur.Secret {
			continue
		}
		if p, ok := auth.FromContext(ctx); ok && p != nil && !p.Allows("pillars", "write", "*") {
			return fault.New(fault.KindForbidden, "category %s holds GPG-decrypted values and is not secret: making it secret needs pillars:write:* (or run `strata pillar category set %s --secret` first)", row.Category, row.Category)
		}
		if _, _, err := s.SetCategory(ctx, row.Category, api.PillarCategoryRequest{Kind: cur.Kind, Secret: true}, auth.AuditActorFrom(ctx).Actor); err != nil {
			return err
		}
	}
	return nil
}

// mayCompare reports whether an import may tell its caller that the stored row cur equals
// the value it sends ("unchanged" rather than "updated"): always for a plain row, for a
// secret row only when the caller may read its plaintext. Otherwise the two answers would
// confirm or refute a guess of the secret, dry run or not; and since seals are randomized, no
// comparison of sealed forms could stand in. Such a row is written (a new revision) and
// reported "updated" whatever it held.
func mayCompare(ctx context.Context, t Target, cur Pillar) bool {
	return !cur.Secret || MayReadSecrets(ctx, t.ScopeName())
}
