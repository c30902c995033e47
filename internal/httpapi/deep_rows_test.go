package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
)

// TestDeepStoredRowStaysLinear (issue 27, finding 7, read side): a row stored before the
// depth limit, nested 5,000 levels deep (put into the database directly, past the check),
// still renders, and every page and file written from it grows linearly with it: before, the
// console indented each level on its own line (a 60 KB row nested 9,990 deep made an 803 MB
// page) and so did the Salt-tree export (190 MiB). Its history entry cannot be restored: a
// restore is a write.
func TestDeepStoredRowStaysLinear(t *testing.T) {
	t.Parallel()
	d := pgtest.NewDB(t)
	tokens := auth.NewService(d)
	admin, err := tokens.Bootstrap(context.Background(), "")
	require.NoError(t, err)
	pillars := pillar.NewService(d)
	pillars.UseKeys(testKeys(t))
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Tokens: tokens, Resources: resource.NewService(d), Pillars: pillars,
		MaxBodyBytes: 64 << 10, Version: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	b := &testBundle{srv: srv, admin: admin, tokens: tokens}
	must := func(status int, method, path, body string) {
		t.Helper()
		r := b.do(t, method, path, b.admin, strings.NewReader(body))
		require.Equal(t, status, r.status, "%s %s: %s", method, path, r.body)
	}
	must(201, "POST", "/v1/orgs", `{"metadata":{"name":"acme"}}`)
	must(201, "POST", "/v1/nodes", `{"metadata":{"name":"web01"},"spec":{"org":"acme"}}`)
	must(201, "PUT", "/v1/nodes/web01/pillars/deep", `{"seed":1}`)
	must(200, "PUT", "/v1/nodes/web01/pillars/deep", `{"seed":2}`)
	must(201, "PUT", "/v1/pillars/global/app", `{"port":80}`)

	const levels = 5000
	deep := deepObject(levels)
	ctx := context.Background()
	q := func(text string) *db.Query { return &db.Query{Name: "deep_rows_test", Text: text} }
	n, err := d.Exec(ctx, q(`UPDATE strata.pillars SET data = $1::jsonb WHERE category = 'deep'`), deep)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	n, err = d.Exec(ctx, q(`UPDATE strata.pillar_history SET new_data = $1::jsonb WHERE category = 'deep' AND revision = 1`), deep)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	pillars.InvalidateCache()
	size := len(deep)

	// It renders, merged and explained.
	r := b.do(t, "GET", "/v1/nodes/web01/pillar", b.admin, nil)
	require.Equal(t, 200, r.status, "%.300s", r.body)
	require.Contains(t, string(r.body), `{"leaf":1}`)
	require.LessOrEqual(t, len(r.body), 2*size)
	r = b.do(t, "GET", "/v1/nodes/web01/pillar?explain=true", b.admin, nil)
	require.Equal(t, 200, r.status, "%.300s", r.body)
	require.LessOrEqual(t, len(r.body), 8*size, "the explanation holds the leaf's path once")

	// The console's pages of the row and of the node.
	cc := newConsoleClient(t, b.srv.URL)
	cc.signIn(b.admin)
	for _, page := range []string{"/ui/pillar?target=node/web01&category=deep", "/ui/nodes/web01"} {
		status, _, body := cc.get(page)
		require.Equal(t, 200, status, page)
		require.Contains(t, body, "leaf", page)
		require.LessOrEqual(t, len(body), 16*size+64<<10, "%s: %d bytes for a %d-byte row", page, len(body), size)
	}

	// The Salt-tree export.
	r = b.do(t, "GET", "/v1/pillars:export?org=acme", b.admin, nil)
	require.Equal(t, 200, r.status, "%.300s", r.body)
	var exp pillar.Export
	require.NoError(t, json.Unmarshal(r.body, &exp))
	var file string
	for name, content := range exp.Files {
		if strings.Contains(content, `"leaf"`) {
			file = name
		}
	}
	require.NotEmpty(t, file, "the deep row is exported")
	require.LessOrEqual(t, len(exp.Files[file]), 4*size, "%s: %d bytes for a %d-byte row", file, len(exp.Files[file]), size)
	require.LessOrEqual(t, len(r.body), 16*size+64<<10)

	// Restoring the deep history entry writes it anew: refused, naming the pointer.
	p := problem(t, b.do(t, "POST", "/v1/nodes/web01/pillars/deep/history/1/restore", b.admin, nil), 422, "unprocessable")
	require.NotEmpty(t, p.Errors)
	require.Equal(t, deepPointer(129), p.Errors[0].Field)

	// A comb stored before the limit (a leaf beside the next level, 3,000 levels): its leaves'
	// whole paths add up to (levels²) bytes, so the explanation is front-coded and the node
	// page gives few rows a path; both stay a small multiple of the rows.
	must(201, "PUT", "/v1/nodes/web01/pillars/comb", `{"seed":1}`)
	comb := combObject(3000)
	n, err = d.Exec(ctx, q(`UPDATE strata.pillars SET data = $1::jsonb WHERE category = 'comb'`), comb)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	pillars.InvalidateCache()
	rows := size + len(comb)
	r = b.do(t, "GET", "/v1/nodes/web01/pillar?explain=true", b.admin, nil)
	require.Equal(t, 200, r.status, "%.300s", r.body)
	require.LessOrEqual(t, len(r.body), 16*rows, "explain: %d bytes for %d bytes of rows", len(r.body), rows)
	status, _, body := cc.get("/ui/nodes/web01")
	require.Equal(t, 200, status)
	require.LessOrEqual(t, len(body), 16*rows+64<<10, "console node page: %d bytes for %d bytes of rows", len(body), rows)
}

// combObject is {"l":1,"a":{"l":1,"a":…{"l":1}}}, levels deep: one leaf on every level.
func combObject(levels int) string {
	return strings.Repeat(`{"l":1,"a":`, levels-1) + `{"l":1}` + strings.Repeat("}", levels-1)
}
