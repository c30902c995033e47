package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/resource"
	"github.com/stratahq/strata/internal/tfstate"
)

// TestFrozenKeeperAPI: with the lock keeper's PostgreSQL backend frozen (SIGSTOP), a LOCK
// answers a 503 problem within ~6 s (the keeper wait bound of 5 s), 25 LOCKs waiting at
// once do not starve the pool (4 connections), so GET /v1/orgs still answers, /readyz warns
// at once, and after SIGCONT LOCK works again and the lock taken before is still there.
// With the keeper's old mutex (no deadline, waited for inside the LOCK transaction) every
// LOCK hangs holding a pool connection and the API stops: the bounds below fail.
func TestFrozenKeeperAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabaseURL(t)
	d, err := db.Open(ctx, db.Options{URL: url, MaxConns: 4, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(d.Close)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := tfstate.New(d, tfstate.Options{SessionURL: url, Logger: quiet, HeartbeatInterval: 200 * time.Millisecond, KeeperTimeout: time.Minute})
	require.NoError(t, err)
	require.NoError(t, st.Start(ctx))
	t.Cleanup(func() { _ = st.Close() })
	tokens := auth.NewService(d)
	secret, err := tokens.Bootstrap(ctx, "")
	require.NoError(t, err)
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Tokens: tokens, Resources: resource.NewService(d), State: st,
		Logger: quiet, MaxBodyBytes: 1 << 20, MaxStateBytes: 1 << 20,
		Ready: func(ctx context.Context) ([]string, error) {
			if r := st.Readiness(ctx); !r.PGClientsExcluded {
				return []string{"terraform state: " + r.Detail}, nil
			}
			return nil, nil
		}}))
	t.Cleanup(srv.Close)
	b := &testBundle{srv: srv, admin: secret, tokens: tokens}
	require.Equal(t, 201, b.do(t, "PUT", "/v1/projects/net", secret, nil).status)
	lock := func(id string) string { return `{"ID":"` + id + `","Operation":"OperationTypeApply","Who":"a@h"}` }
	require.Equal(t, 200, b.do(t, "LOCK", "/v1/state/net/held", secret, strings.NewReader(lock("H"))).status)

	pid := int(st.Readiness(ctx).KeeperPID)
	require.NotZero(t, pid)
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP), "freezing the keeper's backend needs the test cluster on this machine")
	var once sync.Once
	thaw := func() { once.Do(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) }
	t.Cleanup(thaw)

	hc := &http.Client{Timeout: 15 * time.Second}
	raw := func(method, path, body string) (int, string, error) {
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), nil
	}

	require.Eventually(t, func() bool {
		r := b.do(t, "GET", "/readyz", "", nil)
		return r.status == 200 && strings.Contains(string(r.body), "has not answered")
	}, 5*time.Second, 100*time.Millisecond, "/readyz warns without waiting for the keeper")

	start := time.Now()
	r := b.do(t, "LOCK", "/v1/state/net/frozen", secret, strings.NewReader(lock("F")))
	problem(t, r, 503, "unavailable")
	require.Less(t, time.Since(start), 7*time.Second)

	type result struct {
		status int
		ct     string
		err    error
	}
	results := make(chan result, 25)
	for i := range 25 {
		go func() {
			s, ct, err := raw("LOCK", fmt.Sprintf("/v1/state/net/w%d", i), lock(fmt.Sprintf("W%d", i)))
			results <- result{s, ct, err}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	start = time.Now()
	require.Equal(t, 200, b.do(t, "GET", "/v1/orgs", secret, nil).status, "other endpoints keep answering")
	require.Less(t, time.Since(start), 3*time.Second)
	require.Equal(t, 200, b.do(t, "GET", "/readyz", "", nil).status)
	for range 25 {
		select {
		case res := <-results:
			require.NoError(t, res.err)
			require.Equal(t, 503, res.status)
			require.Equal(t, "application/problem+json", res.ct)
		case <-time.After(15 * time.Second):
			t.Fatal("a LOCK did not answer")
		}
	}

	thaw()
	require.Eventually(t, func() bool { return st.Readiness(ctx).PGClientsExcluded }, 15*time.Second, 50*time.Millisecond)
	require.Equal(t, 200, b.do(t, "LOCK", "/v1/state/net/after", secret, strings.NewReader(lock("A"))).status)
	r = b.do(t, "LOCK", "/v1/state/net/held", secret, strings.NewReader(lock("X")))
	require.Equal(t, 423, r.status, "the lock taken before the freeze is kept")
	r = b.do(t, "GET", "/v1/state/net/held/lock", secret, nil)
	require.Contains(t, string(r.body), `"protected":true`)
}
