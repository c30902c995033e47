package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/httpapi"
)

// TestErrorLogLinesCarryRequestID (issue 18, item 8): the error line of a failed request
// had no request_id, so it could not be joined with the request line or the client's report.
// Now every record logged with the request's context carries it — here a 503 from /readyz
// (its cause goes to the log) — equal to the X-Request-Id the client got, which is the
// server's own even when the client sent one (issue 27, 8l: the client's is kept apart).
func TestErrorLogLinesCarryRequestID(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	logger := slog.New(httpapi.LogHandler(slog.NewJSONHandler(&buf, nil)))
	api := httpapi.New(httpapi.Options{Logger: logger, MaxBodyBytes: 1 << 20,
		Ready: func(context.Context) ([]string, error) { return nil, errors.New("the schema is behind") }})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest("GET", srv.URL+"/readyz", nil)
	req.Header.Set("X-Request-Id", "abc123")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 503, resp.StatusCode)
	id := resp.Header.Get("X-Request-Id")
	require.NotEmpty(t, id)
	require.NotEqual(t, "abc123", id, "the server chooses the request id")
	var found []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		if rec["level"] == "WARN" || rec["level"] == "ERROR" {
			require.Equal(t, id, rec["request_id"], "a %s line without the request's id: %s", rec["level"], line)
			found = append(found, rec["msg"].(string))
		}
	}
	require.NotEmpty(t, found, "the failure was logged:\n%s", buf.String())
}
