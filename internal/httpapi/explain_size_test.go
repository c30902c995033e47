package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
)

// TestExplainAndConsoleLinearInTheRow (review of issue 27, "What to build" 4): a row two
// levels deep — one long key, many short leaves under it — is within every limit, yet the
// explained render repeats the long key in every leaf's path, and so does the console's node
// page (its tree rows carry their paths): (key length × leaves) bytes. With an 8 MiB body that
// is terabytes for one GET by a token holding pillars:write and pillars:render on one node.
// Here a 32 KB key and 1,000 leaves (a 40 KB row) must not make answers of more than a small
// multiple of the row.
func TestExplainAndConsoleLinearInTheRow(t *testing.T) {
	t.Parallel()
	d := pgtest.NewDB(t)
	tokens := auth.NewService(d)
	admin, err := tokens.Bootstrap(context.Background(), "")
	require.NoError(t, err)
	pillars := pillar.NewService(d)
	pillars.UseKeys(testKeys(t))
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Tokens: tokens, Resources: resource.NewService(d), Pillars: pillars,
		Version: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	b := &testBundle{srv: srv, admin: admin, tokens: tokens}
	must := func(status int, method, path, body string) {
		t.Helper()
		r := b.do(t, method, path, b.admin, strings.NewReader(body))
		require.Equal(t, status, r.status, "%s %s: %.300s", method, path, r.body)
	}
	must(201, "POST", "/v1/orgs", `{"metadata":{"name":"acme"}}`)
	must(201, "POST", "/v1/nodes", `{"metadata":{"name":"web01"},"spec":{"org":"acme"}}`)
	leaves := map[string]any{}
	for i := 0; i < 1000; i++ {
		leaves[fmt.Sprintf("l%d", i)] = 1
	}
	row, err := json.Marshal(map[string]any{strings.Repeat("k", 32<<10): leaves})
	require.NoError(t, err)
	must(201, "PUT", "/v1/nodes/web01/pillars/wide", string(row))
	size := len(row)

	r := b.do(t, "GET", "/v1/nodes/web01/pillar?explain=true", b.admin, nil)
	require.Equal(t, 200, r.status, "%.300s", r.body)
	assert.LessOrEqual(t, len(r.body), 16*size, "explain: %d bytes for a %d-byte row", len(r.body), size)

	// Past the path budget the paths are front-coded, and still name every leaf: each is the
	// previous one's first "shared" bytes followed by "rest".
	var ex struct {
		Explain []struct {
			Path   *string `json:"path"`
			Shared int     `json:"shared"`
			Rest   string  `json:"rest"`
			SetBy  struct{ Target, Category string }
		} `json:"explain"`
	}
	require.NoError(t, json.Unmarshal(r.body, &ex))
	require.Len(t, ex.Explain, 1000)
	var paths []string
	prev := ""
	for _, e := range ex.Explain {
		require.Nil(t, e.Path, "front-coded entries carry no whole path")
		require.LessOrEqual(t, e.Shared, len(prev))
		prev = prev[:e.Shared] + e.Rest
		paths = append(paths, prev)
		require.Equal(t, "node/web01", e.SetBy.Target)
		require.Equal(t, "wide", e.SetBy.Category)
	}
	require.True(t, sort.StringsAreSorted(paths), "explanations sorted by path")
	require.Equal(t, "/"+strings.Repeat("k", 32<<10)+"/l0", paths[0])
	require.Equal(t, "/"+strings.Repeat("k", 32<<10)+"/l999", paths[999])

	cc := newConsoleClient(t, b.srv.URL)
	cc.signIn(b.admin)
	status, _, body := cc.get("/ui/nodes/web01")
	require.Equal(t, 200, status)
	require.LessOrEqual(t, len(body), 16*size+64<<10, "console node page: %d bytes for a %d-byte row", len(body), size)
	// Every leaf still says where it came from; rows past the page's path budget carry no
	// data-path.
	require.Equal(t, 1000, strings.Count(body, ">node/web01 · wide</a>"), "every leaf's row names its row")
	require.Less(t, strings.Count(body, "data-path="), 1001)

	// A pillar within the budget keeps whole paths, as before.
	must(201, "PUT", "/v1/nodes/web01/pillars/small", `{"apache": {"port": 8080}}`)
	must(204, "DELETE", "/v1/nodes/web01/pillars/wide", "")
	r = b.do(t, "GET", "/v1/nodes/web01/pillar?explain=true", b.admin, nil)
	require.Equal(t, 200, r.status, "%.300s", r.body)
	require.JSONEq(t, `{"pillar": {"apache": {"port": 8080}}, "explain": [{"path": "/apache/port", "setBy": {"target": "node/web01", "category": "small"}}]}`, string(r.body))
	status, _, body = cc.get("/ui/nodes/web01")
	require.Equal(t, 200, status)
	require.Contains(t, body, `data-path="/apache/port"`)
}
