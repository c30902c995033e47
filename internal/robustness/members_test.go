package robustness

import (
	"testing"

	"github.com/stretchr/testify/require"
)

const memberKey = "org/g/n1"

func TestMemberRegisterLegal(t *testing.T) {
	t.Parallel()
	var x h
	x.add(Op{Client: 0, Family: "member", Key: memberKey, Kind: "get", Call: 0, Return: 5, Outcome: OK, Status: 200})
	x.add(Op{Client: 0, Family: "member", Key: memberKey, Kind: "add", Call: 10, Return: 20, Outcome: OK, Status: 201})
	// Two concurrent adds of a member: the later one finds it there.
	x.add(Op{Client: 1, Family: "member", Key: memberKey, Kind: "add", Call: 15, Return: 25, Outcome: OK, Status: 204})
	x.add(Op{Client: 2, Family: "member", Key: memberKey, Kind: "get", Call: 30, Return: 35, Outcome: OK, Status: 200, Exists: true})
	x.add(Op{Client: 0, Family: "member", Key: memberKey, Kind: "remove", Call: 40, Return: 50, Outcome: OK, Status: 204})
	// Removing a node that is not a member is a 204 too.
	x.add(Op{Client: 1, Family: "member", Key: memberKey, Kind: "remove", Call: 55, Return: 60, Outcome: OK, Status: 204})
	x.add(Op{Client: 2, Family: "member", Key: memberKey, Kind: "get", Call: 61, Return: 65, Outcome: OK, Status: 200})
	// An add whose outcome stayed unknown may take effect at any later moment, or never.
	x.add(Op{Client: 3, Family: "member", Key: memberKey, Kind: "add", Call: 70, Outcome: Unknown})
	x.add(Op{Client: 2, Family: "member", Key: memberKey, Kind: "get", Call: 80, Return: 85, Outcome: OK, Status: 200})
	x.add(Op{Client: 2, Family: "member", Key: memberKey, Kind: "get", Call: 90, Return: 95, Outcome: OK, Status: 200, Exists: true})
	// A 503 that wrote nothing, and a failed read, say nothing about the state.
	x.add(Op{Client: 0, Family: "member", Key: memberKey, Kind: "remove", Call: 100, Return: 105, Outcome: Failed, Status: 503})
	x.add(Op{Client: 1, Family: "member", Key: memberKey, Kind: "get", Call: 100, Return: 105, Outcome: Failed, Status: 503})
	x.add(Op{Client: 2, Family: "member", Key: memberKey, Kind: "get", Call: 110, Return: 115, Outcome: OK, Status: 200, Exists: true})
	res := linearizable(t, x.ops)
	require.Empty(t, res.Violations)
	require.Equal(t, 1, res.Unresolved)
}

func TestMemberRegisterViolations(t *testing.T) {
	t.Parallel()
	cases := map[string][]Op{
		// An acknowledged add that a read begun after it does not see.
		"lost add": {
			{Client: 0, Family: "member", Key: memberKey, Kind: "add", Call: 0, Return: 10, Outcome: OK, Status: 201},
			{Client: 1, Family: "member", Key: memberKey, Kind: "get", Call: 20, Return: 30, Outcome: OK, Status: 200},
		},
		// An acknowledged remove that a later read contradicts.
		"lost remove": {
			{Client: 0, Family: "member", Key: memberKey, Kind: "add", Call: 0, Return: 10, Outcome: OK, Status: 201},
			{Client: 0, Family: "member", Key: memberKey, Kind: "remove", Call: 20, Return: 30, Outcome: OK, Status: 204},
			{Client: 1, Family: "member", Key: memberKey, Kind: "get", Call: 40, Return: 50, Outcome: OK, Status: 200, Exists: true},
		},
		// Two adds one after the other both say they added the node.
		"201 twice": {
			{Client: 0, Family: "member", Key: memberKey, Kind: "add", Call: 0, Return: 10, Outcome: OK, Status: 201},
			{Client: 1, Family: "member", Key: memberKey, Kind: "add", Call: 20, Return: 30, Outcome: OK, Status: 201},
		},
		// 204 ("it already was") for a node that was not a member.
		"204 for a new member": {
			{Client: 0, Family: "member", Key: memberKey, Kind: "add", Call: 0, Return: 10, Outcome: OK, Status: 204},
		},
		// The group and the node exist: a 404 is never the answer.
		"404 on an add": {
			{Client: 0, Family: "member", Key: memberKey, Kind: "add", Call: 0, Return: 10, Outcome: Failed, Status: 404},
		},
		// A 503 promises nothing was written: a read after it must not see the member.
		"503 that wrote": {
			{Client: 0, Family: "member", Key: memberKey, Kind: "add", Call: 0, Return: 10, Outcome: Failed, Status: 503},
			{Client: 1, Family: "member", Key: memberKey, Kind: "get", Call: 20, Return: 30, Outcome: OK, Status: 200, Exists: true},
		},
	}
	for name, ops := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var x h
			for _, op := range ops {
				x.add(op)
			}
			requireViolation(t, linearizable(t, x.ops).Violations, "linearizability")
		})
	}
}
