package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/db/migrations"
	"github.com/stratahq/strata/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// runCLI runs strata with args, bounded so a wait that should time out cannot hang the test.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code = Main(ctx, args, &out, &errb)
	require.NoError(t, ctx.Err(), "the command finished on its own")
	return code, out.String(), errb.String()
}

// TestMigrateCommands: migrate status shows each migration's compatible-since and marks a
// newer schema's rows; migrate up on a compatible newer schema applies nothing and says so;
// --migration-lock-timeout reaches the runner.
func TestMigrateCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabaseURL(t)
	d, err := db.Open(ctx, db.Options{URL: url, MaxConns: 2, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(d.Close)
	latest := migrations.Latest()
	_, err = d.Exec(ctx, &db.Query{Name: "Future", Text: "INSERT INTO {{schema}}.schema_migrations (version, name, compatible_since) VALUES ($1, 'next_release', $2)"}, latest+1, latest)
	require.NoError(t, err)

	code, out, stderr := runCLI(t, "migrate", "status", "--database-url", url, "-o", "json")
	require.Zero(t, code, stderr)
	var list struct {
		Items []struct {
			Version         int64  `json:"version"`
			CompatibleSince int64  `json:"compatibleSince"`
			Status          string `json:"status"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	rows := list.Items
	require.Len(t, rows, int(latest)+1)
	require.Equal(t, int64(1), rows[0].CompatibleSince)
	require.Equal(t, latest, rows[latest].CompatibleSince)
	require.Equal(t, "applied, newer than this strata", rows[latest].Status)

	code, out, stderr = runCLI(t, "migrate", "up", "--database-url", url)
	require.Zero(t, code, stderr)
	require.Contains(t, out, "nothing to apply: schema is at")

	code, _, stderr = runCLI(t, "migrate", "up", "--database-url", url, "--migration-lock-timeout", "-1s")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "--migration-lock-timeout -1s: must not be negative")

	// A session holding schema_migrations exclusively: migrate up gives up after the flag's
	// timeout (the default is 5s, so the message proves the flag reached the runner).
	hold, held, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_ = d.InTx(ctx, func(tx *db.Tx) error {
			_, err := tx.Exec(ctx, &db.Query{Name: "Hold", Text: "LOCK TABLE {{schema}}.schema_migrations IN ACCESS EXCLUSIVE MODE"})
			close(held)
			<-hold
			return err
		})
	}()
	t.Cleanup(func() { close(hold); <-done })
	<-held
	code, _, stderr = runCLI(t, "migrate", "up", "--database-url", url, "--migration-lock-timeout", "300ms")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "waited longer than the migration lock timeout (300ms)")
}
