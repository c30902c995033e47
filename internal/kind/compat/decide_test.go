package compat_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/kind/compat"
)

// checked is a diff with one change of each verdict shape.
func checked(t *testing.T) []compat.Change {
	old := schema(t, obj(`"n":{"type":"number","maximum":10},"m":{"type":"integer"}`))
	new := schema(t, obj(`"n":{"type":"integer","maximum":5},"m":{"type":"integer"},"r":{"type":"string"}`, "r"))
	changes := compat.Diff(old, new)
	var rules []string
	for _, c := range changes {
		rules = append(rules, c.Path+" "+c.Rule)
	}
	require.Equal(t, []string{
		"/properties/n maximum-tightened",
		"/properties/n type-narrowed",
		"/properties/r required-property-added",
	}, rules)
	return changes
}

func verdicts(r compat.Report) []compat.Verdict {
	var out []compat.Verdict
	for _, f := range r.Changes {
		out = append(out, f.Verdict)
	}
	return out
}

func TestDecideCleanScan(t *testing.T) {
	t.Parallel()
	changes := checked(t)
	r := compat.Decide(changes, map[int]compat.Impact{0: {}, 1: {}, 2: {}}, nil)
	require.True(t, r.Compatible)
	require.Equal(t, []compat.Verdict{compat.Accept, compat.Accept, compat.Accept}, verdicts(r))
	require.NotNil(t, r.Changes[0].Impact)
	require.Zero(t, r.Changes[0].Impact.Count)
	require.Empty(t, r.Changes[1].WayForward, "an accepted change needs no way forward")
}

func TestDecideAffectedScan(t *testing.T) {
	t.Parallel()
	changes := checked(t)
	impacts := map[int]compat.Impact{
		0: {Count: 2, Sample: []string{"a", "b"}},
		1: {Count: 1, Sample: []string{"half"}},
		2: {Count: 12, Sample: []string{"x"}},
	}
	r := compat.Decide(changes, impacts, nil)
	require.False(t, r.Compatible)
	require.Equal(t, []compat.Verdict{compat.Accept, compat.Reject, compat.Acknowledge}, verdicts(r))
	require.Equal(t, &compat.Impact{Count: 2, Sample: []string{"a", "b"}}, r.Changes[0].Impact)
	require.Contains(t, r.Changes[0].Message, "2 stored objects are affected (a, b)")
	require.Contains(t, r.Changes[1].Message, "1 stored object is affected (half)")
	require.Contains(t, r.Changes[1].WayForward, "migrate")
	require.Contains(t, r.Changes[2].Message, "12 stored objects are affected (x, …)")
	require.False(t, r.Changes[2].Acknowledged)
	require.Equal(t, "newWritesOnly", r.Changes[2].Ack)
}

func TestDecideAcknowledgements(t *testing.T) {
	t.Parallel()
	changes := checked(t)
	impacts := map[int]compat.Impact{2: {Count: 3}}
	for _, rule := range []string{"newWritesOnly", "required-property-added"} {
		r := compat.Decide(changes, impacts, []compat.Ack{{Path: "/properties/r", Rule: rule}})
		require.True(t, r.Compatible, rule)
		require.True(t, r.Changes[2].Acknowledged, rule)
		require.Equal(t, compat.Acknowledge, r.Changes[2].Verdict)
		require.Len(t, r.Changes, 3)
	}
	// An acknowledgement at the wrong path acknowledges nothing and is itself rejected.
	r := compat.Decide(changes, impacts, []compat.Ack{{Path: "/properties/x", Rule: "newWritesOnly"}})
	require.False(t, r.Compatible)
	require.False(t, r.Changes[2].Acknowledged)
	require.Len(t, r.Changes, 4)
	require.Equal(t, compat.Finding{Path: "/properties/x", Rule: "unknown-acknowledgement", Verdict: compat.Reject,
		Ack: "newWritesOnly", Message: r.Changes[3].Message, WayForward: r.Changes[3].WayForward}, r.Changes[3])
	require.Contains(t, r.Changes[3].Message, `--ack /properties/x=newWritesOnly names no change`)
}

func TestDecideUnknownAcknowledgementAloneRejects(t *testing.T) {
	t.Parallel()
	// Acknowledging a change that is accepted anyway names a change: it is not unknown.
	changes := checked(t)
	r := compat.Decide(changes, nil, []compat.Ack{{Path: "/properties/n", Rule: "maximum-tightened"}})
	require.True(t, r.Compatible)
	require.Len(t, r.Changes, 3)
	// A typo is.
	r = compat.Decide(nil, nil, []compat.Ack{{Path: "/properties/n", Rule: "readersUpgrade"}})
	require.False(t, r.Compatible)
	require.Equal(t, []compat.Verdict{compat.Reject}, verdicts(r))
	require.Equal(t, "unknown-acknowledgement", r.Changes[0].Rule)
}

func TestDecideRejectStaysRejected(t *testing.T) {
	t.Parallel()
	changes := compat.Diff(schema(t, obj(`"size":{"type":"string"}`)), schema(t, obj(`"size":{"type":"integer"}`)))
	r := compat.Decide(changes, nil, []compat.Ack{{Path: "/properties/size", Rule: "type-changed"}})
	require.False(t, r.Compatible)
	require.Equal(t, []compat.Verdict{compat.Reject}, verdicts(r))
	require.False(t, r.Changes[0].Acknowledged)
}

func TestDecideEmpty(t *testing.T) {
	t.Parallel()
	r := compat.Decide(nil, nil, nil)
	require.True(t, r.Compatible)
	out, err := json.Marshal(r)
	require.NoError(t, err)
	require.JSONEq(t, `{"compatible":true,"changes":[]}`, string(out))
}

func TestDecideRevisions(t *testing.T) {
	t.Parallel()
	changes := checked(t)
	older := compat.Diff(schema(t, obj(`"n":{"type":"integer"}`)), schema(t, obj(`"n":{"type":"integer","default":1}`)))
	ack := []compat.Ack{{Path: "/properties/n", Rule: "defaultEqualsAbsentBehaviour"}}
	r := compat.DecideRevisions([]compat.Against{
		{Revision: 3, Changes: changes},
		{Revision: 1, Changes: older},
	}, ack)
	require.True(t, r.Compatible, "the acknowledgement matches a change against revision 1 only, and is not unknown")
	require.Len(t, r.Changes, 4)
	require.Equal(t, 3, r.Changes[0].Against)
	require.Equal(t, 1, r.Changes[3].Against)
	require.True(t, r.Changes[3].Acknowledged)
}

func TestFindingJSON(t *testing.T) {
	t.Parallel()
	changes := compat.Diff(schema(t, obj(`"n":{"type":"number"}`)), schema(t, obj(`"n":{"type":"integer"}`)))
	r := compat.Decide(changes, map[int]compat.Impact{0: {Count: 1, Sample: []string{"o1"}}}, nil)
	r.Changes[0].Against = 2
	out, err := json.Marshal(r)
	require.NoError(t, err)
	var back map[string]any
	require.NoError(t, json.Unmarshal(out, &back))
	f := back["changes"].([]any)[0].(map[string]any)
	require.Equal(t, "/properties/n", f["path"])
	require.Equal(t, "/spec/n", f["field"])
	require.Equal(t, "type-narrowed", f["rule"])
	require.Equal(t, float64(12), f["row"])
	require.Equal(t, "reject", f["verdict"])
	require.Equal(t, false, f["acknowledged"])
	require.NotEmpty(t, f["message"])
	require.NotEmpty(t, f["wayForward"])
	require.Equal(t, map[string]any{"count": float64(1), "sample": []any{"o1"}}, f["impact"])
	require.Equal(t, float64(2), f["against"])
}
