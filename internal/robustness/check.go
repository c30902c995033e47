package robustness

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Violation is one broken guarantee: which check, which key, and the operations or events
// that show it.
type Violation struct {
	Check   string
	Key     string
	Message string
	// History is the smallest sub-history found that still shows the violation (for a
	// linearizability failure), one operation per line.
	History []string
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s violation", v.Check)
	if v.Key != "" {
		fmt.Fprintf(&b, " on %s", v.Key)
	}
	fmt.Fprintf(&b, ": %s", v.Message)
	for _, l := range v.History {
		b.WriteString("\n    " + l)
	}
	return b.String()
}

// LinearizabilityResult summarizes a Porcupine check of a history.
type LinearizabilityResult struct {
	Operations int // operations checked (after Resolve)
	Keys       int
	Unresolved int // writes left non-deterministic
	Violations []Violation
}

func toPorcupine(ops []*Op) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		out = append(out, porcupine.Operation{ClientId: op.Client, Input: op, Call: op.Call, Output: op, Return: op.Return})
	}
	return out
}

// CheckLinearizable checks each family's operations with its model, per key, within
// timeout per family (with checkHistory's search; Porcupine's finds the failure point). A key that is not linearizable is a violation carrying the smallest
// sub-history found; a check that runs out of time is a violation too (Porcupine's Unknown
// means it gave up, not that the history is fine).
func CheckLinearizable(ops []*Op, timeout time.Duration) LinearizabilityResult {
	var res LinearizabilityResult
	families := map[string][]*Op{}
	keys := map[string]bool{}
	for _, op := range ops {
		if op.Family == "cached" {
			continue // cached renders are not linearizable reads; CheckCachedRenders checks them
		}
		families[op.Family] = append(families[op.Family], op)
		keys[op.Family+"/"+op.Key] = true
		if op.Outcome == Unknown && op.IsWrite() {
			res.Unresolved++
		}
	}
	res.Operations = len(ops)
	res.Keys = len(keys)
	names := make([]string, 0, len(families))
	for f := range families {
		names = append(names, f)
	}
	sort.Strings(names)
	for _, f := range names {
		model, ok := Models[f]
		if !ok {
			res.Violations = append(res.Violations, Violation{Check: "history", Message: "unknown family " + f})
			continue
		}
		switch checkHistory(model, Filters[f], toPorcupine(families[f]), timeout) {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			res.Violations = append(res.Violations, Violation{Check: "linearizability", Key: f,
				Message: fmt.Sprintf("the check of %d %s operations did not finish within %v (a timeout fails the run)", len(families[f]), f, timeout)})
			continue
		}
		// Illegal: find the keys that fail and shrink each one's history.
		perKey := map[string][]*Op{}
		for _, op := range families[f] {
			perKey[op.Key] = append(perKey[op.Key], op)
		}
		ks := make([]string, 0, len(perKey))
		for k := range perKey {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			result := checkHistory(model, Filters[f], toPorcupine(perKey[k]), timeout)
			if result == porcupine.Ok {
				continue
			}
			if result == porcupine.Unknown {
				// The family failed as a whole but this key's check ran out of time: say so,
				// rather than print a failure point Porcupine did not find.
				res.Violations = append(res.Violations, Violation{Check: "linearizability", Key: f + " " + k,
					Message: fmt.Sprintf("the family's operations are not linearizable, and the check of this key's %d operations did not finish within %v (a timeout fails the run): check its history.jsonl again with a longer timeout", len(perKey[k]), timeout)})
				continue
			}
			// Porcupine's own search finds the failure point (its longest partial
			// linearizations); on a long key it may run out of time where ours did not.
			var lines []string
			if again, info := porcupine.CheckOperationsVerbose(model, toPorcupine(perKey[k]), timeout); again == porcupine.Illegal {
				lines = FailurePoint(perKey[k], info, 12)
			}
			res.Violations = append(res.Violations, Violation{Check: "linearizability", Key: f + " " + k,
				Message: fmt.Sprintf("no order of the key's %d operations fits the %s model; the longest linearizable prefix ends with the first operations below (in the order found); none of the operations after the marker can come next", len(perKey[k]), f),
				History: lines})
		}
	}
	return res
}

// FailurePoint describes where a non-linearizable key history fails, from Porcupine's
// longest partial linearization: its last n operations, then the first n operations (in
// call order) not in it, the candidates none of which can come next. Removing operations to "shrink" a history is unsound here (a dropped
// lock holder turns a correct refusal into an impossible one), so the history is not cut;
// this is the part of it that shows the violation.
func FailurePoint(ops []*Op, info porcupine.LinearizationInfo, n int) []string {
	var longest []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, lin := range part {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
	}
	in := map[*Op]bool{}
	var lines []string
	for i, o := range longest {
		op := o.Input.(*Op)
		in[op] = true
		if i >= len(longest)-n {
			lines = append(lines, op.String())
		}
	}
	lines = append(lines, "--- none of these can come next:")
	count := 0
	for _, op := range ops {
		if in[op] {
			continue
		}
		lines = append(lines, op.String())
		if count++; count == n {
			break
		}
	}
	return lines
}

// CheckRVOrder checks the rules across keys that no per-key model sees: the versions of
// successful object writes are unique, and a write that returned before another was called
// has the lower version (strata's versions are database-wide and drawn in the writing
// transaction).
func CheckRVOrder(ops []*Op) []Violation {
	var writes []*Op
	for _, op := range ops {
		if op.Family == "object" && op.IsWrite() && op.Outcome == OK && op.RV > 0 {
			writes = append(writes, op)
		}
	}
	var out []Violation
	seen := map[int64]*Op{}
	for _, w := range writes {
		if o, dup := seen[w.RV]; dup {
			out = append(out, Violation{Check: "rv-unique", Key: w.Key, Message: fmt.Sprintf("resourceVersion %d given to two writes", w.RV),
				History: []string{o.String(), w.String()}})
		}
		seen[w.RV] = w
	}
	byReturn := append([]*Op(nil), writes...)
	sort.Slice(byReturn, func(i, j int) bool { return byReturn[i].Return < byReturn[j].Return })
	byCall := append([]*Op(nil), writes...)
	sort.Slice(byCall, func(i, j int) bool { return byCall[i].Call < byCall[j].Call })
	var maxBefore *Op
	j := 0
	for _, b := range byCall {
		for j < len(byReturn) && byReturn[j].Return < b.Call {
			if maxBefore == nil || byReturn[j].RV > maxBefore.RV {
				maxBefore = byReturn[j]
			}
			j++
		}
		if maxBefore != nil && maxBefore.RV >= b.RV {
			out = append(out, Violation{Check: "rv-order", Key: b.Key,
				Message: fmt.Sprintf("a write called after another returned got a lower resourceVersion (%d ≤ %d)", b.RV, maxBefore.RV),
				History: []string{maxBefore.String(), b.String()}})
		}
	}
	return out
}
