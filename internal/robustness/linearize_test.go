package robustness

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

// simulateObject returns a history of n operations on one object by c clients, answered by a
// correct register: each operation takes effect at a random instant inside its interval,
// in that order. Some writes get no answer (their outcome stays unknown, as a cut
// connection leaves it). With corrupt, one answer is then changed, which usually, not
// always, makes the history impossible.
func simulateObject(rng *rand.Rand, n, c int, corrupt bool) []*Op {
	type timed struct {
		op *Op
		at int64
	}
	var ops []timed
	free := make([]int64, c) // when each client may call again
	for i := 0; i < n; i++ {
		cl := rng.Intn(c)
		call := free[cl] + int64(rng.Intn(20))
		ret := call + 1 + int64(rng.Intn(60))
		if rng.Intn(8) == 0 {
			ret += 300 // one that waited behind a lock
		}
		free[cl] = ret + 1
		op := &Op{ID: i + 1, Client: cl, Family: "object", Key: objKey, Call: call, Return: ret,
			Kind: []string{"create", "put", "put", "patch", "delete", "get", "get", "get"}[rng.Intn(8)]}
		ops = append(ops, timed{op, call + rng.Int63n(ret-call+1)})
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].at < ops[j].at })
	var exists bool
	var rv, version int64
	var marker string
	for i, t := range ops {
		op := t.op
		if op.Kind != "get" {
			op.Marker = fmt.Sprintf("m%d", i)
		}
		if (op.Kind == "put" || op.Kind == "patch" || op.Kind == "delete") && rng.Intn(2) == 0 {
			op.PrecondRV = rv
			if rng.Intn(3) == 0 {
				op.PrecondRV = rv + 1 // stale or never seen
			}
		}
		ok := true
		switch op.Kind {
		case "create":
			ok, op.Status = !exists, 409
		case "put":
			if op.PrecondRV != 0 && !exists {
				ok, op.Status = false, 404
			} else if op.PrecondRV != 0 && op.PrecondRV != rv {
				ok, op.Status = false, 409
			}
		case "patch", "delete":
			if !exists {
				ok, op.Status = false, 404
			} else if op.PrecondRV != 0 && op.PrecondRV != rv {
				ok, op.Status = false, 409
			}
		case "get":
			if !exists {
				ok, op.Status = false, 404
			}
		}
		if !ok {
			op.Outcome = Failed
			continue
		}
		op.Outcome, op.Status = OK, 200
		switch op.Kind {
		case "get":
			op.Exists, op.RV, op.ReadMarker = true, rv, marker
			continue
		case "delete":
			exists, op.Status = false, 204
		default:
			if !exists {
				op.Status = 201
			}
			version += 1 + int64(rng.Intn(3))
			exists, rv, marker, op.RV = true, version, op.Marker, version
		}
		if rng.Intn(6) == 0 { // no answer: it took effect, the client does not know
			op.Outcome, op.Status, op.RV, op.Return = Unknown, 0, 0, Never
		}
	}
	out := make([]*Op, len(ops))
	for i, t := range ops {
		out[i] = t.op
	}
	if corrupt {
		op := out[rng.Intn(len(out))]
		switch {
		case op.Kind == "get" && op.Outcome == OK:
			op.RV++
		case op.Outcome == Failed && op.Status == 404:
			op.Status = 409
		case op.Outcome == Failed:
			op.Outcome, op.Status, op.RV = OK, 200, int64(op.ID)*1000
		case op.Outcome == OK:
			op.Outcome, op.Status = Failed, 409
		}
	}
	return out
}

// TestSearchAgreesWithPorcupine checks the search of linearize.go against Porcupine's on
// thousands of small object histories, legal and corrupted: the eager placement of
// filters must never change an answer.
func TestSearchAgreesWithPorcupine(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(31))
	counts := map[porcupine.CheckResult]int{}
	for i := 0; i < 3000; i++ {
		ops := simulateObject(rng, 6+rng.Intn(14), 2+rng.Intn(5), i%2 == 1)
		want := porcupine.CheckOperations(ObjectModel, toPorcupine(ops))
		got := checkHistory(ObjectModel, Filters["object"], toPorcupine(ops), timeout)
		if got == porcupine.Ok != want {
			for _, op := range ops {
				t.Log(op.String())
			}
			require.Failf(t, "the searches disagree", "history %d: Porcupine linearizable=%v, ours %v", i, want, got)
		}
		counts[got]++
	}
	// Both kinds of history occur, or the comparison says little.
	require.Greater(t, counts[porcupine.Ok], 500, "legal histories")
	require.Greater(t, counts[porcupine.Illegal], 300, "impossible histories")
}

// pausedDelete is the shape of the history a paused replica leaves on one key (issue 31's
// 003-pause-replica-2): a delete that waited behind a paused transaction's row lock and
// committed only late, reads of the old object meanwhile, and k writes on other replicas
// that waited behind the same lock and were refused with 404 once the delete committed.
// It is linearizable: the delete goes after the last read, the refusals after the delete.
func pausedDelete(k int) []*Op {
	var x h
	x.add(Op{Client: 0, Family: "object", Key: objKey, Kind: "create", Marker: "m0", Call: 0, Return: 10, Outcome: OK, Status: 201, RV: 10})
	x.add(Op{Client: 1, Family: "object", Key: objKey, Kind: "delete", Call: 20, Return: 10_000, Outcome: OK, Status: 204})
	for i := 0; i < k; i++ {
		x.add(Op{Client: 2 + i, Family: "object", Key: objKey, Kind: "patch", Marker: fmt.Sprintf("r%d", i), Call: 21 + int64(i), Return: 9_000 + int64(i), Outcome: Failed, Status: 404})
	}
	reader := 2 + k
	for at := int64(100); at < 8_000; at += 100 {
		x.add(Op{Client: reader, Family: "object", Key: objKey, Kind: "get", Call: at, Return: at + 10, Outcome: OK, Status: 200, Exists: true, RV: 10, ReadMarker: "m0"})
	}
	x.add(Op{Client: reader, Family: "object", Key: objKey, Kind: "put", Marker: "m1", Call: 10_100, Return: 10_200, Outcome: OK, Status: 201, RV: 30})
	x.add(Op{Client: reader, Family: "object", Key: objKey, Kind: "get", Call: 10_300, Return: 10_400, Outcome: OK, Status: 200, Exists: true, RV: 30, ReadMarker: "m1"})
	return x.ops
}

func TestSearchPlacesRefusalsEagerly(t *testing.T) {
	t.Parallel()
	ops := pausedDelete(40)
	require.Equal(t, porcupine.Ok, checkHistory(ObjectModel, Filters["object"], toPorcupine(ops), time.Minute))
	r := CheckLinearizable(ops, time.Minute)
	require.Empty(t, r.Violations)

	// The control: without the rule the same search tries every subset of the 40
	// refusals behind each misplaced delete (2^40), and runs out of time. The shape is
	// the blow-up, and the rule is what answers it.
	require.Equal(t, porcupine.Unknown, checkHistory(ObjectModel, nil, toPorcupine(ops), time.Second))

	// And the rule still finds the violation when there is one: a read of the old
	// object after the refusals returned.
	bad := pausedDelete(40)
	var x h
	x.ops = bad
	x.add(Op{Client: 99, Family: "object", Key: objKey, Kind: "get", Call: 9_500, Return: 9_600, Outcome: OK, Status: 200, Exists: true, RV: 10, ReadMarker: "m0"})
	require.Equal(t, porcupine.Illegal, checkHistory(ObjectModel, Filters["object"], toPorcupine(x.ops), time.Minute))
}
