package main_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pgtest"
)

// TestReadOnlyDatabaseIsA503 (issue 18, item 2): with the database read-only (an operator's
// default_transaction_read_only during maintenance), writes answered an opaque 500 while
// /readyz stayed 200, so a balancer kept sending writes. Now a write is a 503 problem with
// reason "read-only" and Retry-After, /readyz is a 503 with the same reason (and nothing of
// the database's address or role), reads keep working, and all is back once the database
// accepts writes again.
func TestReadOnlyDatabaseIsA503(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabaseURL(t)
	token := "strata_" + strings.Repeat("readOnlyTokenXY", 3)
	s := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--database-url", url, "--data-dir", dataDir(t))
	ctx := context.Background()
	admin, err := db.Open(ctx, db.Options{URL: url, MaxConns: 1})
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	type answer struct {
		status int
		retry  string
		reason string
		body   string
	}
	call := func(method, path, body string) answer {
		req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var p struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(b, &p)
		return answer{resp.StatusCode, resp.Header.Get("Retry-After"), p.Reason, string(b)}
	}
	require.Equal(t, 201, call("POST", "/v1/orgs", `{"metadata":{"name":"acme"}}`).status)

	// setReadOnly flips the database's default and ends strata's sessions, so its pool
	// reconnects under the new default (as after a maintenance restart).
	setReadOnly := func(on bool) {
		stmt := "RESET default_transaction_read_only"
		if on {
			stmt = "SET default_transaction_read_only = on"
		}
		_, err := admin.Exec(ctx, &db.Query{Name: "ro", Text: `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I ` + stmt + `', current_database()); END $$`})
		require.NoError(t, err)
		_, err = admin.Exec(ctx, &db.Query{Name: "kick", Text: `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name LIKE 'strata%'`})
		require.NoError(t, err)
	}
	setReadOnly(true)
	var w answer
	require.Eventually(t, func() bool {
		w = call("POST", "/v1/orgs", `{"metadata":{"name":"web"}}`)
		return w.reason == "read-only"
	}, 30*time.Second, 100*time.Millisecond, "a write on a read-only database: %+v", w)
	require.Equal(t, 503, w.status, w.body)
	require.Equal(t, "10", w.retry)
	var ready answer
	require.Eventually(t, func() bool {
		ready = call("GET", "/readyz", "")
		return ready.status == 503
	}, 30*time.Second, 100*time.Millisecond)
	require.Equal(t, "read-only", ready.reason, ready.body)
	require.NotEmpty(t, ready.retry)
	for _, secret := range []string{"user=", "host=", "5432", "strata@"} {
		require.NotContains(t, ready.body, secret, "readiness says nothing of the database's address or role")
	}
	require.Eventually(t, func() bool { return call("GET", "/v1/orgs/acme", "").status == 200 }, 30*time.Second, 100*time.Millisecond,
		"reads still work")

	setReadOnly(false)
	var back, readyAgain answer
	require.Eventually(t, func() bool {
		if back.status != 201 {
			back = call("POST", "/v1/orgs", `{"metadata":{"name":"web"}}`)
		}
		readyAgain = call("GET", "/readyz", "")
		return back.status == 201 && readyAgain.status == 200
	}, 30*time.Second, 100*time.Millisecond, "writes and readiness come back: %+v %+v", back, readyAgain)
}
