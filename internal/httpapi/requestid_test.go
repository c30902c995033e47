package httpapi_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pgtest"
)

// TestRequestIDIsTheServers is finding 8(l) of issue 27: X-Request-Id was the client's choice
// and stored verbatim, so one request's audit records could carry another request's id. The
// server now always makes its own id (the answer's X-Request-Id, the log's request_id, the
// audit record's requestId); what a client sent is kept apart, as client_request_id in the
// request log and clientRequestId in the audit record. Seen failing before the fix (the
// second request's audit record carried the first's id).
func TestRequestIDIsTheServers(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	b := serveOn(t, pgtest.NewDB(t), func(o *httpapi.Options) {
		o.Logger = slog.New(httpapi.LogHandler(slog.NewJSONHandler(&logs, nil)))
	})
	first := b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"victim"}}`))
	require.Equal(t, 201, first.status, string(first.body))
	firstID := first.header.Get("X-Request-Id")
	require.NotEmpty(t, firstID)

	// A second request claims the first one's id.
	second := b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"intruder"}}`), "X-Request-Id", firstID)
	require.Equal(t, 201, second.status, string(second.body))
	secondID := second.header.Get("X-Request-Id")
	require.NotEmpty(t, secondID)
	require.NotEqual(t, firstID, secondID, "the server chose the second request's id")

	// A client id that is too long or not printable is not kept at all.
	third := b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"third"}}`), "X-Request-Id", strings.Repeat("x", 200))
	require.Equal(t, 201, third.status, string(third.body))

	r := b.do(t, "GET", "/v1/audit?action=object.create", b.admin, nil)
	require.Equal(t, 200, r.status, string(r.body))
	var audit struct {
		Items []api.AuditRecord `json:"items"`
	}
	require.NoError(t, json.Unmarshal(r.body, &audit))
	byTarget := map[string]api.AuditRecord{}
	for _, rec := range audit.Items {
		byTarget[rec.Target] = rec
	}
	require.Equal(t, firstID, byTarget["Org/victim"].RequestID)
	require.Empty(t, byTarget["Org/victim"].ClientRequestID)
	require.Equal(t, secondID, byTarget["Org/intruder"].RequestID, "the intruder's record carries its own id")
	require.Equal(t, firstID, byTarget["Org/intruder"].ClientRequestID, "what the client sent, apart")
	require.Equal(t, third.header.Get("X-Request-Id"), byTarget["Org/third"].RequestID)
	require.Empty(t, byTarget["Org/third"].ClientRequestID)
	ids := map[string]string{}
	for _, rec := range audit.Items {
		if other, dup := ids[rec.RequestID]; dup {
			t.Fatalf("records %s and %s share the request id %s", other, rec.Target, rec.RequestID)
		}
		ids[rec.RequestID] = rec.Target
	}

	// The request log: the server's id, and the client's apart.
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &rec), l)
		if rec["msg"] == "request" && rec["request_id"] == secondID {
			line = rec
		}
	}
	require.NotNil(t, line, "the second request's log line has the server's id:\n%s", logs.String())
	require.Equal(t, firstID, line["client_request_id"])
}
