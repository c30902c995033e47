package robustness

import (
	"github.com/anishathalye/porcupine"
)

// memberStep is the static membership register of one (group, node) pair, keyed
// org/group/node (docs/api.md, "Group membership"): PUT adds the node (201 when it was not a
// member, 204 when it already was), DELETE removes it (204 either way), and a read of the
// group's member list reports it as a static member or not. The group and the node exist for
// the whole history and are in the same org, so a 404 or a 422 for either write is a
// refusal the state never calls for.
func memberStep(state, input, _ interface{}) []interface{} {
	member := state.(bool)
	op := input.(*Op)
	one := func(b bool) []interface{} { return []interface{}{b} }
	switch op.Kind {
	case "get":
		if op.Outcome != OK {
			return one(member) // a failed read says nothing
		}
		if op.Exists != member {
			return nil
		}
		return one(member)
	case "add", "remove":
	default:
		panic("member op " + op.Kind)
	}
	applied := op.Kind == "add"
	switch op.Outcome {
	case OK:
		if op.Kind == "add" {
			// 201 only when the node was not a member, 204 only when it was.
			if (op.Status == 201) == member {
				return nil
			}
		}
		return one(applied)
	case Failed:
		if op.Status == 404 || op.Status == 422 {
			return nil
		}
		return one(member)
	}
	return []interface{}{member, applied}
}

// MemberModel is a static group membership: a register of one bit per (group, node).
var MemberModel = (&porcupine.NondeterministicModel{
	Partition: partitionByKey,
	Init:      func() []interface{} { return []interface{}{false} },
	Step:      memberStep,
	Hash: func(state interface{}) uint64 {
		if state.(bool) {
			return 1
		}
		return 0
	},
	DescribeOperation: describeOp,
	DescribeState: func(state interface{}) string {
		if state.(bool) {
			return "member"
		}
		return "not a member"
	},
}).ToModel()
