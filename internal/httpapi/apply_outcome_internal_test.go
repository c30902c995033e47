package httpapi

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/fault"
)

// TestLineProblemKeepsTheOutcome: a bulk apply line (or a stream's error event) whose write
// lost its COMMIT answer carries "outcome": "unknown" like the same error answered alone;
// without it a client reads the line's 503 as "not written" although it may have been. Found
// by the robustness harness's bulk check (a line answered so whose change was in the log);
// seen failing (no outcome) before lineProblem copied it.
func TestLineProblemKeepsTheOutcome(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("POST", "/v1/nodes:apply", nil)
	unknown := fault.Unavailable(fault.ReasonUnavailable, nil, "the connection to the database was lost while this write was being committed")
	unknown.Extensions = map[string]any{"outcome": "unknown"}
	p := lineProblem(r, unknown)
	require.Equal(t, 503, p.Status)
	require.Equal(t, "unknown", p.Outcome)
	// The control: a 503 the server answered itself has a known outcome and says nothing.
	known := lineProblem(r, fault.Unavailable(fault.ReasonConnections, nil, "no connection to spare"))
	require.Empty(t, known.Outcome)
	require.Equal(t, fault.ReasonConnections, known.Reason)
}
