package pillar

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/jsondepth"
	"github.com/stratahq/strata/internal/resource"
	"github.com/stratahq/strata/internal/secret"
)

// Inter-server sync (issue 19, item 4): an ndjson stream of records that carries what one
// installation's pillars stand on to another — the kinds typed categories are bound to (their
// current schema), the category bindings, the orgs, nodes (with labels) and groups (selector,
// priority, static members) the rows hang off, and every row with its target by name and its
// history. SyncImport applies a stream idempotently: what exists equal is left alone, so
// running a sync twice changes nothing the second time, and a dry run answers the plan.

// SyncVersion is the format's version, in the header record.
const SyncVersion = 1

// SyncRecord is one line of the stream. Type says which members it uses: "header" (Version,
// Org, ExportedAt), "kind" (Name, Scope, Schema), "category" (Category, Kind), "org" (Name),
// "node" (Name, Org, Labels), "group" (Org, Name, Selector, Priority, Members), "row"
// (Target, Category, Data, Revision, UpdatedAt, UpdatedBy, History).
type SyncRecord struct {
	Type       string            `json:"type"`
	Version    int               `json:"version,omitempty"`
	ExportedAt *time.Time        `json:"exportedAt,omitempty"`
	Name       string            `json:"name,omitempty"`
	Scope      string            `json:"scope,omitempty"`
	Schema     json.RawMessage   `json:"schema,omitempty"`
	Category   string            `json:"category,omitempty"`
	Kind       string            `json:"kind,omitempty"`
	Org        string            `json:"org,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	Selector   string            `json:"selector,omitempty"`
	Priority   int               `json:"priority,omitempty"`
	Members    []string          `json:"members,omitempty"`
	Target     string            `json:"target,omitempty"`
	Data       json.RawMessage   `json:"data,omitempty"`
	// Sealed is a secret row's value as stored (Data is then its masked shape): it opens
	// only on an installation holding the same key.
	Sealed []byte `json:"sealed,omitempty"`
	// Secret is a category record's secret property.
	Secret    bool         `json:"secret,omitempty"`
	Revision  int64        `json:"revision,omitempty"`
	UpdatedAt *time.Time   `json:"updatedAt,omitempty"`
	UpdatedBy string       `json:"updatedBy,omitempty"`
	History   []SyncChange `json:"history,omitempty"`
	// Line is the record's line in the stream (ReadSync), which refusals of it name.
	Line int `json:"-"`
}

// SyncChange is a history entry as the stream carries it.
type SyncChange struct {
	Revision int64           `json:"revision"`
	Old      json.RawMessage `json:"old"`
	New      json.RawMessage `json:"new"`
	Actor    string          `json:"actor"`
	At       time.Time       `json:"at"`
	// OldSealed and NewSealed are the sealed values of a secret row's entry.
	OldSealed []byte `json:"oldSealed,omitempty"`
	NewSealed []byte `json:"newSealed,omitempty"`
}

// SyncExport writes the stream of opts' scope to w, read in one snapshot.
func (s *Service) SyncExport(ctx context.Context, opts ExportOptions, w io.Writer) error {
	type kindRef struct {
		category, kind string
		secret         bool
	}
	var (
		x        exported
		bindings []kindRef
		history  = map[string][]SyncChange{}
	)
	err := s.db.ReadTx(ctx, func(tx *db.Tx) error {
		var err error
		if x, err = readExported(ctx, tx, opts.Org); err != nil {
			return err
		}
		rows := x.rows
		bs, err := tx.Query(ctx, q.Get("SyncBoundKinds"))
		if err != nil {
			return err
		}
		for bs.Next() {
			var b kindRef
			if err := bs.Scan(&b.category, &b.kind, &b.secret); err != nil {
				bs.Close()
				return err
			}
			bindings = append(bindings, b)
		}
		bs.Close()
		if err := bs.Err(); err != nil {
			return err
		}
		targets, cats := make([]string, len(rows)), make([]string, len(rows))
		for i, r := range rows {
			targets[i], cats[i] = r.target.String(), r.category
		}
		hs, err := tx.Query(ctx, q.Get("SyncHistory"), targets, cats)
		if err != nil {
			return err
		}
		defer hs.Close()
		for hs.Next() {
			var (
				target, category string
				c                SyncChange
				old, new         []byte
			)
			if err := hs.Scan(&target, &category, &c.Revision, &old, &new, &c.Actor, &c.At, &c.OldSealed, &c.NewSealed); err != nil {
				return err
			}
			c.Old, c.New, c.At = rawOrNull(old), rawOrNull(new), c.At.UTC()
			history[target+"\x00"+category] = append(history[target+"\x00"+category], c)
		}
		return hs.Err()
	})
	if err != nil {
		return err
	}
	orgs, nodes, groups, rows := x.orgs, x.nodes, x.groups, x.rows
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	now := time.Now().UTC()
	if err := enc.Encode(SyncRecord{Type: "header", Version: SyncVersion, Org: opts.Org, ExportedAt: &now}); err != nil {
		return err
	}
	// Kinds and bindings of the categories the rows use.
	used := map[string]bool{}
	for _, r := range rows {
		used[r.category] = true
	}
	kindsDone := map[string]bool{}
	for _, b := range bindings {
		if !used[b.category] {
			continue
		}
		if b.kind != "" && !kindsDone[b.kind] && s.kinds != nil {
			kindsDone[b.kind] = true
			k, err := s.kinds.Get(ctx, b.kind)
			if err != nil {
				return err
			}
			if err := enc.Encode(SyncRecord{Type: "kind", Name: k.Name, Scope: k.Scope, Schema: k.Schema}); err != nil {
				return err
			}
		}
		if err := enc.Encode(SyncRecord{Type: "category", Category: b.category, Kind: b.kind, Secret: b.secret}); err != nil {
			return err
		}
	}
	for _, o := range orgs {
		if err := enc.Encode(SyncRecord{Type: "org", Name: o}); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		if err := enc.Encode(SyncRecord{Type: "node", Name: n.name, Org: n.org, Labels: n.labels}); err != nil {
			return err
		}
	}
	for _, g := range groups {
		if err := enc.Encode(SyncRecord{Type: "group", Org: g.org, Name: g.name, Selector: g.selector, Priority: g.priority, Members: g.static}); err != nil {
			return err
		}
	}
	for _, r := range rows {
		if err := enc.Encode(SyncRecord{Type: "row", Target: r.target.String(), Category: r.category, Data: r.data, Sealed: r.sealed,
			History: history[r.target.String()+"\x00"+r.category]}); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func rawOrNull(b []byte) json.RawMessage {
	if b == nil {
		return json.RawMessage("null")
	}
	return b
}

// SyncAction is what an ndjson import did (or, in a dry run, would do) with one record.
type SyncAction struct {
	Type   string `json:"type"`
	Name   string `json:"name"`
	Action string `json:"action"` // created, updated, unchanged, registered
	// History counts the history entries the record added.
	History int `json:"history,omitempty"`
}

// SyncReport is an ndjson import's plan.
type SyncReport struct {
	Items   []SyncAction `json:"items"`
	DryRun  bool         `json:"dryRun"`
	Applied bool         `json:"applied"`
}

// ReadSync reads an ndjson stream into records, checking each line's shape: a line that is
// not a record is a 400 naming its line number. The first record must be the header.
func ReadSync(r io.Reader) ([]SyncRecord, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	var out []SyncRecord
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var rec SyncRecord
		if err := dec.Decode(&rec); err != nil {
			return nil, fault.Invalid(fmt.Sprintf("line %d", line), "line %d is not a sync record: %v", line, err)
		}
		if len(out) == 0 && (rec.Type != "header" || rec.Version != SyncVersion) {
			return nil, fault.Invalid("line 1", "the stream must start with a header record of version %d (strata pillar export --format ndjson writes one)", SyncVersion)
		}
		if err := rec.check(); err != nil {
			return nil, fault.Invalid(fmt.Sprintf("line %d", line), "line %d: %v", line, err)
		}
		rec.Line = line
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fault.Invalid(fmt.Sprintf("line %d", line+1), "line %d is longer than 64 MiB", line+1)
		}
		return nil, err // the body's own error (too large: the API answers 413)
	}
	if len(out) == 0 {
		return nil, fault.Invalid("", "the stream is empty")
	}
	return out, nil
}

// check refuses records missing what their type needs.
func (r SyncRecord) check() error {
	need := func(ok bool, what string) error {
		if !ok {
			return fmt.Errorf("a %s record needs %s", r.Type, what)
		}
		return nil
	}
	switch r.Type {
	case "header":
		return nil
	case "kind":
		return need(r.Name != "" && len(r.Schema) > 0, "name and schema")
	case "category":
		return need(r.Category != "", "category")
	case "org":
		return need(r.Name != "", "name")
	case "node":
		return need(r.Name != "" && r.Org != "", "name and org")
	case "group":
		return need(r.Name != "" && r.Org != "", "org and name")
	case "row":
		if _, err := ParseTarget(r.Target); err != nil {
			return err
		}
		return need(r.Category != "" && len(r.Data) > 0, "target, category and data")
	}
	return fmt.Errorf("unknown record type %q", fault.Truncate(r.Type, 40))
}

// ParseTarget reads a target's name: global, org/<org>, group/<org>/<group>, node/<node>.
func ParseTarget(s string) (Target, error) {
	parts := strings.Split(s, "/")
	switch {
	case s == "global":
		return Global, nil
	case len(parts) == 2 && parts[0] == "org" && parts[1] != "":
		return Target{Kind: "org", Org: parts[1]}, nil
	case len(parts) == 3 && parts[0] == "group" && parts[1] != "" && parts[2] != "":
		return Target{Kind: "group", Org: parts[1], Group: parts[2]}, nil
	case len(parts) == 2 && parts[0] == "node" && parts[1] != "":
		return Target{Kind: "node", Node: parts[1]}, nil
	}
	return Target{}, fmt.Errorf("target %q is not global, org/ORG, group/ORG/GROUP or node/NODE", fault.Truncate(s, 120))
}

// AuthorizeSync checks that p may do everything recs ask for, before anything is done:
// pillars:write:* (rows and category properties, which apply everywhere), kinds:write:<Kind>,
// kinds:read:<Kind> for a category bound to a kind,
// orgs:write:<org>, nodes:write:<node> with orgs:attach:<org>, groups:write:<org>.
func AuthorizeSync(p *auth.Principal, recs []SyncRecord) error {
	checked := map[[3]string]bool{}
	check := func(family, verb, name string) error {
		k := [3]string{family, verb, name}
		if checked[k] {
			return nil
		}
		checked[k] = true
		return p.Check(family, verb, name)
	}
	if err := check("pillars", "write", "*"); err != nil {
		return err
	}
	for _, r := range recs {
		var err error
		switch r.Type {
		case "kind":
			err = check("kinds", "write", r.Name)
		case "category":
			if r.Kind != "" {
				err = check("kinds", "read", r.Kind)
			}
		case "org":
			err = check("orgs", "write", r.Name)
		case "node":
			if err = check("nodes", "write", r.Name); err == nil {
				err = check("orgs", "attach", r.Org)
			}
		case "group":
			if err = check("groups", "write", r.Org); err == nil {
				err = check("orgs", "attach", r.Org)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// SyncImport applies recs (ReadSync; authorized by AuthorizeSync) in one transaction, or
// with dryRun checks them and rolls back. Kinds are registered through the registry (their
// compatibility check against this installation's data applies), category bindings set,
// missing orgs, nodes and groups created (existing ones are left as they are, static members
// added), history entries added unless present, and rows written where their data differs.
func (s *Service) SyncImport(ctx context.Context, res *resource.Service, recs []SyncRecord, dryRun bool, actor auth.AuditActor) (SyncReport, error) {
	rep := SyncReport{Items: []SyncAction{}, DryRun: dryRun}
	defer s.wrote()
	err := s.inTxOrDryRun(ctx, dryRun, func(tx *db.Tx) error {
		ctx := db.WithTx(ctx, tx)
		rep.Items = rep.Items[:0]
		pending := map[string]bool{} // kinds a dry run would register
		for _, r := range recs {
			act := SyncAction{Type: r.Type}
			var err error
			switch r.Type {
			case "header":
				continue
			case "kind":
				act.Name = r.Name
				act.Action, err = s.syncKind(ctx, r, dryRun, actor)
				pending[r.Name] = dryRun && act.Action != "unchanged"
			case "category":
				act.Name = r.Category
				if pending[r.Kind] {
					act.Action = "created" // bound once the kind is registered, which a dry run does not do
					break
				}
				act.Action, err = s.syncCategory(ctx, r, actor.Actor)
			case "org":
				act.Name = r.Name
				act.Action, err = syncObject(ctx, res, resource.Ref{Kind: resource.KindOrg, Name: r.Name}, api.Object{})
			case "node":
				act.Name = r.Name
				if err = syncNodeClaim(ctx, res, r); err != nil {
					break
				}
				spec, _ := json.Marshal(map[string]string{"org": r.Org})
				act.Action, err = syncObject(ctx, res, resource.Ref{Kind: resource.KindNode, Name: r.Name}, api.Object{Metadata: api.ObjectMeta{Labels: r.Labels}, Spec: spec})
			case "group":
				act.Name = r.Org + "/" + r.Name
				act.Action, err = s.syncGroup(ctx, res, r)
			case "row":
				act.Name = r.Target + "/" + r.Category
				act.Action, act.History, err = s.syncRow(ctx, tx, r, actor)
			}
			if err != nil {
				return fmt.Errorf("%s %s: %w", r.Type, act.Name, err)
			}
			rep.Items = append(rep.Items, act)
		}
		return nil
	})
	rep.Applied, err = dryRunOutcome(dryRun, err)
	return rep, err
}

// syncKind registers a kind's schema unless the kind's current revision has it. The
// registration runs in its own transaction (the registry's key and check), so a dry run
// asks the registry for a dry run instead.
func (s *Service) syncKind(ctx context.Context, r SyncRecord, dryRun bool, actor auth.AuditActor) (string, error) {
	if s.kinds == nil {
		return "", fmt.Errorf("no kind registry")
	}
	res, err := s.kinds.Register(db.WithoutTx(ctx), actor, r.Name, api.KindRequest{Scope: r.Scope, Schema: r.Schema}, dryRun)
	switch {
	case err != nil:
		return "", err
	case res.Unchanged:
		return "unchanged", nil
	case res.Revision == 1:
		return "created", nil
	}
	return "registered", nil
}

func (s *Service) syncCategory(ctx context.Context, r SyncRecord, actor string) (string, error) {
	cur, err := s.GetCategory(ctx, r.Category)
	if err != nil && fault.KindOf(err) != fault.KindNotFound {
		return "", err
	}
	// A stream never makes a category plain: a secret category here stays secret whatever
	// the source says (a staging installation's plain category must not decrypt
	// production's).
	secret := r.Secret || (err == nil && cur.Secret)
	if err == nil && cur.Kind == r.Kind && cur.Secret == secret && cur.UpdatedAt != nil {
		return "unchanged", nil
	}
	if _, created, err := s.SetCategory(ctx, r.Category, api.PillarCategoryRequest{Kind: r.Kind, Secret: secret}, actor); err != nil {
		return "", err
	} else if created {
		return "created", nil
	}
	return "updated", nil
}

// syncObject creates an object unless it exists (an existing one is left as it is: its
// labels and spec are this installation's).
func syncObject(ctx context.Context, res *resource.Service, ref resource.Ref, obj api.Object) (string, error) {
	_, err := res.Get(ctx, ref)
	if err == nil {
		return "unchanged", nil
	}
	if fault.KindOf(err) != fault.KindNotFound {
		return "", err
	}
	if _, err := res.Create(ctx, ref, obj); err != nil {
		return "", err
	}
	return "created", nil
}

// syncNodeClaim checks a node record against the node when it exists: the record's org is
// the stream's claim of where the node is, which AuthorizeSync authorized (orgs:attach), and
// an import never moves a node, so a node in another org is a 422 naming the record rather
// than "unchanged" — the stream describes some other installation, and its rows would land
// on a node of an org the caller was not authorized for. The answer names the node's org:
// the record needed nodes:write on the node, which implies reading it.
func syncNodeClaim(ctx context.Context, res *resource.Service, r SyncRecord) error {
	cur, err := res.Get(ctx, resource.Ref{Kind: resource.KindNode, Name: r.Name})
	if fault.KindOf(err) == fault.KindNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	real := resource.NodeOrg(cur)
	if real == r.Org {
		return nil
	}
	return fault.UnprocessableFields(
		fmt.Sprintf("the node record places node %q in org %q, but it is in org %q; nothing was imported (an import never moves a node: move it first, or fix the record)", fault.Truncate(r.Name, 80), fault.Truncate(r.Org, 80), fault.Truncate(real, 80)),
		[]fault.FieldError{{Field: "node " + fault.Truncate(r.Name, 80), Message: fmt.Sprintf("claims org %q for a node in org %q", fault.Truncate(r.Org, 80), fault.Truncate(real, 80))}})
}

func (s *Service) syncGroup(ctx context.Context, res *resource.Service, r SyncRecord) (string, error) {
	spec := map[string]any{}
	if r.Selector != "" {
		spec["selector"] = r.Selector
	}
	if r.Priority != 0 {
		spec["priority"] = r.Priority
	}
	b, _ := json.Marshal(spec)
	action, err := syncObject(ctx, res, resource.Ref{Kind: resource.KindGroup, Org: r.Org, Name: r.Name}, api.Object{Spec: b})
	if err != nil {
		return "", err
	}
	for _, m := range r.Members {
		added, err := res.AddMember(ctx, r.Org, r.Name, m)
		if err != nil {
			return "", fmt.Errorf("member %s: %w", m, err)
		}
		if added && action == "unchanged" {
			action = "updated"
		}
	}
	return action, nil
}

// syncRow adds the row's history entries this installation lacks, then writes its data
// unless the stored row equals it and the caller may be told so (mayCompare; a typed
// category validates it as any write).
//
// The entries keep the actor and time the stream claims — the source installation's
// record, which this one cannot check — so each is marked with who imported it and when
// (imported_by, imported_at), and a row whose history gained entries gets an audit record
// of its own (pillar.history.import), whether or not its data then changes: history is
// never extended without a trace of who did it.
func (s *Service) syncRow(ctx context.Context, tx *db.Tx, r SyncRecord, who auth.AuditActor) (string, int, error) {
	actor := who.Actor
	t, err := ParseTarget(r.Target)
	if err != nil {
		return "", 0, err
	}
	raw := []byte(r.Data)
	if r.Sealed != nil {
		// Sealed on another installation with the same key, bound to the same target and
		// category: it opens here or the sync stops, naming the record.
		if raw, err = s.openSynced(ctx, tx, r, t, r.Sealed, "sealed"); err != nil {
			return "", 0, err
		}
	}
	// A history entry's sealed values are stored as they came, so they must open here too:
	// a value that does not would fail every later read of the history, and a restore.
	for i, c := range r.History {
		for _, v := range []struct {
			what   string
			sealed []byte
		}{{"oldSealed", c.OldSealed}, {"newSealed", c.NewSealed}} {
			if v.sealed == nil {
				continue
			}
			if _, err := s.openSynced(ctx, tx, r, t, v.sealed, fmt.Sprintf("history[%d].%s", i, v.what)); err != nil {
				return "", 0, err
			}
		}
	}
	data, err := DecodeObject(raw)
	if err != nil {
		return "", 0, err
	}
	if err := jsondepth.Check(data, ""); err != nil {
		return "", 0, err // also when the stored row is equal: nothing deeper is written anew
	}
	// History entries are stored as sent, and a restore writes them back: they obey the
	// depth limit of the rows they record.
	for i, c := range r.History {
		for _, side := range []struct {
			name string
			raw  json.RawMessage
		}{{"old", c.Old}, {"new", c.New}} {
			if len(side.raw) == 0 {
				continue
			}
			v, err := DecodeValue(side.raw)
			if err != nil {
				return "", 0, fault.Invalid(fmt.Sprintf("/history/%d/%s", i, side.name), "history entry %d: %s is not JSON: %v", i, side.name, err)
			}
			if err := jsondepth.Check(v, fmt.Sprintf("/history/%d/%s", i, side.name)); err != nil {
				return "", 0, err
			}
		}
	}
	rid, err := lockTarget(ctx, tx, t)
	if err != nil {
		return "", 0, err
	}
	// History entries of a category secret here arrive sealed (a secret source) or are
	// sealed now (a plain source): this installation's secret history is never plaintext.
	cat, err := s.GetCategory(ctx, r.Category)
	if err != nil && fault.KindOf(err) != fault.KindNotFound {
		return "", 0, err
	}
	added := 0
	revisions := []int64{}
	for _, c := range r.History {
		if cat.Secret {
			if c, err = s.sealChange(t, r.Category, c); err != nil {
				return "", added, err
			}
		}
		n, err := tx.Exec(ctx, q.Get("SyncHistoryAdd"), t.String(), rid, r.Category, c.Revision, nullable(c.Old), nullable(c.New), c.Actor, c.At, nullBytes(c.OldSealed), nullBytes(c.NewSealed), actor)
		if err != nil {
			return "", added, err
		}
		if n > 0 {
			added += int(n)
			revisions = append(revisions, c.Revision)
		}
	}
	if added > 0 {
		// The revisions only: the audit log never holds values, and the claimed actors are
		// in the entries themselves.
		if err := auth.RecordAudit(ctx, tx, auth.AuditEntry{Actor: actor, RemoteAddr: who.RemoteAddr, Action: "pillar.history.import",
			Target: t.String() + "/" + r.Category, Detail: map[string]any{"entries": added, "revisions": revisions}}); err != nil {
			return "", added, err
		}
	}
	cur, err := s.get(ctx, t, r.Category, true)
	switch {
	case fault.KindOf(err) == fault.KindNotFound:
		if _, _, err := s.Put(ctx, t, r.Category, data, "", actor); err != nil {
			return "", added, err
		}
		return "created", added, nil
	case err != nil:
		return "", added, err
	}
	stored, _ := json.Marshal(cur.Data)
	if sameJSON(stored, raw) && mayCompare(ctx, t, cur) {
		return "unchanged", added, nil
	}
	if _, _, err := s.Put(ctx, t, r.Category, data, "", actor); err != nil {
		return "", added, err
	}
	return "updated", added, nil
}

// openSynced opens a sealed value a sync record carries (what names it in the record). One
// that does not open is the record's fault: a 422 naming its line, dry run alike — malformed,
// altered, sealed for another row, or with a key no sealed pillar value of this database
// uses. Only a value sealed with a key that values of this database do use, and that this
// replica lacks, is this replica's fault (a 503: start it with every key file). Neither
// answer lists a key id this replica holds: that is for operators (strata keys status).
func (s *Service) openSynced(ctx context.Context, tx *db.Tx, r SyncRecord, t Target, sealed []byte, what string) ([]byte, error) {
	if err := s.keys.Require(); err != nil {
		return nil, secret.Fault(err)
	}
	plain, err := s.keys.Open(sealed, sealAAD(t, r.Category))
	if err == nil {
		return plain, nil
	}
	if errors.Is(err, secret.ErrMissingKey) {
		id, _ := secret.KeyID(sealed)
		raw, _ := hex.DecodeString(id)
		var used bool
		if err := tx.QueryRow(ctx, q.Get("SealedKeyUsed"), db.Bytes(raw)).Scan(&used); err != nil {
			return nil, err
		}
		if used {
			return nil, fault.Unavailable(fault.ReasonUnavailable, err, "line %d: the %s value of pillar %q of %s was encrypted with a key that values in this database use and this replica does not hold: start it with every key file (strata keys status lists what is missing)", r.Line, what, r.Category, t)
		}
	}
	return nil, fault.UnprocessableFields(fmt.Sprintf("line %d: the %s value of pillar %q of %s does not open here", r.Line, what, r.Category, t),
		[]fault.FieldError{{Field: fmt.Sprintf("line %d", r.Line), Message: what + " does not open with this installation's keys: it is malformed or altered, was encrypted for another row, or with a key none of this installation's values use (import a stream where the installation that wrote it shares its key)"}})
}

// nullable is a history value for SQL: NULL for JSON null or absent.
func nullable(raw json.RawMessage) any {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return []byte(raw)
}

// sealChange returns a history entry of a secret category as this installation stores it:
// each plain value sealed, with its masked shape beside it (sealed values stay as they came).
func (s *Service) sealChange(t Target, category string, c SyncChange) (SyncChange, error) {
	for _, v := range []struct {
		raw    *json.RawMessage
		sealed *[]byte
	}{{&c.Old, &c.OldSealed}, {&c.New, &c.NewSealed}} {
		if *v.sealed != nil || nullable(*v.raw) == nil {
			continue
		}
		sv, err := s.store(t, category, *v.raw, true)
		if err != nil {
			return c, err
		}
		*v.raw, *v.sealed = sv.data, sv.sealed
	}
	return c, nil
}
