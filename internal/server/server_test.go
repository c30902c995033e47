package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/db/migrations"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/server"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// futureSchema records a migration one version past this binary's, as the next release
// would, declaring the given compatible-since. It returns the database URL.
func futureSchema(t *testing.T, compatibleSince int64) (string, *db.DB) {
	t.Helper()
	url := pgtest.NewDatabaseURL(t)
	d, err := db.Open(context.Background(), db.Options{URL: url, MaxConns: 2, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(d.Close)
	_, err = d.Exec(context.Background(), &db.Query{Name: "Future", Text: "INSERT INTO {{schema}}.schema_migrations (version, name, compatible_since) VALUES ($1, 'next_release', $2)"},
		migrations.Latest()+1, compatibleSince)
	require.NoError(t, err)
	return url, d
}

// startServer runs a replica on url until the test ends and returns its base URL, or the
// error it stopped with before serving.
func startServer(t *testing.T, url string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- server.Run(ctx, server.Config{
			Listen: "127.0.0.1:0", DatabaseURL: url, DataDir: t.TempDir(),
			Logger: slog.New(slog.DiscardHandler), ShutdownTimeout: 5 * time.Second,
			Ready: func(a net.Addr) { addrc <- a },
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-errc:
		case <-time.After(30 * time.Second):
			t.Error("server did not stop")
		}
	})
	select {
	case a := <-addrc:
		return "http://" + a.String(), nil
	case err := <-errc:
		errc <- err // for the cleanup
		return "", err
	case <-time.After(60 * time.Second):
		t.Fatal("server did not start")
		return "", nil
	}
}

func readyz(t *testing.T, base string) (int, map[string]any) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(base + "/readyz")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var body map[string]any
	require.NoError(t, json.Unmarshal(b, &body), string(b))
	return resp.StatusCode, body
}

// TestOlderReleaseKeepsServing: during a staged rollout the next release has migrated to a
// schema it declares compatible with this one; this replica starts and stays ready (with a
// warning), and turns not ready only if the schema stops being compatible.
func TestOlderReleaseKeepsServing(t *testing.T) {
	t.Parallel()
	latest := migrations.Latest()
	url, d := futureSchema(t, latest)
	base, err := startServer(t, url)
	require.NoError(t, err)

	status, body := readyz(t, base)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, "ready", body["status"])
	require.Contains(t, body["warnings"], "schema is at "+itoa(latest+1)+", newer than this release's "+itoa(latest)+"; compatible since "+itoa(latest))

	// A later migration that this release cannot run on: not ready at once.
	_, err = d.Exec(context.Background(), &db.Query{Name: "Incompatible", Text: "UPDATE {{schema}}.schema_migrations SET compatible_since = version WHERE version = $1"}, latest+1)
	require.NoError(t, err)
	status, body = readyz(t, base)
	require.Equal(t, http.StatusServiceUnavailable, status, body)
	require.Contains(t, body["detail"], "needs at least "+itoa(latest+1))
}

// TestOlderReleaseRefusesIncompatibleSchema: on a schema that needs a newer release, the
// replica refuses to start, naming the schema's version, its own and the minimum.
func TestOlderReleaseRefusesIncompatibleSchema(t *testing.T) {
	t.Parallel()
	latest := migrations.Latest()
	url, _ := futureSchema(t, latest+1)
	_, err := startServer(t, url)
	require.ErrorIs(t, err, db.ErrSchemaTooNew)
	require.ErrorContains(t, err, "at version "+itoa(latest+1)+", this strata knows versions up to "+itoa(latest)+", and the schema needs at least "+itoa(latest+1))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestStartMigratesLegacyScopes: a token stored by a release before target-qualified scope
// names (pillars:read:web* beside nodes:write:web*) works for what it was meant for once a
// replica has started: its pillar scope now names nodes, and the rewrite is audited.
func TestStartMigratesLegacyScopes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabaseURL(t)
	d, err := db.Open(ctx, db.Options{URL: url, MaxConns: 2, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(d.Close)
	_, err = d.Migrate(ctx)
	require.NoError(t, err)
	secret := auth.NewSecret()
	h := sha256.Sum256([]byte(secret))
	_, err = d.Exec(ctx, &db.Query{Name: "legacy", Text: `INSERT INTO {{schema}}.tokens (id, name, secret_hash, scopes, created_by)
		VALUES ('tok_legacy', 'legacy', $1, $2, 'test')`}, db.Bytes(h[:]), []string{"nodes:write:web*", "pillars:read:web*"})
	require.NoError(t, err)

	base, err := startServer(t, url)
	require.NoError(t, err)
	req, err := http.NewRequest("GET", base+"/v1/nodes/web01/pillars", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 404, resp.StatusCode, "authorized by the migrated node/web* scope: the node does not exist")

	var scopes []string
	require.NoError(t, d.QueryRow(ctx, &db.Query{Name: "scopes", Text: `SELECT scopes FROM {{schema}}.tokens WHERE id = 'tok_legacy'`}).Scan(&scopes))
	require.Equal(t, []string{"nodes:write:web*", "pillars:read:node/web*"}, scopes)
	var n int
	require.NoError(t, d.QueryRow(ctx, &db.Query{Name: "audit", Text: `SELECT count(*) FROM {{schema}}.audit_log WHERE action = 'token.scopes.migrate' AND target = 'tok_legacy'`}).Scan(&n))
	require.Equal(t, 1, n)
}

// TestReadyReasonSameInMetric (issue 28): the reason /readyz gives and the strata_ready
// metric's label come from one function, so an alert and a balancer agree — here for a schema
// this release can no longer run on (the metric said "other" where /readyz said
// "unavailable").
func TestReadyReasonSameInMetric(t *testing.T) {
	t.Parallel()
	latest := migrations.Latest()
	url, d := futureSchema(t, latest)
	base, err := startServer(t, url)
	require.NoError(t, err)
	_, err = d.Exec(context.Background(), &db.Query{Name: "Incompatible", Text: "UPDATE {{schema}}.schema_migrations SET compatible_since = version WHERE version = $1"}, latest+1)
	require.NoError(t, err)
	status, body := readyz(t, base)
	require.Equal(t, http.StatusServiceUnavailable, status, body)
	reason, ok := body["reason"].(string)
	require.True(t, ok, body)
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var line string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "strata_ready{") {
			line = l
		}
	}
	require.Equal(t, `strata_ready{reason="`+reason+`"} 0`, line)
}
