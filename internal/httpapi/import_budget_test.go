package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
)

// aliasBombSLS is a few KB of YAML whose aliases copy a 1,000-byte string 10^levels times.
func aliasBombSLS(levels int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "s: &s %s\n", strings.Repeat("x", 1000))
	prev := "s"
	for i := 1; i <= levels; i++ {
		name := fmt.Sprintf("l%d", i)
		fmt.Fprintf(&b, "%s: &%s [%s]\n", name, name, strings.TrimSuffix(strings.Repeat("*"+prev+", ", 10), ", "))
		prev = name
	}
	return b.String()
}

// TestPillarImportAliasBombIsRefused (issue 27, finding 5): a 4 KB Salt tree whose YAML
// aliases expand to 100 MB is a 413 naming the file and line where it passes the body limit,
// dry run included, and the server allocates no more than three times the limit for it
// (before, the import built the 100 MB row and encoded it).
//
// It is not parallel on purpose: it measures the allocations of the whole process around
// one request, which other tests running at the same time would add to. Go runs every
// sequential test before the parallel ones start.
func TestPillarImportAliasBombIsRefused(t *testing.T) {
	const limit = 1 << 20
	d := pgtest.NewDB(t)
	tokens := auth.NewService(d)
	admin, err := tokens.Bootstrap(context.Background(), "")
	require.NoError(t, err)
	pillars := pillar.NewService(d)
	pillars.UseKeys(testKeys(t))
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Tokens: tokens, Resources: resource.NewService(d), Pillars: pillars,
		MaxBodyBytes: limit, Version: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	b := &testBundle{srv: srv, admin: admin, tokens: tokens}

	body, err := json.Marshal(map[string]any{"files": map[string]string{
		"top.sls":    "base:\n  '*':\n    - common\n    - big\n",
		"common.sls": "motd: hello\n",
		"big.sls":    aliasBombSLS(5),
	}})
	require.NoError(t, err)
	require.Less(t, len(body), 8<<10)

	for _, path := range []string{"/v1/pillars:import?dryRun=true", "/v1/pillars:import"} {
		// Warm up what a first request allocates once (connections, prepared statements).
		b.do(t, "GET", "/v1/pillars/global", b.admin, nil)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r := b.do(t, "POST", path, b.admin, strings.NewReader(string(body)))
		runtime.ReadMemStats(&after)

		grew := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %d bytes allocated", path, grew)
		require.LessOrEqual(t, grew, uint64(3*limit), "%s allocated %d bytes for a request over a %d-byte limit", path, grew, limit)
		p := problem(t, r, 413, "too-large")
		require.Contains(t, p.Detail, "big.sls:4:", "the file and the line whose aliases pass the limit: l3, a megabyte of copies")
		require.Contains(t, p.Detail, fmt.Sprint(limit))
		require.NotEmpty(t, p.Errors)
		require.Equal(t, "/files/big.sls", p.Errors[0].Field)
	}
	problem(t, b.do(t, "GET", "/v1/pillars/global/big", b.admin, nil), 404, "not-found")
}
