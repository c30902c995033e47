package robustness

import (
	"fmt"
	"hash/fnv"

	"github.com/anishathalye/porcupine"
)

// partitionByKey splits a family's history per key: every key is an independent register,
// so each is checked alone (a real partition: one operation is in exactly one key).
func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	idx := map[string]int{}
	var out [][]porcupine.Operation
	for _, o := range history {
		k := o.Input.(*Op).Key
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], o)
	}
	return out
}

func hashString(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

func describeOp(input, _ interface{}) string { return input.(*Op).String() }

// unknownRV stands for a resourceVersion (or ETag) the history does not tell: the state
// of a write whose outcome stayed unknown. The next read that sees the key pins it.
const unknownRV = -1

// objState is an object register. Floor is the highest resourceVersion the key is known to
// have had (its deletion's included): every later successful write must be above it.
type objState struct {
	Exists bool
	RV     int64
	Marker string
	Floor  int64
}

func rvMatches(state, want int64) bool { return state == unknownRV || state == want }

// objectApply is the state after op takes effect, and whether it could (its preconditions
// hold); ok is the answer the server gave (for a successful op, its resourceVersion must be
// above the key's floor).
func objectApply(s objState, op *Op) (objState, bool) {
	switch op.Kind {
	case "create":
		if s.Exists {
			return s, false
		}
	case "put":
		if op.PrecondRV != 0 && (!s.Exists || !rvMatches(s.RV, op.PrecondRV)) {
			return s, false
		}
	case "patch":
		if !s.Exists || (op.PrecondRV != 0 && !rvMatches(s.RV, op.PrecondRV)) {
			return s, false
		}
	case "delete":
		if !s.Exists || (op.PrecondRV != 0 && !rvMatches(s.RV, op.PrecondRV)) {
			return s, false
		}
		n := objState{Floor: s.Floor}
		if op.RV > n.Floor {
			n.Floor = op.RV
		}
		return n, true
	default:
		panic("object op " + op.Kind)
	}
	n := objState{Exists: true, RV: unknownRV, Marker: op.Marker, Floor: s.Floor}
	if op.Outcome == OK {
		n.RV = op.RV
		n.Floor = op.RV
	}
	return n, true
}

// objectRefusalFits says whether a refusal with op's status is what the state calls for.
func objectRefusalFits(s objState, op *Op) bool {
	switch op.Status {
	case 404:
		return !s.Exists && op.Kind != "create" && (op.Kind != "put" || op.PrecondRV != 0)
	case 409:
		if op.Kind == "create" {
			return s.Exists
		}
		return s.Exists && op.PrecondRV != 0 && (s.RV == unknownRV || s.RV != op.PrecondRV)
	}
	// Other refusals (422, a 503 that wrote nothing) promise only that nothing happened.
	return true
}

func objectStep(state, input, _ interface{}) []interface{} {
	s := state.(objState)
	op := input.(*Op)
	if op.Kind == "get" {
		if op.Outcome != OK {
			if op.Status == 404 {
				if s.Exists {
					return nil
				}
				return []interface{}{s}
			}
			return []interface{}{s} // a failed read says nothing
		}
		if !s.Exists || s.Marker != op.ReadMarker || !rvMatches(s.RV, op.RV) {
			return nil
		}
		if s.RV == unknownRV {
			if op.RV <= s.Floor {
				return nil
			}
			s.RV, s.Floor = op.RV, op.RV
		}
		return []interface{}{s}
	}
	switch op.Outcome {
	case OK:
		if op.RV != 0 && op.RV <= s.Floor {
			return nil // a new version must be above every earlier one of the key
		}
		if op.PrevRV != 0 && s.RV != unknownRV && (!s.Exists || s.RV != op.PrevRV) {
			return nil // the ground truth says which version this write replaced
		}
		n, ok := objectApply(s, op)
		if !ok {
			return nil
		}
		return []interface{}{n}
	case Failed:
		if !objectRefusalFits(s, op) {
			return nil
		}
		return []interface{}{s}
	}
	if n, ok := objectApply(s, op); ok {
		return []interface{}{s, n}
	}
	return []interface{}{s}
}

// ObjectModel is the object register: compare-and-set by resourceVersion.
var ObjectModel = (&porcupine.NondeterministicModel{
	Partition: partitionByKey,
	Init:      func() []interface{} { return []interface{}{objState{}} },
	Step:      objectStep,
	Hash: func(state interface{}) uint64 {
		s := state.(objState)
		return hashString(fmt.Sprintf("%v|%d|%s|%d", s.Exists, s.RV, s.Marker, s.Floor))
	},
	DescribeOperation: describeOp,
	DescribeState: func(state interface{}) string {
		s := state.(objState)
		if !s.Exists {
			return fmt.Sprintf("absent (floor %d)", s.Floor)
		}
		return fmt.Sprintf("rv=%d marker=%s", s.RV, s.Marker)
	},
}).ToModel()

// pillarState is a pillar row register: its ETag ("" unknown after an unresolved write) and
// the marker of the write that set it.
type pillarState struct {
	Exists bool
	ETag   string
	Marker string
}

func pillarStep(state, input, _ interface{}) []interface{} {
	s := state.(pillarState)
	op := input.(*Op)
	etagFits := func(want string) bool { return s.Exists && (s.ETag == "" || s.ETag == want) }
	switch op.Kind {
	case "get", "render":
		if op.Outcome != OK {
			if op.Status == 404 && op.Kind == "get" && s.Exists {
				return nil
			}
			return []interface{}{s}
		}
		if op.Exists != s.Exists || (s.Exists && s.Marker != op.ReadMarker) {
			return nil
		}
		if op.Kind == "get" && s.Exists {
			if !etagFits(op.ETag) {
				return nil
			}
			s.ETag = op.ETag
		}
		return []interface{}{s}
	case "put":
		precondHolds := op.IfMatch == "" || etagFits(op.IfMatch)
		applied := pillarState{Exists: true, ETag: op.ETag, Marker: op.Marker}
		switch op.Outcome {
		case OK:
			if !precondHolds || op.ETag == s.ETag && s.ETag != "" {
				return nil
			}
			return []interface{}{applied}
		case Failed:
			if op.Status == 412 && (op.IfMatch == "" || etagFits(op.IfMatch) && s.ETag != "") {
				return nil
			}
			return []interface{}{s}
		}
		if precondHolds {
			applied.ETag = ""
			return []interface{}{s, applied}
		}
		return []interface{}{s}
	}
	panic("pillar op " + op.Kind)
}

// PillarModel is a pillar row: compare-and-set by ETag, strict renders as reads.
var PillarModel = (&porcupine.NondeterministicModel{
	Partition: partitionByKey,
	Init:      func() []interface{} { return []interface{}{pillarState{}} },
	Step:      pillarStep,
	Hash: func(state interface{}) uint64 {
		s := state.(pillarState)
		return hashString(fmt.Sprintf("%v|%s|%s", s.Exists, s.ETag, s.Marker))
	},
	DescribeOperation: describeOp,
	DescribeState: func(state interface{}) string {
		s := state.(pillarState)
		if !s.Exists {
			return "absent"
		}
		return fmt.Sprintf("etag=%s marker=%s", s.ETag, s.Marker)
	},
}).ToModel()

// lockState is a workspace lock: the HTTP lock's id ("" none), the pg client session
// holding the workspace's advisory key ("" none), whether the HTTP lock is unprotected (its
// keeper's session broke while it was held: a pg client may then take the key beside it,
// docs/terraform.md "Gaps are recorded"), and the serial of the last state written.
type lockState struct {
	HTTP   string
	PG     string
	Gap    bool
	Serial int64
}

// keeperHolder is the LockInfo ID of the 423 a LOCK answers when the workspace's key stays
// held by another strata replica's keeper after its lock row is gone (tfstate.Lock).
const keeperHolder = "strata-replica"

func lockStep(state, input, _ interface{}) []interface{} {
	s := state.(lockState)
	op := input.(*Op)
	one := func(n lockState) []interface{} { return []interface{}{n} }
	switch op.Kind {
	case "gap":
		// A fault that breaks keeper sessions: a lock held now loses its key for a while.
		if s.HTTP != "" {
			s.Gap = true
		}
		return one(s)
	case "pglock":
		if op.Outcome == OK && !op.Granted {
			// A refusal is always possible: a strata keeper takes the key before an HTTP
			// lock's row commits and lets it go only after the row is deleted, so around
			// every LOCK and UNLOCK the key is briefly held while no HTTP lock is.
			// Exclusion is about grants.
			return one(s)
		}
		can := s.PG == "" && (s.HTTP == "" || s.Gap)
		applied := s
		applied.PG = op.LockID
		switch {
		case op.Outcome == OK && can:
			return one(applied)
		case op.Outcome == OK:
			return nil
		case can:
			return []interface{}{s, applied}
		}
		return one(s)
	case "pgunlock", "pglost":
		can := s.PG == op.LockID
		applied := s
		applied.PG = ""
		if op.Outcome == OK {
			if op.Granted != can {
				return nil
			}
			return one(applied)
		}
		if can {
			return []interface{}{s, applied}
		}
		return one(s)
	}
	var can bool
	applied := s
	switch op.Kind {
	case "lock":
		can = s.PG == "" && (s.HTTP == "" || s.HTTP == op.LockID)
		if s.HTTP != op.LockID {
			applied.HTTP, applied.Gap = op.LockID, false
		}
	case "unlock":
		if s.HTTP == "" && s.PG != "" {
			// No HTTP lock to release: a retry (200) or the pg holder named (423); the pg
			// client keeps its key either way.
			if op.Outcome == Failed && op.Status == 409 {
				return nil
			}
			return one(s)
		}
		can = s.HTTP == "" || s.HTTP == op.LockID
		applied.HTTP, applied.Gap = "", false
	case "write":
		can = s.HTTP == op.LockID && s.PG == "" && op.Serial > s.Serial
		applied.Serial = op.Serial
	default:
		panic("lock op " + op.Kind)
	}
	switch op.Outcome {
	case OK:
		if !can {
			return nil
		}
		return one(applied)
	case Failed:
		if op.Kind == "lock" && op.Status == 423 && op.Holder == keeperHolder {
			// Another replica's keeper held the key with no lock row: around every LOCK
			// and UNLOCK it briefly does, and for as long as its replica is paused. Like
			// a pg client's refusal, always possible; exclusion is about grants.
			return one(s)
		}
		if op.Status == 409 || op.Status == 423 {
			if can {
				return nil // refused although the lock allowed it
			}
			if op.Status == 423 && s.PG == "" && (s.HTTP == "" || s.HTTP == op.LockID) {
				return nil // a 423 names another holder; there was none
			}
		}
		return one(s)
	}
	if can {
		return []interface{}{s, applied}
	}
	return one(s)
}

// LockModel is a Terraform workspace lock shared by HTTP and pg-backend clients.
var LockModel = (&porcupine.NondeterministicModel{
	Partition: partitionByKey,
	Init:      func() []interface{} { return []interface{}{lockState{}} },
	Step:      lockStep,
	Hash: func(state interface{}) uint64 {
		s := state.(lockState)
		return hashString(fmt.Sprintf("%s|%s|%v|%d", s.HTTP, s.PG, s.Gap, s.Serial))
	},
	DescribeOperation: describeOp,
	DescribeState: func(state interface{}) string {
		s := state.(lockState)
		return fmt.Sprintf("http=%q pg=%q gap=%v serial=%d", s.HTTP, s.PG, s.Gap, s.Serial)
	},
}).ToModel()

// Models maps each family to its model.
var Models = map[string]porcupine.Model{
	"object": ObjectModel,
	"pillar": PillarModel,
	"lock":   LockModel,
	"member": MemberModel,
}

// Filters says, for each family, which operations never change its model's state: at
// every state their step gives that state back or nothing. The search linearizes them as
// soon as they fit (linearize.go), so keep each one exact — an operation listed here that
// changes some state makes the check unsound.
var Filters = map[string]func(input interface{}) bool{
	// objectStep: a refusal keeps the state or fits nowhere, and so does a read without
	// an answer. A read that succeeded may learn a version an unresolved write left unknown.
	"object": func(input interface{}) bool {
		op := input.(*Op)
		return op.Outcome == Failed || op.Kind == "get" && op.Outcome != OK
	},
	// pillarStep: a refused write, a render, a read without an answer. A read that
	// succeeded may learn an ETag.
	"pillar": func(input interface{}) bool {
		op := input.(*Op)
		return op.Kind == "put" && op.Outcome == Failed || op.Kind == "render" || op.Kind == "get" && op.Outcome != OK
	},
	// lockStep: a refused LOCK, UNLOCK or state write, and a pg client's lock that was not
	// granted.
	"lock": func(input interface{}) bool {
		op := input.(*Op)
		switch op.Kind {
		case "lock", "unlock", "write":
			return op.Outcome == Failed
		case "pglock":
			return op.Outcome == OK && !op.Granted
		}
		return false
	},
	// memberStep: every read, and a refused write.
	"member": func(input interface{}) bool {
		op := input.(*Op)
		return op.Kind == "get" || op.Outcome == Failed
	},
}
