package robustness

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

var bulkTruth = Truth{Changes: []Change{
	{RV: 3, Kind: "Node", Name: "m0", Type: "MODIFIED", Marker: "b1"},
	{RV: 4, Kind: "Node", Name: "m1", Type: "MODIFIED", Marker: "b2"},
	{RV: 5, Kind: "Org", Name: "o", Type: "ADDED", Marker: "b9"},
}}

func TestBulkLegal(t *testing.T) {
	t.Parallel()
	applies := []BulkApply{{Status: 200, Lines: []BulkLine{
		{Name: "m0", Marker: "b1", Result: "updated"},
		{Name: "m1", Marker: "b2", Result: "created"},
		{Name: "m0", Marker: "b3", Result: "error", Problem: json.RawMessage(`{"status":422}`)},
		{Name: "m0", Marker: "b1", Result: "unchanged"},                                                             // a retry after its own commit
		{Name: "m1", Marker: "b4"},                                                                                  // no result: unknown
		{Name: "m1", Marker: "b2", Result: "error", Problem: json.RawMessage(`{"status":503,"outcome":"unknown"}`)}, // may have committed
	}}}
	require.Empty(t, CheckBulk(applies, bulkTruth))
}

func TestBulkViolations(t *testing.T) {
	t.Parallel()
	for name, l := range map[string]BulkLine{
		"acknowledged, not in the log": {Name: "m0", Marker: "b7", Result: "updated"},
		"another kind's change":        {Name: "m0", Marker: "b9", Result: "created"},
		"an error that wrote":          {Name: "m0", Marker: "b1", Result: "error", Problem: json.RawMessage(`{"status":409}`)},
		"a 500 for a line":             {Name: "m0", Marker: "b8", Result: "error", Problem: json.RawMessage(`{"status":500}`)},
		"unchanged, never so":          {Name: "m0", Marker: "b8", Result: "unchanged"},
	} {
		vs := CheckBulk([]BulkApply{{Status: 200, Lines: []BulkLine{l}}}, bulkTruth)
		require.NotEmpty(t, vs, name)
		requireViolation(t, vs, "bulk")
	}
}
