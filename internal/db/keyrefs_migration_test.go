package db_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/db/migrations"
)

// TestKeyRefsBackfill (issue 28): migration 0031 fills key_refs from the values sealed before
// it — a secret pillar row, a history entry, a state version and an encrypted project's states
// row, each under its own key — so a database upgraded from 30 is checked like a new one.
func TestKeyRefsBackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := emptyDB(t)
	all, err := migrations.Embedded()
	require.NoError(t, err)
	var upTo30 []db.Migration
	for _, m := range all {
		if m.Version <= 30 {
			upTo30 = append(upTo30, m)
		}
	}
	_, err = d.MigrateWith(ctx, db.MigrateOptions{Migrations: upTo30})
	require.NoError(t, err)

	sealed := func(id string) []byte { // a sealed value's header: "sv1", the key id, then more
		b := append([]byte("sv1"), mustHex(t, id)...)
		return append(b, make([]byte, 80)...)
	}
	state := func(id string) string { return "strata:sv1:" + base64.StdEncoding.EncodeToString(sealed(id)) }
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{"INSERT INTO {{schema}}.pillars (target_kind, category, data, sealed) VALUES ('global', 'creds', '{}', $1)", []any{db.Bytes(sealed("00000000000000a1"))}},
		{"INSERT INTO {{schema}}.pillar_history (target, category, revision, old_data, new_data, old_sealed, new_sealed, actor) VALUES ('global', 'creds', 1, '{}', '{}', $1, $2, 't')",
			[]any{db.Bytes(sealed("00000000000000a2")), db.Bytes(sealed("00000000000000a3"))}},
		{"INSERT INTO {{schema}}.tf_projects (name, created_by, encrypted) VALUES ('enc', 't', true)", nil},
		{"INSERT INTO {{schema}}.tf_state_versions (project, workspace, n, md5, size, data, source, created_by) VALUES ('enc', 'default', 1, '', 1, $1, 'http', 't')", []any{state("00000000000000a4")}},
		{"CREATE SCHEMA enc", nil},
		{"CREATE TABLE enc.states (id bigserial PRIMARY KEY, name text, data text)", nil},
		{"INSERT INTO enc.states (name, data) VALUES ('default', $1)", []any{state("00000000000000a5")}},
		{"INSERT INTO enc.states (name, data) VALUES ('plain', '{\"version\":4}')", nil},
	} {
		_, err := d.Exec(ctx, &db.Query{Name: "seed", Text: stmt.sql}, stmt.args...)
		require.NoError(t, err, stmt.sql)
	}
	_, err = d.Migrate(ctx)
	require.NoError(t, err)
	rows, err := d.Query(ctx, &db.Query{Name: "refs", Text: "SELECT key_id FROM {{schema}}.key_refs ORDER BY key_id"})
	require.NoError(t, err)
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		got = append(got, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"00000000000000a1", "00000000000000a2", "00000000000000a3", "00000000000000a4", "00000000000000a5"}, got)
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	return b
}
