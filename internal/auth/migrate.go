package auth

import (
	"context"
	"fmt"
	"strings"

	"github.com/stratahq/strata/internal/db"
)

// NameMatcher reports whether any thing of a sort ("org", "node" or "global": global objects
// of user kinds) is called name or, with prefix, has a name starting with it. The resource
// service answers it (resource.Service.NamesMatch).
type NameMatcher func(ctx context.Context, sort, name string, prefix bool) (bool, error)

// ScopeMigration is one token whose scopes MigrateScopes rewrote.
type ScopeMigration struct {
	TokenID string   `json:"tokenId"`
	Name    string   `json:"name"`
	From    []string `json:"from"`
	To      []string `json:"to"`
	// Notes say, per rewritten scope, which target kinds it now names and why.
	Notes []string `json:"notes"`
}

// MigrateScopes rewrites the scopes that releases before target-qualified names granted
// (pillars:write:web*, resources:read:acme, *:read:acme) into the form that keeps what they
// granted for the target kind they were meant for: pillars:write:node/web*,
// resources:read:org/acme, and so on. Which kind a name was meant for is read, in order,
// from the token's other scopes (nodes:write:web* next to pillars:write:web* means nodes),
// then from the data (an org or a node of that name or prefix exists), and when neither
// tells, the scope keeps every target kind it granted and the note says to narrow it — but a
// *-family scope then gains nothing and keeps meaning the plain families only. Each
// rewrite is a compare-and-set with its audit record (token.scopes.migrate) in one
// transaction, so replicas starting together migrate each token once; the answer lists what
// this call rewrote, for the log. Only tokens an older release stored are looked at, each
// once (scopes_legacy, migration 0028): a token this release created means what the grammar
// says today, and reading its *:*:g* as a legacy name would extend it with the global layer.
func (s *Service) MigrateScopes(ctx context.Context, match NameMatcher) ([]ScopeMigration, error) {
	type row struct {
		id, name string
		scopes   []string
	}
	rows, err := s.db.Query(ctx, q.Get("TokenScopesAll"))
	if err != nil {
		return nil, err
	}
	var all []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.name, &r.scopes); err != nil {
			rows.Close()
			return nil, err
		}
		all = append(all, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []ScopeMigration
	for _, r := range all {
		to, notes, err := migrateTokenScopes(ctx, r.scopes, match)
		if err != nil {
			return out, fmt.Errorf("migrate the scopes of token %s: %w", r.id, err)
		}
		if len(notes) == 0 {
			// Nothing to rewrite: the token is not looked at again (a later start would
			// otherwise read names this release wrote, such as *:*:g*, as legacy ones).
			if _, err := s.db.Exec(ctx, q.Get("TokenScopesChecked"), r.id, r.scopes); err != nil {
				return out, err
			}
			continue
		}
		m := ScopeMigration{TokenID: r.id, Name: r.name, From: r.scopes, To: to, Notes: notes}
		done := false
		err = s.db.InTx(ctx, func(tx *db.Tx) error {
			n, err := tx.Exec(ctx, q.Get("TokenScopesSwap"), r.id, to, r.scopes)
			if err != nil || n == 0 {
				return err
			}
			done = true
			return RecordAudit(ctx, tx, AuditEntry{Actor: "system", Action: "token.scopes.migrate", Target: r.id, Detail: m})
		})
		if err != nil {
			return out, err
		}
		if done {
			out = append(out, m)
		}
	}
	s.mu.Lock()
	s.cache = map[[32]byte]cacheEntry{}
	s.mu.Unlock()
	return out, nil
}

// legacyTargetScope reports whether raw is a scope of a target family written without its
// target kind, as releases before target-qualified names wrote them.
func legacyTargetScope(raw string) (family, verb, name string, ok bool) {
	parts := strings.Split(raw, ":")
	if len(parts) != 3 {
		return "", "", "", false
	}
	family, verb, name = parts[0], parts[1], parts[2]
	if family != "*" && targetFamilies[family] == nil {
		return "", "", "", false
	}
	if name == "*" || strings.Contains(name, "/") || !plainNameRE.MatchString(name) || !contains(Verbs, verb) {
		return "", "", "", false
	}
	if name == "global" && family == "pillars" {
		return "", "", "", false // the global layer: valid as it is
	}
	return family, verb, name, true
}

// migrateTokenScopes returns a token's scopes with every legacy target scope rewritten, and
// a note per rewrite (none: nothing to do).
func migrateTokenScopes(ctx context.Context, scopes []string, match NameMatcher) ([]string, []string, error) {
	var to, notes []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			to = append(to, s)
		}
	}
	for _, raw := range scopes {
		family, verb, name, ok := legacyTargetScope(raw)
		if !ok {
			add(raw)
			continue
		}
		families := []string{family}
		if family == "*" {
			add(raw) // still grants the plain families by name
			families = []string{"pillars", "resources"}
		}
		var made, whys []string
		dropped := false
		for _, f := range families {
			names, reason, err := meantFor(ctx, f, name, scopes, match, family == "*")
			if err != nil {
				return nil, nil, err
			}
			if len(families) > 1 {
				reason = f + ": " + reason
			}
			whys = append(whys, reason)
			dropped = dropped || len(names) == 0
			for _, n := range names {
				made = append(made, f+":"+verb+":"+n)
			}
		}
		fresh := false
		for _, s := range made {
			fresh = fresh || !contains(scopes, s)
			add(s)
		}
		if !fresh && !dropped {
			continue // a *: scope this migration has already extended
		}
		if len(made) == 0 {
			notes = append(notes, fmt.Sprintf("%s kept, for the plain families only (%s)", raw, strings.Join(whys, "; ")))
			continue
		}
		notes = append(notes, fmt.Sprintf("%s → %s (%s)", raw, strings.Join(made, ", "), strings.Join(whys, "; ")))
	}
	return to, notes, nil
}

// meantFor decides the target-qualified names a legacy name of family stands for. star says
// the legacy scope was of the * family: when neither the token nor the data tells what its
// name meant, it gets none (a *-family name that is a plain prefix grants no target family,
// so *:*:g* must not become the global layer and every group g…), and the note says how to
// grant it explicitly.
func meantFor(ctx context.Context, family, name string, scopes []string, match NameMatcher, star bool) ([]string, string, error) {
	base, prefix := strings.CutSuffix(name, "*")
	hintNode, hintOrg := false, false
	for _, raw := range scopes {
		parts := strings.Split(raw, ":")
		if len(parts) != 3 || parts[2] != name {
			continue
		}
		switch parts[0] {
		case "nodes":
			hintNode = true
		case "orgs", "groups":
			hintOrg = true
		}
	}
	orgNames := func() []string {
		if family == "resources" {
			return []string{"org/" + name}
		}
		group := "group/" + name + "/*"
		if prefix {
			group = "group/" + name
		}
		return []string{"org/" + name, group}
	}
	var names []string
	if hintNode || hintOrg {
		var kinds []string
		if hintOrg {
			names = append(names, orgNames()...)
			kinds = append(kinds, "orgs or groups")
		}
		if hintNode && family == "pillars" {
			names = append(names, "node/"+name)
			kinds = append(kinds, "nodes")
		}
		if len(names) > 0 {
			return names, "the token's " + strings.Join(kinds, " and ") + " scopes name " + name, nil
		}
	}
	isOrg, err := match(ctx, "org", base, prefix)
	if err != nil {
		return nil, "", err
	}
	var found []string
	if isOrg {
		names = append(names, orgNames()...)
		found = append(found, "orgs")
	}
	other := "node"
	if family == "resources" {
		other = "global"
	}
	isOther, err := match(ctx, other, base, prefix)
	if err != nil {
		return nil, "", err
	}
	if isOther {
		names = append(names, other+"/"+name)
		found = append(found, map[string]string{"node": "nodes", "global": "global objects"}[other])
	}
	switch len(found) {
	case 1:
		return names, found[0] + " match " + name, nil
	case 2:
		return names, "ambiguous: both " + found[0] + " and " + found[1] + " match " + name + "; kept both, narrow the token", nil
	}
	if star {
		return nil, "nothing matches " + name + " today: no longer grants " + family + "; add " + family + ":…:" + map[string]string{"pillars": "global", "resources": "global/…"}[family] + " (or another target kind) explicitly if intended", nil
	}
	names = append(orgNames(), other+"/"+name)
	if family == "pillars" && (name == "global" || (prefix && strings.HasPrefix("global", base))) {
		names = append([]string{"global"}, names...)
	}
	return names, "nothing matches " + name + " today; kept every target kind it granted, narrow the token", nil
}
