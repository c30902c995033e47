package robustness

import (
	"fmt"
	"math"
	"sort"
)

// Change is one row of strata's changes log (GAP rows left out): the database's own record
// of every committed object change, which the checks use as ground truth the way etcd uses
// its WAL.
type Change struct {
	RV     int64             `json:"rv"`
	Kind   string            `json:"kind"`
	Org    string            `json:"org,omitempty"`
	Name   string            `json:"name"`
	Type   string            `json:"type"`             // ADDED, MODIFIED, DELETED
	Marker string            `json:"marker,omitempty"` // the object's robustness/op annotation after the change
	Labels map[string]string `json:"labels,omitempty"`
	// SpecOrg is the object's spec.org after the change (before it, for a deletion): a
	// node's org, which an org-filtered watch selects on.
	SpecOrg string `json:"specOrg,omitempty"`
}

// ObjectKey is the partition key of an object: kind, org (” for global kinds) and name.
func ObjectKey(kind, org, name string) string { return kind + "/" + org + "/" + name }

// Key is the change's object key.
func (c Change) Key() string { return ObjectKey(c.Kind, c.Org, c.Name) }

// Truth is what the database says happened, read after the run drained (no request of the
// run still in flight, so no late commit can follow).
type Truth struct {
	Changes []Change `json:"changes"`
	// PillarWrites maps the marker of every pillar write that committed to the ETag it left.
	PillarWrites map[string]string `json:"pillarWrites"`
	// Audited holds the client request ids (X-Request-Id) of every audited request: a lock
	// or unlock that committed wrote its audit record in the same transaction.
	Audited map[string]bool `json:"audited"`
	// CompactedThrough is the compaction floor at the end (it only grows): a watch from a
	// version at or above it must never be refused with 410.
	CompactedThrough int64 `json:"compactedThrough"`
}

// Resolve settles unknown outcomes from the database's log before checking (research
// §3.3): a write whose marker is in the log becomes OK at the version the log gives (its
// return time stays Never: it may have taken effect any time after its call); a write absent
// from the drained log never happened and is dropped, and so is a read that got no answer.
// An object write whose request id (X-Request-Id) the audit log does not name never
// committed and is dropped; a delete it names committed: a conditional one at the DELETED
// change that followed the version its precondition named, an unconditional one at a time
// the model places. Without a request id, a delete is found as the DELETED change that
// followed the version its precondition named, when only one delete could have made it.
// What the logs cannot tell (state writes, pg clients) stays Unknown, and the model forks on
// it. Known answers are never changed.
func Resolve(ops []*Op, truth Truth) (out []*Op, resolved, dropped int) {
	byMarker := map[string]Change{}
	prevRV := map[int64]int64{} // DELETED change rv → the key's change before it
	deletedAfter := map[string]int64{}
	last := map[string]int64{}
	changes := append([]Change(nil), truth.Changes...)
	sort.Slice(changes, func(i, j int) bool { return changes[i].RV < changes[j].RV })
	type written struct {
		key, marker string
		prev        int64 // the key's version before, 0 when it did not exist
	}
	writtenAt := map[int64]written{} // rv of an ADDED or MODIFIED change → what it replaced
	exists := map[string]bool{}
	for _, c := range changes {
		k := c.Key()
		if c.Type != "DELETED" {
			w := written{key: k, marker: c.Marker}
			if exists[k] {
				w.prev = last[k]
			}
			writtenAt[c.RV] = w
		}
		exists[k] = c.Type != "DELETED"
		if c.Type == "DELETED" {
			prevRV[c.RV] = last[k]
			deletedAfter[fmt.Sprintf("%s@%d", k, last[k])] = c.RV
		} else if c.Marker != "" {
			byMarker[c.Marker] = c
		}
		last[k] = c.RV
	}
	// A change made by an operation has a version above that of every write acknowledged
	// before the operation was called (versions are database-wide; CheckRVOrder holds strata
	// to it): an older DELETED change that followed the same version — made by someone else
	// before this delete was even sent — is not this delete's.
	var acked []*Op
	for _, op := range ops {
		if op.Outcome == OK && op.RV > 0 && op.Return != Never {
			acked = append(acked, op)
		}
	}
	sort.Slice(acked, func(i, j int) bool { return acked[i].Return < acked[j].Return })
	floorAt := make([]int64, len(acked)) // floorAt[i]: the highest version among acked[:i+1]
	for i, op := range acked {
		floorAt[i] = op.RV
		if i > 0 && floorAt[i-1] > floorAt[i] {
			floorAt[i] = floorAt[i-1]
		}
	}
	floorBefore := func(call int64) int64 {
		n := sort.Search(len(acked), func(i int) bool { return acked[i].Return >= call })
		if n == 0 {
			return 0
		}
		return floorAt[n-1]
	}
	// ceilingAfter(t): the lowest version among writes acknowledged and called after t — a
	// change made by an operation that returned at t is below it.
	var byCall []*Op // writes only: a read called later may still see an older version
	for _, op := range acked {
		if op.IsWrite() {
			byCall = append(byCall, op)
		}
	}
	sort.Slice(byCall, func(i, j int) bool { return byCall[i].Call < byCall[j].Call })
	minFrom := make([]int64, len(byCall)+1) // minFrom[i]: the lowest version among byCall[i:]
	minFrom[len(byCall)] = math.MaxInt64
	for i := len(byCall) - 1; i >= 0; i-- {
		minFrom[i] = min(minFrom[i+1], byCall[i].RV)
	}
	ceilingAfter := func(ret int64) int64 {
		return minFrom[sort.Search(len(byCall), func(i int) bool { return byCall[i].Call > ret })]
	}
	// Deletes that may claim the same DELETED change: resolve only a lone claimant. A
	// conditional delete claims the change after its precondition's version; an
	// unconditional delete that succeeded (its 204 names no version) claims every DELETED
	// change of its key that its real time allows — not one below a version acknowledged
	// before it was called, nor one above a version first called after it returned — since
	// if it made the change, a conditional delete with an unknown outcome did not.
	claimants := map[string]int{}
	deletedOf := map[string][]Change{} // key → its DELETED changes
	for _, c := range changes {
		if c.Type == "DELETED" {
			deletedOf[c.Key()] = append(deletedOf[c.Key()], c)
		}
	}
	for _, op := range ops {
		if op.Family != "object" || op.Kind != "delete" || op.Outcome == Failed {
			continue
		}
		if op.PrecondRV != 0 {
			claimants[fmt.Sprintf("%s@%d", op.Key, op.PrecondRV)]++
			continue
		}
		if op.Outcome != OK {
			continue // an unknown unconditional delete forks; a resolved one may take its place
		}
		for _, c := range deletedOf[op.Key] {
			if c.RV <= floorBefore(op.Call) || c.RV >= ceilingAfter(op.Return) {
				continue
			}
			claimants[fmt.Sprintf("%s@%d", op.Key, prevRV[c.RV])]++
		}
	}
	for _, op := range ops {
		if op.Outcome == Unknown && !op.IsWrite() && op.Family != "cached" {
			// A read that got no answer constrains nothing (every model keeps the state for
			// it), but Porcupine must still place it somewhere after its call: a replica
			// killed under many clients leaves hundreds, and they alone made checks of
			// linearizable histories run out of time (docs/robustness.md).
			dropped++
			continue
		}
		if op.Outcome != Unknown || !op.IsWrite() {
			out = append(out, op)
			continue
		}
		switch {
		case op.Family == "object" && op.RequestID != "" && !truth.Audited[op.RequestID]:
			// Every object write that commits writes its audit record (object.create,
			// object.update, object.delete, with the request's X-Request-Id) in its own
			// transaction, so a write the audit log does not name never took effect, whatever
			// else the log shows: a DELETED change after its precondition is another delete's.
			dropped++
			continue
		case op.Family == "object" && op.Kind == "delete" && op.RequestID != "":
			// Audited: this delete committed. A conditional one deleted the version it named,
			// so its change is the DELETED change right after that version; an unconditional
			// one took effect at some point after its call, which the model places.
			if op.PrecondRV == 0 {
				op.Outcome, op.Resolved = OK, "resolved: audit log"
				resolved++
			} else if rv, ok := deletedAfter[fmt.Sprintf("%s@%d", op.Key, op.PrecondRV)]; ok {
				op.Outcome, op.RV, op.Resolved = OK, rv, fmt.Sprintf("resolved: audit log, changes log DELETED rv %d", rv)
				resolved++
			}
		case op.Family == "object" && op.Kind != "delete":
			if c, ok := byMarker[op.Marker]; ok && c.Key() == op.Key {
				op.Outcome, op.RV, op.Resolved = OK, c.RV, fmt.Sprintf("resolved: changes log rv %d", c.RV)
				resolved++
				out = append(out, op)
			} else {
				dropped++
			}
			continue
		case op.Family == "object" && op.Kind == "delete" && op.PrecondRV != 0:
			at := fmt.Sprintf("%s@%d", op.Key, op.PrecondRV)
			rv, ok := deletedAfter[at]
			if !ok || rv <= floorBefore(op.Call) {
				dropped++
				continue
			}
			if claimants[at] == 1 {
				op.Outcome, op.RV, op.Resolved = OK, rv, fmt.Sprintf("resolved: changes log DELETED rv %d", rv)
				resolved++
			}
		case op.Family == "pillar" && op.Kind == "put":
			if etag, ok := truth.PillarWrites[op.Marker]; ok {
				op.Outcome, op.ETag, op.Resolved = OK, etag, "resolved: pillar_history etag "+etag
				resolved++
				out = append(out, op)
			} else {
				dropped++
			}
			continue
		case op.Family == "lock" && (op.Kind == "lock" || op.Kind == "unlock") && op.RequestID != "":
			if truth.Audited[op.RequestID] {
				op.Outcome, op.Resolved = OK, "resolved: audit log"
				resolved++
				out = append(out, op)
			} else {
				dropped++
			}
			continue
		}
		out = append(out, op)
	}
	// Every object write that succeeded at a version the log holds with its own marker took
	// effect on the key's version before that one: telling the model so pins it there, which
	// is sound (the real order is one such) and spares Porcupine placing the writes whose
	// return time is "never" (resolved ones) anywhere after their call.
	for _, op := range out {
		if op.Family != "object" || op.Outcome != OK || !op.IsWrite() || op.Kind == "delete" || op.RV == 0 || op.Marker == "" {
			continue
		}
		if w, ok := writtenAt[op.RV]; ok && w.key == op.Key && w.marker == op.Marker && w.prev != 0 {
			op.PrevRV = w.prev
		}
	}
	return out, resolved, dropped
}

// replay is the state of every object of a kind, advanced change by change.
type replayObj struct {
	RV     int64
	Marker string
	Labels map[string]string
}

func matches(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}
