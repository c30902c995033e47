package pillar

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/jsondepth"
	"github.com/stratahq/strata/internal/resource"
	"github.com/stratahq/strata/internal/secret"
)

// Secret categories (issue 22). A category made secret stores every row, at every target,
// sealed (package secret) in the column sealed, and only the row's shape in data: every leaf
// replaced by "(secret)". Everything that reads data therefore masks by construction (an
// older replica, node_pillars, exports); what reveals a value opens sealed, and only for a
// caller holding pillars:read-secrets on the row's target (on the node, for a render) —
// never implied by read, render or write. The history keeps sealed values beside masked
// ones, so a restore has the plaintext to write back.
//
// A sealed value is bound to its row's logical identity (sealAAD): the target by name and
// the category. A ciphertext moved to another row does not open; a backup restored, or a
// row synced to another installation with the same key, does. A renamed node's rows and
// history are sealed again under the new name in the rename's transaction.

// sealAAD is the associated data a row's sealed value is bound to.
func sealAAD(t Target, category string) []byte { return sealAADName(t.String(), category) }

// sealAADName is sealAAD for a target named as the history names it (Target.String).
func sealAADName(target, category string) []byte {
	return []byte("strata pillar\x00" + target + "\x00" + category)
}

// storedValue is a row's value as the table holds it: data (the masked shape for a secret
// row) and sealed (nil for a plain row).
type storedValue struct {
	data   []byte
	sealed []byte
}

// sealedArg is sealed for SQL: NULL for a plain row.
func (v storedValue) sealedArg() any { return nullBytes(v.sealed) }

// store makes the stored form of plain, a row of category at t: sealed when the category is
// secret.
func (s *Service) store(t Target, category string, plain []byte, isSecret bool) (storedValue, error) {
	if !isSecret {
		return storedValue{data: plain}, nil
	}
	if err := s.keys.Require(); err != nil {
		return storedValue{}, secret.Fault(err)
	}
	masked, err := maskJSON(plain)
	if err != nil {
		return storedValue{}, err
	}
	sealed, err := s.keys.Seal(plain, sealAAD(t, category))
	if err != nil {
		return storedValue{}, err
	}
	return storedValue{data: masked, sealed: sealed}, nil
}

// open returns the plaintext of a stored value of category at t.
func (s *Service) open(t Target, category string, data, sealed []byte) ([]byte, error) {
	if sealed == nil {
		return data, nil
	}
	if err := s.keys.Require(); err != nil {
		return nil, secret.Fault(err)
	}
	plain, err := s.keys.Open(sealed, sealAAD(t, category))
	if err != nil {
		return nil, secret.Fault(fmt.Errorf("pillar %q of %s: %w", category, t, err))
	}
	return plain, nil
}

// maskJSON is a JSON document's masked shape (secret.Mask).
func maskJSON(plain []byte) ([]byte, error) {
	v, err := decodeExact(plain)
	if err != nil {
		return nil, err
	}
	return json.Marshal(secret.Mask(v))
}

// MayReadSecrets reports whether the caller in ctx may read the plaintext of secret rows at
// the target named scopeName (a Target's ScopeName; a node's for its render). A context
// without a principal may not: internal callers that must see plaintext say so explicitly.
func MayReadSecrets(ctx context.Context, scopeName string) bool {
	p, ok := auth.FromContext(ctx)
	return ok && p != nil && p.Allows("pillars", "read-secrets", scopeName)
}

// reveal returns what the caller in ctx sees of a stored value: the plaintext when the row
// is plain or the caller may read its secrets, else the masked shape.
func (s *Service) reveal(ctx context.Context, t Target, category string, data, sealed []byte) ([]byte, error) {
	if sealed == nil || !MayReadSecrets(ctx, t.ScopeName()) {
		return data, nil
	}
	return s.open(t, category, data, sealed)
}

// nodeTarget returns the target of a renamed node's rows under name.
func nodeTarget(name string) Target { return Target{Kind: "node", Node: name} }

// resealRenamed seals a renamed node's sealed rows and history entries again under its new
// name, in the rename's transaction.
//
// It first takes the category key of every category the node has rows in, shared and in
// byte order: a conversion or a binding of one of them holds that key exclusively while it
// seals rows under their targets' names as it read them, so it finishes first — and its
// sealed rows are then found here and sealed again — or starts after the rename committed
// and reads the new name. (Shared, because writers hold it shared while they wait for the
// node's row, which the rename holds.)
func (s *Service) resealRenamed(ctx context.Context, tx *db.Tx, id int64, old, new string) error {
	cats, err := scanStrings(tx.Query(ctx, q.Get("CategoriesOfTarget"), id))
	if err != nil {
		return err
	}
	for _, c := range cats {
		if _, err := tx.Exec(ctx, q.Get("CategoryLockShared"), s.db.Schema(), c); err != nil {
			return err
		}
	}
	type rowv struct {
		id       int64
		category string
		sealed   []byte
	}
	var rowsv []rowv
	rows, err := tx.Query(ctx, q.Get("SealedRowsOfNode"), id)
	if err != nil {
		return err
	}
	for rows.Next() {
		var r rowv
		if err := rows.Scan(&r.id, &r.category, &r.sealed); err != nil {
			rows.Close()
			return err
		}
		rowsv = append(rowsv, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	reseal := func(category string, sealed []byte) ([]byte, error) {
		if sealed == nil {
			return nil, nil
		}
		plain, err := s.open(nodeTarget(old), category, nil, sealed)
		if err != nil {
			return nil, err
		}
		return s.keys.Seal(plain, sealAAD(nodeTarget(new), category))
	}
	for _, r := range rowsv {
		b, err := reseal(r.category, r.sealed)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, q.Get("PillarSealedOnly"), r.id, nullBytes(b)); err != nil {
			return err
		}
	}
	hs, err := scanSealedHistory(tx.Query(ctx, q.Get("HistoryOfNode"), id, nodeTarget(old).String()))
	if err != nil {
		return err
	}
	for _, h := range hs {
		o, err := reseal(h.category, h.old)
		if err != nil {
			return err
		}
		n, err := reseal(h.category, h.new)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, q.Get("HistorySealedOnly"), h.id, nullBytes(o), nullBytes(n)); err != nil {
			return err
		}
	}
	return nil
}

// nullBytes is a sealed value for SQL: bytea, NULL when nil.
func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return db.Bytes(b)
}

// convertProgressEvery is how often a conversion logs its progress (rows and entries).
const convertProgressEvery = 1000

// convertSecret stores every row and history entry of category sealed (toSecret) or in
// plaintext again, under the category's exclusive key (the caller's transaction holds it, so
// no write of the category runs meanwhile). A row's value does not change, so neither its
// revision nor its history does. Making a category plain again reveals its values to every
// reader, so it needs pillars:read-secrets on every target. It returns how many rows and
// entries it re-stored.
func (s *Service) convertSecret(ctx context.Context, tx *db.Tx, category string, toSecret bool, p *auth.Principal) (int, error) {
	if err := s.keys.Require(); err != nil {
		return 0, secret.Fault(err)
	}
	if !toSecret && p != nil && !p.Allows("pillars", "read-secrets", "*") {
		return 0, fault.New(fault.KindForbidden, "making pillar category %s plain reveals its values to every reader: it needs the scope pillars:read-secrets:*", category)
	}
	rows, err := scanHeldRows(tx.Query(ctx, q.Get("CategoryRows"), category))
	if err != nil {
		return 0, err
	}
	n := 0
	progress := func() {
		n++
		if n%convertProgressEvery == 0 {
			slog.InfoContext(ctx, "converting pillar category", "category", category, "secret", toSecret, "done", n)
		}
	}
	for _, r := range rows {
		if (r.sealed != nil) == toSecret {
			continue
		}
		plain, err := s.open(r.target, r.category, r.data, r.sealed)
		if err != nil {
			return n, err
		}
		sv, err := s.store(r.target, category, plain, toSecret)
		if err != nil {
			return n, err
		}
		if _, err := tx.Exec(ctx, q.Get("PillarSeal"), r.id, sv.data, sv.sealedArg()); err != nil {
			return n, err
		}
		progress()
	}
	type entry struct {
		id                 int64
		target             string
		oldData, newData   []byte
		oldSealed, newSeal []byte
	}
	var entries []entry
	hrows, err := tx.Query(ctx, q.Get("HistoryOfCategory"), category)
	if err != nil {
		return n, err
	}
	for hrows.Next() {
		var e entry
		if err := hrows.Scan(&e.id, &e.target, &e.oldData, &e.newData, &e.oldSealed, &e.newSeal); err != nil {
			hrows.Close()
			return n, err
		}
		entries = append(entries, e)
	}
	hrows.Close()
	if err := hrows.Err(); err != nil {
		return n, err
	}
	// History entries name their target as text; the sealed value binds that name.
	conv := func(target string, data, sealed []byte) ([]byte, []byte, error) {
		if data == nil || (sealed != nil) == toSecret {
			return data, sealed, nil
		}
		aad := sealAADName(target, category)
		if toSecret {
			masked, err := maskJSON(data)
			if err != nil {
				return nil, nil, err
			}
			b, err := s.keys.Seal(data, aad)
			return masked, b, err
		}
		plain, err := s.keys.Open(sealed, aad)
		if err != nil {
			return nil, nil, secret.Fault(fmt.Errorf("history of pillar %q of %s: %w", category, target, err))
		}
		return plain, nil, nil
	}
	for _, e := range entries {
		od, os, err := conv(e.target, e.oldData, e.oldSealed)
		if err != nil {
			return n, err
		}
		nd, ns, err := conv(e.target, e.newData, e.newSeal)
		if err != nil {
			return n, err
		}
		if _, err := tx.Exec(ctx, q.Get("HistorySeal"), e.id, nullable(od), nullable(nd), nullBytes(os), nullBytes(ns)); err != nil {
			return n, err
		}
		progress()
	}
	return n, nil
}

// RewrapBatch re-wraps the data keys of up to limit sealed values (rows first, then history
// entries) that are not wrapped by the primary key, with it (secret.Keyring.Rewrap: the
// values' own ciphertext stays). One transaction per batch; rows a concurrent writer or
// another rotation holds are skipped and found by a later batch, and a batch that finds none
// free waits for the rows writers hold. It returns how many values it re-wrapped: 0 means
// none is left under another key (but what another rotation holds), which is what makes a
// rotation resumable — run it again after an interruption and it continues.
func (s *Service) RewrapBatch(ctx context.Context, limit int) (int, error) {
	if err := s.keys.Require(); err != nil {
		return 0, secret.Fault(err)
	}
	primary, err := hex.DecodeString(s.keys.Primary())
	if err != nil {
		return 0, err
	}
	n := 0
	err = s.db.InTx(ctx, func(tx *db.Tx) error {
		n = 0
		// The first pass skips what others hold; if it found nothing, the second waits for
		// the rows writers hold, so that 0 means none is left (a writer's commit can also
		// leave a history entry under the old key, which the second pass's history query
		// sees).
		for _, rowsQuery := range []string{"RewrapRows", "RewrapRowsWait"} {
			if err := s.rewrapPass(ctx, tx, rowsQuery, primary, limit, &n); err != nil {
				return err
			}
			if n > 0 {
				break
			}
		}
		return s.auditRewrap(ctx, tx, n)
	})
	return n, err
}

// rewrapPass re-wraps up to limit-*n values in tx, rows (found by rowsQuery) first, then
// history entries, adding to *n.
func (s *Service) rewrapPass(ctx context.Context, tx *db.Tx, rowsQuery string, primary []byte, limit int, n *int) error {
	{
		rows, err := tx.Query(ctx, q.Get(rowsQuery), db.Bytes(primary), limit-*n)
		if err != nil {
			return err
		}
		type rowv struct {
			id     int64
			t      Target
			cat    string
			sealed []byte
		}
		var rs []rowv
		for rows.Next() {
			var (
				r               rowv
				kind, org, name string
			)
			if err := rows.Scan(&r.id, &kind, &org, &name, &r.cat, &r.sealed); err != nil {
				rows.Close()
				return err
			}
			r.t = targetOf(kind, org, name)
			rs = append(rs, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range rs {
			b, err := s.keys.Rewrap(r.sealed, sealAAD(r.t, r.cat))
			if err != nil {
				return secret.Fault(fmt.Errorf("pillar %q of %s: %w", r.cat, r.t, err))
			}
			if _, err := tx.Exec(ctx, q.Get("PillarSealedOnly"), r.id, db.Bytes(b)); err != nil {
				return err
			}
			*n++
		}
		if *n >= limit {
			return nil
		}
		hrows, err := tx.Query(ctx, q.Get("RewrapHistory"), db.Bytes(primary), limit-*n)
		if err != nil {
			return err
		}
		hs, err := scanSealedHistory(hrows, err)
		if err != nil {
			return err
		}
		for _, h := range hs {
			var out [2][]byte
			for i, v := range [][]byte{h.old, h.new} {
				if v == nil {
					continue
				}
				b, err := s.keys.Rewrap(v, sealAADName(h.target, h.category))
				if err != nil {
					return secret.Fault(fmt.Errorf("history of pillar %q of %s: %w", h.category, h.target, err))
				}
				out[i] = b
			}
			if _, err := tx.Exec(ctx, q.Get("HistorySealedOnly"), h.id, nullBytes(out[0]), nullBytes(out[1])); err != nil {
				return err
			}
			*n++
		}
	}
	return nil
}

// auditRewrap records a rotation batch that re-wrapped n values (none: nothing to record).
func (s *Service) auditRewrap(ctx context.Context, tx *db.Tx, n int) error {
	if n == 0 {
		return nil
	}
	return auth.RecordAudit(ctx, tx, auth.AuditEntry{Actor: auth.AuditActorFrom(ctx).Actor, Action: "keys.rotate", Target: "pillars",
		Detail: map[string]any{"rewrapped": n, "primary": s.keys.Primary()}})
}

// SealedByKey counts the sealed values (rows and history entries) each key wraps, by key id.
func (s *Service) SealedByKey(ctx context.Context) (map[string]int64, error) {
	rows, err := s.db.Query(ctx, q.Get("SealedByKey"))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var (
			id string
			n  int64
		)
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, rows.Err()
}

// targetOf is the Target of a row from its target kind (global, Org, Group, Node), the
// target's org and name.
func targetOf(kind, org, name string) Target {
	switch kind {
	case resource.KindOrg:
		return Target{Kind: "org", Org: name}
	case resource.KindGroup:
		return Target{Kind: "group", Org: org, Group: name}
	case resource.KindNode:
		return Target{Kind: "node", Node: name}
	}
	return Global
}

// maskedLeaf returns the JSON pointer of a leaf of v equal to the mask ("": none). A secret
// category refuses such a value: it is what a reader without read-secrets got back, and
// writing it would replace the secret by its mask (a form saved as it was shown).
//
// The pointer is built only for the leaf found: the walk keeps a stack of tokens, so a long key
// above many leaves is not copied once per leaf (a secret row's PUT walks all of it).
func maskedLeaf(v any, at string) string {
	tokens := make([]string, 0, 16)
	if masked(v, &tokens) {
		return jsondepth.Pointer(at, tokens)
	}
	return ""
}

// masked walks v in key order for a leaf equal to the mask, tokens holding the reference
// tokens down to v; on a hit they lead to it.
func masked(v any, tokens *[]string) bool {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			*tokens = append(*tokens, k)
			if masked(x[k], tokens) {
				return true
			}
			*tokens = (*tokens)[:len(*tokens)-1]
		}
	case []any:
		for i, e := range x {
			*tokens = append(*tokens, strconv.Itoa(i))
			if masked(e, tokens) {
				return true
			}
			*tokens = (*tokens)[:len(*tokens)-1]
		}
	case string:
		return x == secret.Masked
	}
	return false
}

// sealedEntry is a history entry's sealed values, with what they are bound to.
type sealedEntry struct {
	id               int64
	target, category string
	old, new         []byte
}

// scanSealedHistory reads rows of id, target, category, old_sealed, new_sealed.
func scanSealedHistory(rows db.Rows, err error) ([]sealedEntry, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sealedEntry
	for rows.Next() {
		var e sealedEntry
		if err := rows.Scan(&e.id, &e.target, &e.category, &e.old, &e.new); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
