package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/resource"
	"github.com/stratahq/strata/internal/tfstate"
)

// stateBench is an in-process strata API with the state service and its lock keeper.
type stateBench struct {
	url   string
	token string
}

func newStateBench(b *testing.B, projects int) *stateBench {
	b.Helper()
	ctx := context.Background()
	url := pgtest.NewDatabaseURL(b)
	d, err := db.Open(ctx, db.Options{URL: url, MaxConns: 32})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(d.Close)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := tfstate.New(d, tfstate.Options{SessionURL: url, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	tokens := auth.NewService(d)
	secret, err := tokens.Bootstrap(ctx, "")
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Tokens: tokens, Resources: resource.NewService(d), State: st, Logger: quiet, MaxBodyBytes: 1 << 20}))
	b.Cleanup(srv.Close)
	for i := range projects {
		if _, _, err := st.ProjectPut(ctx, tfstate.Actor{Name: "bench"}, fmt.Sprintf("p%02d", i)); err != nil {
			b.Fatal(err)
		}
	}
	return &stateBench{url: srv.URL, token: secret}
}

func (s *stateBench) call(b *testing.B, c *http.Client, method, path string, body []byte, want int) {
	req, _ := http.NewRequest(method, s.url+path, bytes.NewReader(body))
	req.SetBasicAuth("terraform", s.token)
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		b.Fatalf("%s %s: %d, want %d", method, path, resp.StatusCode, want)
	}
}

// BenchmarkLockUnlock measures one LOCK + UNLOCK round trip pair on an existing workspace,
// through HTTP, with the lock keeper holding the pg-client key of every lock.
func BenchmarkLockUnlock(b *testing.B) {
	s := newStateBench(b, 1)
	c := &http.Client{}
	state := []byte(`{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"bench","outputs":{},"resources":[]}`)
	s.call(b, c, "POST", "/v1/state/p00/default", state, 200)
	b.ResetTimer()
	for i := range b.N {
		info := []byte(fmt.Sprintf(`{"ID":"lock-%d","Operation":"OperationTypeApply","Who":"bench"}`, i))
		s.call(b, c, "LOCK", "/v1/state/p00/default", info, 200)
		s.call(b, c, "UNLOCK", "/v1/state/p00/default", info, 200)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lock+unlock/s")
}

// BenchmarkFirstWrites creates new workspaces by their first write (which takes the
// workspace-creation keys of both pg-client generations, shared and only for the creating
// transaction). projects=1 writes them one project at a time; projects=50 writes into 50
// projects from 50 concurrent clients. If creations in different projects waited on each
// other, ns/op would not fall with concurrency.
func BenchmarkFirstWrites(b *testing.B) {
	for _, projects := range []int{1, 50} {
		b.Run(fmt.Sprintf("projects=%d", projects), func(b *testing.B) {
			s := newStateBench(b, projects)
			var seq atomic.Int64
			state := []byte(`{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"bench","outputs":{},"resources":[]}`)
			b.ResetTimer()
			var wg sync.WaitGroup
			per := (b.N + projects - 1) / projects
			for p := range projects {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := &http.Client{}
					for range per {
						ws := fmt.Sprintf("w%d", seq.Add(1))
						s.call(b, c, "POST", fmt.Sprintf("/v1/state/p%02d/%s", p, ws), state, 200)
					}
				}()
			}
			wg.Wait()
		})
	}
}
