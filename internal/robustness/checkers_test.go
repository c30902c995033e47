package robustness

import (
	"errors"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The checkers are tested on synthetic histories: each legal one must pass, and each one
// that breaks a guarantee must fail with the check that names it. These run in the default
// go test ./..., without a database.

const timeout = 5 * time.Second

type h struct{ ops []*Op }

func (x *h) add(op Op) *Op {
	o := op
	o.ID = len(x.ops) + 1
	if o.Outcome == Unknown {
		o.Return = Never
	}
	x.ops = append(x.ops, &o)
	return &o
}

func linearizable(t *testing.T, ops []*Op) LinearizabilityResult {
	t.Helper()
	return CheckLinearizable(ops, timeout)
}

func requireViolation(t *testing.T, vs []Violation, check string) {
	t.Helper()
	for _, v := range vs {
		if v.Check == check {
			return
		}
	}
	require.Failf(t, "missing violation", "want a %s violation, got %v", check, vs)
}

const objKey = "Org//r-1"

func TestObjectRegisterLegal(t *testing.T) {
	t.Parallel()
	var x h
	x.add(Op{Client: 0, Family: "object", Key: objKey, Kind: "create", Marker: "m1", Call: 0, Return: 10, Outcome: OK, Status: 201, RV: 5})
	x.add(Op{Client: 1, Family: "object", Key: objKey, Kind: "put", Marker: "m2", PrecondRV: 5, Call: 20, Return: 30, Outcome: OK, Status: 200, RV: 7})
	x.add(Op{Client: 2, Family: "object", Key: objKey, Kind: "put", Marker: "m3", PrecondRV: 5, Call: 21, Return: 31, Outcome: Failed, Status: 409})
	x.add(Op{Client: 3, Family: "object", Key: objKey, Kind: "get", Call: 25, Return: 35, Outcome: OK, Status: 200, Exists: true, RV: 7, ReadMarker: "m2"})
	x.add(Op{Client: 0, Family: "object", Key: objKey, Kind: "patch", Marker: "m4", Call: 40, Return: 50, Outcome: OK, Status: 200, RV: 9})
	x.add(Op{Client: 1, Family: "object", Key: objKey, Kind: "delete", PrecondRV: 9, Call: 60, Return: 70, Outcome: OK, Status: 204})
	x.add(Op{Client: 2, Family: "object", Key: objKey, Kind: "get", Call: 80, Return: 90, Outcome: Failed, Status: 404})
	x.add(Op{Client: 3, Family: "object", Key: objKey, Kind: "delete", Call: 81, Return: 91, Outcome: Failed, Status: 404})
	x.add(Op{Client: 0, Family: "object", Key: objKey, Kind: "create", Marker: "m5", Call: 100, Return: Never, Outcome: Unknown})
	x.add(Op{Client: 4, Family: "object", Key: objKey, Kind: "get", Call: 120, Return: 130, Outcome: OK, Status: 200, Exists: true, RV: 12, ReadMarker: "m5"})
	r := linearizable(t, x.ops)
	require.Empty(t, r.Violations)
	require.Equal(t, 1, r.Unresolved)
	require.Empty(t, CheckRVOrder(x.ops))
}

func TestObjectRegisterIgnoredPreconditionFails(t *testing.T) {
	t.Parallel()
	var x h
	x.add(Op{Client: 0, Family: "object", Key: objKey, Kind: "create", Marker: "m1", Call: 0, Return: 10, Outcome: OK, Status: 201, RV: 5})
	// Both writers sent resourceVersion 5; both succeeded: the second ignored its precondition.
	x.add(Op{Client: 1, Family: "object", Key: objKey, Kind: "put", Marker: "m2", PrecondRV: 5, Call: 20, Return: 30, Outcome: OK, Status: 200, RV: 7})
	x.add(Op{Client: 2, Family: "object", Key: objKey, Kind: "put", Marker: "m3", PrecondRV: 5, Call: 21, Return: 31, Outcome: OK, Status: 200, RV: 8})
	for i := 0; i < 20; i++ { // noise the shrink must remove
		x.add(Op{Client: 3, Family: "object", Key: objKey, Kind: "get", Call: int64(-100 + 2*i), Return: int64(-99 + 2*i), Outcome: Failed, Status: 404})
	}
	r := linearizable(t, x.ops)
	require.Len(t, r.Violations, 1)
	v := r.Violations[0]
	require.Equal(t, "linearizability", v.Check)
	require.Contains(t, v.Key, objKey)
	next := v.String()[strings.Index(v.String(), "--- none of these can come next:"):]
	require.Regexp(t, `^--- none of these can come next:\n    #(2 c1|3 c2) .* put `, next, "the failure point names a write that cannot be placed: %v", v)
}

func TestObjectRegisterStaleReadFails(t *testing.T) {
	t.Parallel()
	var x h
	x.add(Op{Client: 0, Family: "object", Key: objKey, Kind: "create", Marker: "m1", Call: 0, Return: 10, Outcome: OK, Status: 201, RV: 5})
	x.add(Op{Client: 0, Family: "object", Key: objKey, Kind: "put", Marker: "m2", Call: 20, Return: 30, Outcome: OK, Status: 200, RV: 7})
	x.add(Op{Client: 1, Family: "object", Key: objKey, Kind: "get", Call: 40, Return: 50, Outcome: OK, Status: 200, Exists: true, RV: 5, ReadMarker: "m1"})
	requireViolation(t, linearizable(t, x.ops).Violations, "linearizability")
}

func TestObjectRegisterVersionMustGrow(t *testing.T) {
	t.Parallel()
	var x h
	x.add(Op{Client: 0, Family: "object", Key: objKey, Kind: "create", Marker: "m1", Call: 0, Return: 10, Outcome: OK, Status: 201, RV: 5})
	x.add(Op{Client: 0, Family: "object", Key: objKey, Kind: "put", Marker: "m2", Call: 20, Return: 30, Outcome: OK, Status: 200, RV: 4})
	requireViolation(t, linearizable(t, x.ops).Violations, "linearizability")
}

func TestObjectRegisterRefusalMustFit(t *testing.T) {
	t.Parallel()
	var x h
	x.add(Op{Client: 0, Family: "object", Key: objKey, Kind: "create", Marker: "m1", Call: 0, Return: 10, Outcome: OK, Status: 201, RV: 5})
	// A 409 for the version that is stored.
	x.add(Op{Client: 0, Family: "object", Key: objKey, Kind: "put", Marker: "m2", PrecondRV: 5, Call: 20, Return: 30, Outcome: Failed, Status: 409})
	requireViolation(t, linearizable(t, x.ops).Violations, "linearizability")
}

func TestUnknownWriteMayNotTakeEffectBeforeItsCall(t *testing.T) {
	t.Parallel()
	var x h
	x.add(Op{Client: 1, Family: "object", Key: objKey, Kind: "get", Call: 0, Return: 10, Outcome: OK, Status: 200, Exists: true, RV: 3, ReadMarker: "m1"})
	x.add(Op{Client: 0, Family: "object", Key: objKey, Kind: "create", Marker: "m1", Call: 20, Return: Never, Outcome: Unknown})
	requireViolation(t, linearizable(t, x.ops).Violations, "linearizability")
}

func TestResolve(t *testing.T) {
	t.Parallel()
	var x h
	applied := x.add(Op{Client: 0, Family: "object", Key: objKey, Kind: "create", Marker: "m1", Call: 0, Outcome: Unknown})
	x.add(Op{Client: 1, Family: "object", Key: objKey, Kind: "put", Marker: "lost", Call: 5, Outcome: Unknown})
	del := x.add(Op{Client: 2, Family: "object", Key: objKey, Kind: "delete", PrecondRV: 5, Call: 6, Outcome: Unknown})
	x.add(Op{Client: 3, Family: "object", Key: objKey, Kind: "delete", PrecondRV: 99, Call: 7, Outcome: Unknown})
	loose := x.add(Op{Client: 4, Family: "object", Key: objKey, Kind: "delete", Call: 8, Outcome: Unknown})
	p := x.add(Op{Client: 5, Family: "pillar", Key: "node/n1/r", Kind: "put", Marker: "p1", Call: 0, Outcome: Unknown})
	x.add(Op{Client: 6, Family: "pillar", Key: "node/n1/r", Kind: "put", Marker: "p2", Call: 0, Outcome: Unknown})
	l := x.add(Op{Client: 7, Family: "lock", Key: "p/w", Kind: "lock", LockID: "L1", RequestID: "req-1", Call: 0, Outcome: Unknown})
	x.add(Op{Client: 8, Family: "lock", Key: "p/w", Kind: "lock", LockID: "L2", RequestID: "req-2", Call: 0, Outcome: Unknown})
	// Reads that got no answer constrain nothing: dropped, except cached renders, which
	// CheckCachedRenders reads.
	x.add(Op{Client: 9, Family: "object", Key: objKey, Kind: "get", Call: 9, Return: Never, Outcome: Unknown})
	x.add(Op{Client: 10, Family: "pillar", Key: "node/n1/r", Kind: "render", Call: 9, Return: Never, Outcome: Unknown})
	cached := x.add(Op{Client: 11, Family: "cached", Key: "node/n1/r", Kind: "render", Call: 9, Return: Never, Outcome: Unknown})
	truth := Truth{
		Changes: []Change{
			{RV: 5, Kind: "Org", Name: "r-1", Type: "ADDED", Marker: "m1"},
			{RV: 6, Kind: "Org", Name: "r-1", Type: "DELETED", Marker: "m1"},
		},
		PillarWrites: map[string]string{"p1": `"1.1"`},
		Audited:      map[string]bool{"req-1": true},
	}
	out, resolved, dropped := Resolve(x.ops, truth)
	require.Equal(t, 4, resolved)
	require.Equal(t, 6, dropped)
	require.ElementsMatch(t, []*Op{applied, del, loose, p, l, cached}, out)
	require.Equal(t, OK, applied.Outcome)
	require.Equal(t, int64(5), applied.RV)
	require.Equal(t, Never, applied.Return, "a resolved write keeps its unknown return")
	require.Equal(t, int64(6), del.RV)
	require.Equal(t, Unknown, loose.Outcome, "an unconditional delete stays non-deterministic")
	require.Equal(t, `"1.1"`, p.ETag)
	require.Equal(t, OK, l.Outcome)
	require.Empty(t, CheckLinearizable(out, timeout).Violations)
}

func TestCheckRVOrder(t *testing.T) {
	t.Parallel()
	var x h
	x.add(Op{Client: 0, Family: "object", Key: "Org//a", Kind: "create", Marker: "a", Call: 0, Return: 10, Outcome: OK, RV: 9})
	x.add(Op{Client: 1, Family: "object", Key: "Org//b", Kind: "create", Marker: "b", Call: 20, Return: 30, Outcome: OK, RV: 8})
	x.add(Op{Client: 2, Family: "object", Key: "Org//c", Kind: "create", Marker: "c", Call: 21, Return: 31, Outcome: OK, RV: 8})
	vs := CheckRVOrder(x.ops)
	requireViolation(t, vs, "rv-order")
	requireViolation(t, vs, "rv-unique")
}

const pillarKey = "node/rp-1/r"

func TestPillarRowLegalAndStaleRender(t *testing.T) {
	t.Parallel()
	var x h
	x.add(Op{Client: 0, Family: "pillar", Key: pillarKey, Kind: "render", Call: 0, Return: 5, Outcome: OK, Status: 200})
	x.add(Op{Client: 0, Family: "pillar", Key: pillarKey, Kind: "put", Marker: "p1", Call: 10, Return: 20, Outcome: OK, Status: 201, ETag: `"a.1"`})
	x.add(Op{Client: 1, Family: "pillar", Key: pillarKey, Kind: "put", Marker: "p2", IfMatch: `"a.1"`, Call: 30, Return: 40, Outcome: OK, Status: 200, ETag: `"a.2"`})
	x.add(Op{Client: 2, Family: "pillar", Key: pillarKey, Kind: "put", Marker: "p3", IfMatch: `"a.1"`, Call: 31, Return: 41, Outcome: Failed, Status: 412})
	x.add(Op{Client: 3, Family: "pillar", Key: pillarKey, Kind: "get", Call: 50, Return: 60, Outcome: OK, Status: 200, Exists: true, ETag: `"a.2"`, ReadMarker: "p2"})
	x.add(Op{Client: 0, Family: "pillar", Key: pillarKey, Kind: "put", Marker: "p4", IfMatch: `"a.2"`, Call: 70, Outcome: Unknown})
	x.add(Op{Client: 4, Family: "pillar", Key: pillarKey, Kind: "render", Call: 80, Return: 90, Outcome: OK, Status: 200, Exists: true, ReadMarker: "p4"})
	require.Empty(t, linearizable(t, x.ops).Violations)

	// A strict render that misses an acknowledged write is a stale read.
	x.add(Op{Client: 5, Family: "pillar", Key: pillarKey, Kind: "render", Call: 100, Return: 110, Outcome: OK, Status: 200, Exists: true, ReadMarker: "p2"})
	requireViolation(t, linearizable(t, x.ops).Violations, "linearizability")
}

func TestPillarRowIgnoredIfMatchFails(t *testing.T) {
	t.Parallel()
	var x h
	x.add(Op{Client: 0, Family: "pillar", Key: pillarKey, Kind: "put", Marker: "p1", Call: 10, Return: 20, Outcome: OK, Status: 201, ETag: `"a.1"`})
	x.add(Op{Client: 1, Family: "pillar", Key: pillarKey, Kind: "put", Marker: "p2", IfMatch: `"a.1"`, Call: 30, Return: 40, Outcome: OK, Status: 200, ETag: `"a.2"`})
	x.add(Op{Client: 2, Family: "pillar", Key: pillarKey, Kind: "put", Marker: "p3", IfMatch: `"a.1"`, Call: 50, Return: 60, Outcome: OK, Status: 200, ETag: `"a.3"`})
	requireViolation(t, linearizable(t, x.ops).Violations, "linearizability")
}

const lockKey = "proj/default"

func TestLockLegal(t *testing.T) {
	t.Parallel()
	var x h
	x.add(Op{Client: 0, Family: "lock", Key: lockKey, Kind: "lock", LockID: "L1", Call: 0, Return: 10, Outcome: OK, Status: 200})
	x.add(Op{Client: 1, Family: "lock", Key: lockKey, Kind: "pglock", LockID: "s1", Replica: -1, Call: 5, Return: 15, Outcome: OK})
	x.add(Op{Client: 2, Family: "lock", Key: lockKey, Kind: "lock", LockID: "L2", Call: 12, Return: 14, Outcome: Failed, Status: 423})
	x.add(Op{Client: 0, Family: "lock", Key: lockKey, Kind: "write", LockID: "L1", Serial: 1, Call: 20, Return: 30, Outcome: OK, Status: 200})
	x.add(Op{Client: 0, Family: "lock", Key: lockKey, Kind: "unlock", LockID: "L1", Call: 40, Return: 50, Outcome: OK, Status: 200})
	x.add(Op{Client: 0, Family: "lock", Key: lockKey, Kind: "write", LockID: "L1", Serial: 2, Call: 60, Return: 70, Outcome: Failed, Status: 409})
	x.add(Op{Client: 1, Family: "lock", Key: lockKey, Kind: "pglock", LockID: "s1", Replica: -1, Call: 60, Return: 70, Outcome: OK, Granted: true})
	x.add(Op{Client: 2, Family: "lock", Key: lockKey, Kind: "lock", LockID: "L3", Call: 75, Return: 78, Outcome: Failed, Status: 423})
	// While the pg client holds the key: an UNLOCK that never connected, and one answered.
	x.add(Op{Client: 2, Family: "lock", Key: lockKey, Kind: "unlock", LockID: "L3", Call: 78, Return: 79, Outcome: Failed, Err: "dial tcp: connection refused"})
	x.add(Op{Client: 2, Family: "lock", Key: lockKey, Kind: "unlock", LockID: "L3", Call: 79, Return: 80, Outcome: OK, Status: 200})
	x.add(Op{Client: 1, Family: "lock", Key: lockKey, Kind: "pglost", LockID: "s1", Replica: -1, Call: 80, Return: Never, Outcome: Unknown})
	x.add(Op{Client: 2, Family: "lock", Key: lockKey, Kind: "lock", LockID: "L4", Call: 90, Return: 100, Outcome: OK, Status: 200})
	require.Empty(t, linearizable(t, x.ops).Violations)
}

func TestLockTwoHoldersFail(t *testing.T) {
	t.Parallel()
	var x h
	x.add(Op{Client: 0, Family: "lock", Key: lockKey, Kind: "lock", LockID: "L1", Call: 0, Return: 10, Outcome: OK, Status: 200})
	x.add(Op{Client: 1, Family: "lock", Key: lockKey, Kind: "pglock", LockID: "s1", Replica: -1, Call: 20, Return: 30, Outcome: OK, Granted: true})
	requireViolation(t, linearizable(t, x.ops).Violations, "linearizability")
}

func TestLockWriteUnderLostLockFails(t *testing.T) {
	t.Parallel()
	var x h
	x.add(Op{Client: 0, Family: "lock", Key: lockKey, Kind: "lock", LockID: "L1", Call: 0, Return: 10, Outcome: OK, Status: 200})
	x.add(Op{Client: 1, Family: "lock", Key: lockKey, Kind: "unlock", LockID: "L1", Call: 20, Return: 30, Outcome: OK, Status: 200})
	x.add(Op{Client: 0, Family: "lock", Key: lockKey, Kind: "write", LockID: "L1", Serial: 1, Call: 40, Return: 50, Outcome: OK, Status: 200})
	requireViolation(t, linearizable(t, x.ops).Violations, "linearizability")
}

func TestLockEarlyReleaseFails(t *testing.T) {
	t.Parallel()
	var x h
	// L1 still holds (no unlock), yet L2 got the lock.
	x.add(Op{Client: 0, Family: "lock", Key: lockKey, Kind: "lock", LockID: "L1", Call: 0, Return: 10, Outcome: OK, Status: 200})
	x.add(Op{Client: 1, Family: "lock", Key: lockKey, Kind: "lock", LockID: "L2", Call: 20, Return: 30, Outcome: OK, Status: 200})
	x.add(Op{Client: 0, Family: "lock", Key: lockKey, Kind: "write", LockID: "L1", Serial: 1, Call: 40, Return: 50, Outcome: OK, Status: 200})
	requireViolation(t, linearizable(t, x.ops).Violations, "linearizability")
}

func TestCheckTimeoutFails(t *testing.T) {
	t.Parallel()
	// Many concurrent unknown writes and reads on one key: a search too big for 1 ns.
	var x h
	for i := 0; i < 200; i++ {
		x.add(Op{Client: i, Family: "object", Key: objKey, Kind: "put", Marker: string(rune('a' + i%26)), Call: int64(i), Outcome: Unknown})
	}
	r := CheckLinearizable(x.ops, time.Nanosecond)
	requireViolation(t, r.Violations, "linearizability")
	require.Contains(t, r.Violations[0].Message, "did not finish")
}

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		status int
		body   string
		err    error
		want   Outcome
		bad    bool
	}{
		{200, "", nil, OK, false}, {201, "", nil, OK, false}, {204, "", nil, OK, false},
		{404, "", nil, Failed, false}, {409, "", nil, Failed, false}, {412, "", nil, Failed, false},
		{422, "", nil, Failed, false}, {423, "", nil, Failed, false},
		{503, `{"status":503,"reason":"unavailable"}`, nil, Failed, false},
		{503, `{"status":503,"outcome":"unknown"}`, nil, Unknown, false},
		{504, "", nil, Unknown, false},
		{0, "", errors.New("connection reset"), Unknown, false},
		{0, "", &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}, Failed, false},
		{0, "", &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset")}}, Unknown, false},
		{500, `{"status":500}`, nil, Unknown, true}, {502, "", nil, Unknown, true}, {400, "", nil, Unknown, true},
	} {
		got, violation := Classify(c.status, []byte(c.body), c.err)
		require.Equal(t, c.want, got, "status %d", c.status)
		require.Equal(t, c.bad, violation != "", "status %d: %q", c.status, violation)
	}
}

func TestHistoryFileRoundTrip(t *testing.T) {
	t.Parallel()
	r := NewRecorder()
	op := r.Begin(&Op{Family: "object", Key: objKey, Kind: "create", Marker: "m"})
	op.Outcome = Unknown
	r.End(op)
	path := filepath.Join(t.TempDir(), "history.jsonl")
	require.NoError(t, WriteHistory(path, r.Ops()))
	back, err := ReadHistory(path)
	require.NoError(t, err)
	require.Len(t, back, 1)
	require.Equal(t, *op, *back[0])
	require.Equal(t, Never, back[0].Return)
}

// stream builds a watch stream from segments.
func stream(segs ...WatchSegment) WatchStream {
	return WatchStream{Name: "w0", Kind: "Org", Segments: segs}
}

var watchTruth = Truth{Changes: []Change{
	{RV: 3, Kind: "Org", Name: "a", Type: "ADDED", Marker: "m1"},
	{RV: 4, Kind: "Node", Name: "n", Type: "ADDED"},
	{RV: 5, Kind: "Org", Name: "b", Type: "ADDED", Marker: "m2"},
	{RV: 7, Kind: "Org", Name: "a", Type: "MODIFIED", Marker: "m3"},
	{RV: 9, Kind: "Org", Name: "b", Type: "DELETED", Marker: "m2"},
}, CompactedThrough: 2}

func ev(typ, name string, rv int64, marker string) WatchEvent {
	return WatchEvent{Type: typ, Name: name, RV: rv, Marker: marker}
}

func TestWatchLegal(t *testing.T) {
	t.Parallel()
	s := stream(
		WatchSegment{From: 2, Events: []WatchEvent{ev("ADDED", "a", 3, "m1"), {Type: "BOOKMARK", RV: 4}}, End: "eof"},
		WatchSegment{From: 4, Events: []WatchEvent{ev("ADDED", "b", 5, "m2"), {Type: "ERROR", Status: 503, Reason: "shutting-down"}}},
		WatchSegment{From: 5, Status: 503},
		WatchSegment{From: 5, Events: []WatchEvent{ev("MODIFIED", "a", 7, "m3")}, End: "transport"},
		WatchSegment{From: 7, Events: []WatchEvent{ev("DELETED", "b", 9, "m2"), {Type: "BOOKMARK", RV: 12}}},
	)
	require.Empty(t, CheckWatches([]WatchStream{s}, watchTruth))
	// A 410 below the floor is allowed.
	old := stream(WatchSegment{From: 1, Status: 410})
	require.Empty(t, CheckWatches([]WatchStream{old}, watchTruth))
}

func TestWatchViolations(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		s     WatchStream
		check string
	}{
		"dropped event":             {stream(WatchSegment{From: 2, Events: []WatchEvent{ev("ADDED", "a", 3, "m1"), ev("MODIFIED", "a", 7, "m3")}}), "watch-reliable"},
		"dropped before a bookmark": {stream(WatchSegment{From: 2, Events: []WatchEvent{ev("ADDED", "a", 3, "m1"), {Type: "BOOKMARK", RV: 6}}}), "watch-reliable"},
		"duplicate":                 {stream(WatchSegment{From: 2, Events: []WatchEvent{ev("ADDED", "a", 3, "m1"), ev("ADDED", "a", 3, "m1")}}), "watch-ordered"},
		"out of order":              {stream(WatchSegment{From: 2, Events: []WatchEvent{ev("ADDED", "b", 5, "m2"), ev("ADDED", "a", 3, "m1")}}), "watch-ordered"},
		"event below a bookmark":    {stream(WatchSegment{From: 2, Events: []WatchEvent{{Type: "BOOKMARK", RV: 6}, ev("ADDED", "b", 5, "m2")}}), "watch-ordered"},
		"bookmark going back":       {stream(WatchSegment{From: 2, Events: []WatchEvent{ev("ADDED", "a", 3, "m1"), {Type: "BOOKMARK", RV: 2}}}), "watch-bookmark"},
		"event not in the log":      {stream(WatchSegment{From: 2, Events: []WatchEvent{ev("ADDED", "a", 3, "m1"), ev("ADDED", "z", 6, "mz")}}), "watch-reliable"},
		"wrong content":             {stream(WatchSegment{From: 2, Events: []WatchEvent{ev("MODIFIED", "a", 3, "m1")}}), "watch-content"},
		"resume with a gap":         {stream(WatchSegment{From: 2, Events: []WatchEvent{ev("ADDED", "a", 3, "m1")}}, WatchSegment{From: 5, Events: []WatchEvent{ev("MODIFIED", "a", 7, "m3")}}), "watch-resumable"},
		"410 above the floor":       {stream(WatchSegment{From: 3, Status: 410}), "watch-410"},
		"410 event above the floor": {stream(WatchSegment{From: 3, Events: []WatchEvent{{Type: "ERROR", Status: 410}}}), "watch-410"},
		"504 on a resume":           {stream(WatchSegment{From: 3, Status: 504}), "watch-status"},
		"401 event":                 {stream(WatchSegment{From: 3, Events: []WatchEvent{{Type: "ERROR", Status: 401}}}), "watch-status"},
	} {
		vs := CheckWatches([]WatchStream{c.s}, watchTruth)
		require.NotEmpty(t, vs, name)
		found := false
		for _, v := range vs {
			found = found || v.Check == c.check
		}
		require.True(t, found, "%s: want %s, got %v", name, c.check, vs)
	}
}

func TestLists(t *testing.T) {
	t.Parallel()
	truth := Truth{Changes: []Change{
		{RV: 3, Kind: "Org", Name: "a", Type: "ADDED", Marker: "m1", Labels: map[string]string{"color": "red"}},
		{RV: 5, Kind: "Org", Name: "b", Type: "ADDED", Marker: "m2"},
		{RV: 7, Kind: "Org", Name: "c", Type: "ADDED", Marker: "m3", Labels: map[string]string{"color": "red"}},
		{RV: 9, Kind: "Org", Name: "b", Type: "DELETED", Marker: "m2"},
	}}
	ops := []*Op{{Family: "object", Key: "Org//c", Kind: "create", Marker: "m3", Call: 50, Return: 60, Outcome: OK, RV: 7}}
	good := []ListPage{
		{Kind: "Org", Call: 10, Return: 20, RV: 5, Last: false, Items: []ListItem{{"a", 3, "m1"}, {"b", 5, "m2"}}},
		{Kind: "Org", Call: 70, Return: 80, RV: 9, After: "b", Last: true, Items: []ListItem{{"c", 7, "m3"}}},
		{Kind: "Org", Call: 70, Return: 80, RV: 8, Last: true, Selector: map[string]string{"color": "red"}, Items: []ListItem{{"a", 3, "m1"}, {"c", 7, "m3"}}},
		// A page one item short while a write committed: it covers only up to its last name.
		{Kind: "Org", Call: 70, Return: 80, RV: 7, Last: false, Items: []ListItem{{"a", 3, "m1"}}},
	}
	require.Empty(t, CheckLists(good, ops, truth))

	missing := []ListPage{{Kind: "Org", Call: 70, Return: 80, RV: 9, Last: true, Items: []ListItem{{"a", 3, "m1"}}}}
	requireViolation(t, CheckLists(missing, ops, truth), "list")
	wrongRV := []ListPage{{Kind: "Org", Call: 70, Return: 80, RV: 9, Last: true, Items: []ListItem{{"a", 3, "m1"}, {"c", 8, "m3"}}}}
	requireViolation(t, CheckLists(wrongRV, ops, truth), "list")
	stale := []ListPage{{Kind: "Org", Call: 70, Return: 80, RV: 5, Last: true, Items: []ListItem{{"a", 3, "m1"}, {"b", 5, "m2"}}}}
	vs := CheckLists(stale, ops, truth)
	requireViolation(t, vs, "list-stale")
	require.True(t, strings.Contains(vs[0].String(), "rv 7"), vs[0].String())
}

func TestLockGap(t *testing.T) {
	t.Parallel()
	var x h
	x.add(Op{Client: 0, Family: "lock", Key: lockKey, Kind: "lock", LockID: "L1", Call: 0, Return: 10, Outcome: OK, Status: 200})
	// The keeper's session broke while L1 was held: a pg client may take the key beside it.
	x.add(Op{Client: 9, Family: "lock", Key: lockKey, Kind: "gap", Call: 15, Return: 25, Outcome: OK})
	x.add(Op{Client: 1, Family: "lock", Key: lockKey, Kind: "pglock", LockID: "s1", Replica: -1, Call: 30, Return: 40, Outcome: OK, Granted: true})
	// Then L1's writes are refused with 423 until the pg client lets go.
	x.add(Op{Client: 0, Family: "lock", Key: lockKey, Kind: "write", LockID: "L1", Serial: 1, Call: 50, Return: 60, Outcome: Failed, Status: 423})
	x.add(Op{Client: 1, Family: "lock", Key: lockKey, Kind: "pgunlock", LockID: "s1", Replica: -1, Call: 70, Return: 80, Outcome: OK, Granted: true})
	x.add(Op{Client: 0, Family: "lock", Key: lockKey, Kind: "write", LockID: "L1", Serial: 2, Call: 90, Return: 100, Outcome: OK, Status: 200})
	require.Empty(t, linearizable(t, x.ops).Violations)

	// A write under the lock while the pg client holds the key: two writers raced.
	var y h
	y.add(Op{Client: 0, Family: "lock", Key: lockKey, Kind: "lock", LockID: "L1", Call: 0, Return: 10, Outcome: OK, Status: 200})
	y.add(Op{Client: 9, Family: "lock", Key: lockKey, Kind: "gap", Call: 15, Return: 25, Outcome: OK})
	y.add(Op{Client: 1, Family: "lock", Key: lockKey, Kind: "pglock", LockID: "s1", Replica: -1, Call: 30, Return: 40, Outcome: OK, Granted: true})
	y.add(Op{Client: 0, Family: "lock", Key: lockKey, Kind: "write", LockID: "L1", Serial: 1, Call: 50, Return: 60, Outcome: OK, Status: 200})
	requireViolation(t, linearizable(t, y.ops).Violations, "linearizability")
}

// TestResolveDeleteIgnoresAnEarlierDeletion: a delete sent with a stale precondition, whose
// outcome is unknown, is not the author of an older deletion that followed the same version
// (found in a long run: an unconditional delete had made it long before).
func TestResolveDeleteIgnoresAnEarlierDeletion(t *testing.T) {
	t.Parallel()
	var x h
	x.add(Op{Client: 0, Family: "object", Key: objKey, Kind: "create", Marker: "m1", Call: 0, Return: 10, Outcome: OK, Status: 201, RV: 5})
	x.add(Op{Client: 1, Family: "object", Key: objKey, Kind: "delete", Call: 20, Return: 30, Outcome: OK, Status: 204})
	x.add(Op{Client: 0, Family: "object", Key: objKey, Kind: "create", Marker: "m2", Call: 40, Return: 50, Outcome: OK, Status: 201, RV: 9})
	stale := x.add(Op{Client: 2, Family: "object", Key: objKey, Kind: "delete", PrecondRV: 5, Call: 60, Outcome: Unknown})
	truth := Truth{Changes: []Change{
		{RV: 5, Kind: "Org", Name: "r-1", Type: "ADDED", Marker: "m1"},
		{RV: 6, Kind: "Org", Name: "r-1", Type: "DELETED", Marker: "m1"},
		{RV: 9, Kind: "Org", Name: "r-1", Type: "ADDED", Marker: "m2"},
	}}
	out, resolved, dropped := Resolve(x.ops, truth)
	require.Equal(t, 0, resolved)
	require.Equal(t, 1, dropped)
	require.NotContains(t, out, stale)
	require.Empty(t, CheckLinearizable(out, timeout).Violations)
	require.Empty(t, CheckRVOrder(out))
}

// TestResolveDeleteClaimedByAnAcknowledgedDelete: a conditional delete with an unknown
// outcome and an unconditional delete that succeeded both fit the one DELETED change after
// the precondition's version. The acknowledged delete made it (the other would have found
// nothing to delete), so the unknown one must not be resolved as having made it: found by
// the short form (seed 41, terminate-backends) as a false linearizability violation.
func TestResolveDeleteClaimedByAnAcknowledgedDelete(t *testing.T) {
	t.Parallel()
	var x h
	x.add(Op{Client: 0, Family: "object", Key: objKey, Kind: "create", Marker: "m1", Call: 0, Return: 10, Outcome: OK, Status: 201, RV: 5})
	unknown := x.add(Op{Client: 1, Family: "object", Key: objKey, Kind: "delete", PrecondRV: 5, Call: 20, Outcome: Unknown})
	x.add(Op{Client: 2, Family: "object", Key: objKey, Kind: "delete", Call: 30, Return: 40, Outcome: OK, Status: 204})
	x.add(Op{Client: 2, Family: "object", Key: objKey, Kind: "get", Call: 50, Return: 60, Outcome: Failed, Status: 404})
	x.add(Op{Client: 0, Family: "object", Key: objKey, Kind: "create", Marker: "m2", Call: 70, Return: 80, Outcome: OK, Status: 201, RV: 9})
	// A read called after the delete returned may see an older version of another object:
	// it says nothing about when the delete's change was made (only writes do).
	x.add(Op{Client: 3, Family: "object", Key: "Org//r-2", Kind: "create", Marker: "z", Call: 1, Return: 2, Outcome: OK, Status: 201, RV: 4})
	x.add(Op{Client: 3, Family: "object", Key: "Org//r-2", Kind: "get", Call: 45, Return: 46, Outcome: OK, Status: 200, Exists: true, RV: 4, ReadMarker: "z"})
	truth := Truth{Changes: []Change{
		{RV: 4, Kind: "Org", Name: "r-2", Type: "ADDED", Marker: "z"},
		{RV: 5, Kind: "Org", Name: "r-1", Type: "ADDED", Marker: "m1"},
		{RV: 6, Kind: "Org", Name: "r-1", Type: "DELETED", Marker: "m1"},
		{RV: 9, Kind: "Org", Name: "r-1", Type: "ADDED", Marker: "m2"},
	}}
	out, resolved, _ := Resolve(x.ops, truth)
	require.Equal(t, 0, resolved)
	require.Equal(t, Unknown, unknown.Outcome)
	require.Empty(t, CheckLinearizable(out, timeout).Violations)
}

// TestResolveObjectWritesByAuditLog: an object write with a request id is settled by the audit
// log, which every committed object write writes in its own transaction: a write it does not
// name never took effect (dropped, even a conditional delete whose precondition's version was
// deleted — by someone else — and a put whose marker a retry left nowhere else); an audited
// conditional delete is the DELETED change after the version it named, even when another
// unknown delete named the same version; an audited unconditional delete took effect, at a
// time the model places. The resolved history checks as linearizable; the control, the same
// history with the audited unconditional delete dropped as if unaudited, does not: the read
// that saw the object gone has no deletion to follow.
func TestResolveObjectWritesByAuditLog(t *testing.T) {
	t.Parallel()
	history := func(auditLoose bool) ([]*Op, *Op, *Op, Truth) {
		var x h
		x.add(Op{Client: 0, Family: "object", Key: objKey, Kind: "create", Marker: "m1", RequestID: "rb-c1", Call: 0, Return: 10, Outcome: OK, Status: 201, RV: 5})
		named := x.add(Op{Client: 1, Family: "object", Key: objKey, Kind: "delete", PrecondRV: 5, RequestID: "rb-d1", Call: 20, Outcome: Unknown})
		x.add(Op{Client: 2, Family: "object", Key: objKey, Kind: "delete", PrecondRV: 5, RequestID: "rb-d2", Call: 21, Outcome: Unknown})
		x.add(Op{Client: 3, Family: "object", Key: objKey, Kind: "create", Marker: "m2", RequestID: "rb-c2", Call: 40, Return: 50, Outcome: OK, Status: 201, RV: 9})
		loose := x.add(Op{Client: 4, Family: "object", Key: objKey, Kind: "delete", RequestID: "rb-d3", Call: 60, Outcome: Unknown})
		x.add(Op{Client: 5, Family: "object", Key: objKey, Kind: "put", Marker: "lost", RequestID: "rb-p1", Call: 61, Outcome: Unknown})
		x.add(Op{Client: 6, Family: "object", Key: objKey, Kind: "get", Call: 80, Return: 90, Outcome: Failed, Status: 404})
		audited := map[string]bool{"rb-c1": true, "rb-d1": true, "rb-c2": true}
		if auditLoose {
			audited["rb-d3"] = true
		}
		truth := Truth{Changes: []Change{
			{RV: 5, Kind: "Org", Name: "r-1", Type: "ADDED", Marker: "m1"},
			{RV: 6, Kind: "Org", Name: "r-1", Type: "DELETED", Marker: "m1"},
			{RV: 9, Kind: "Org", Name: "r-1", Type: "ADDED", Marker: "m2"},
			{RV: 12, Kind: "Org", Name: "r-1", Type: "DELETED", Marker: "m2"},
		}, Audited: audited}
		return x.ops, named, loose, truth
	}

	ops, named, loose, truth := history(true)
	out, resolved, dropped := Resolve(ops, truth)
	require.Equal(t, 2, resolved)
	require.Equal(t, 2, dropped, "the unaudited delete and put")
	require.Len(t, out, 5)
	require.Equal(t, OK, named.Outcome)
	require.Equal(t, int64(6), named.RV)
	require.Equal(t, OK, loose.Outcome)
	require.Equal(t, Never, loose.Return, "a resolved write keeps its unknown return")
	require.Empty(t, CheckLinearizable(out, timeout).Violations)

	ops, _, loose, truth = history(false)
	out, _, _ = Resolve(ops, truth)
	require.NotContains(t, out, loose)
	require.NotEmpty(t, CheckLinearizable(out, timeout).Violations, "the control: without the audited delete, the 404 is impossible")
}

// TestResolvePinsWritesToTheirPredecessor: a write that succeeded at a version the log holds
// with its marker is pinned to the key's version before it (PrevRV), which its real order
// satisfies, so a correct history still checks; and a history whose answers disagree with the
// log (the put answered version 7, the log holds it at 8) fails, which without the pin it
// would not.
func TestResolvePinsWritesToTheirPredecessor(t *testing.T) {
	t.Parallel()
	history := func(putLoggedAt int64) ([]*Op, *Op, *Op) {
		var x h
		x.add(Op{Client: 0, Family: "object", Key: objKey, Kind: "create", Marker: "m1", RequestID: "rb-1", Call: 0, Return: 10, Outcome: OK, Status: 201, RV: 5})
		put := x.add(Op{Client: 1, Family: "object", Key: objKey, Kind: "put", Marker: "m2", RequestID: "rb-2", Call: 20, Return: 30, Outcome: OK, Status: 200, RV: 7})
		lost := x.add(Op{Client: 2, Family: "object", Key: objKey, Kind: "patch", Marker: "m3", RequestID: "rb-3", Call: 15, Outcome: Unknown})
		x.add(Op{Client: 3, Family: "object", Key: objKey, Kind: "get", Call: 40, Return: 50, Outcome: OK, Status: 200, Exists: true, RV: 9, ReadMarker: "m3"})
		truth := Truth{Changes: []Change{
			{RV: 5, Kind: "Org", Name: "r-1", Type: "ADDED", Marker: "m1"},
			{RV: putLoggedAt, Kind: "Org", Name: "r-1", Type: "MODIFIED", Marker: "m2"},
			{RV: 9, Kind: "Org", Name: "r-1", Type: "MODIFIED", Marker: "m3"},
		}, Audited: map[string]bool{"rb-1": true, "rb-2": true, "rb-3": true}}
		out, _, _ := Resolve(x.ops, truth)
		return out, put, lost
	}

	out, put, lost := history(7)
	require.Equal(t, int64(5), put.PrevRV)
	require.Equal(t, OK, lost.Outcome)
	require.Equal(t, int64(7), lost.PrevRV, "the resolved patch replaced the put's version")
	require.Empty(t, CheckLinearizable(out, timeout).Violations)

	out, put, _ = history(8)
	require.Zero(t, put.PrevRV, "the put's answer is not in the log: nothing to pin it by")
	require.NotEmpty(t, CheckLinearizable(out, timeout).Violations, "the patch replaced version 8, which no write of the history made")
	for _, op := range out {
		op.PrevRV = 0
	}
	require.Empty(t, CheckLinearizable(out, timeout).Violations, "the control: without the pins the mismatch passes")
}

// TestLockRefusedByAReleasingKeeper: a LOCK refused with 423 naming "strata-replica" (another
// replica's keeper still held the key, its lock row already gone: an UNLOCK committed on a
// replica paused before its keeper let go) is possible while no lock is held; the control, the
// same refusal naming an ordinary holder, is not — there was none.
func TestLockRefusedByAReleasingKeeper(t *testing.T) {
	t.Parallel()
	history := func(holder string) []*Op {
		var x h
		x.add(Op{Client: 0, Family: "lock", Key: lockKey, Kind: "lock", LockID: "L1", Call: 0, Return: 10, Outcome: OK, Status: 200})
		x.add(Op{Client: 0, Family: "lock", Key: lockKey, Kind: "unlock", LockID: "L1", Call: 20, Return: 30, Outcome: OK, Status: 200})
		x.add(Op{Client: 1, Family: "lock", Key: lockKey, Kind: "lock", LockID: "L2", Call: 40, Return: 4000, Outcome: Failed, Status: 423, Holder: holder})
		x.add(Op{Client: 1, Family: "lock", Key: lockKey, Kind: "lock", LockID: "L3", Call: 4100, Return: 4200, Outcome: OK, Status: 200})
		return x.ops
	}
	require.Empty(t, CheckLinearizable(history("strata-replica"), timeout).Violations)
	requireViolation(t, CheckLinearizable(history("L1"), timeout).Violations, "linearizability")
}
