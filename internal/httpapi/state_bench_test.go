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
	"github.com/stratahq/strata/internal/secret"
	"github.com/stratahq/strata/internal/tfstate"
)

// stateBench is an in-process strata API with the state service and its lock keeper.
type stateBench struct {
	url   string
	token string
}

func newStateBench(b *testing.B, projects int) *stateBench {
	b.Helper()
	return newStateBenchKeys(b, projects, nil)
}

// newStateBenchKeys is newStateBench with an encryption keyring: with keys, the projects
// are created encrypted.
func newStateBenchKeys(b *testing.B, projects int, keys *secret.Keyring) *stateBench {
	b.Helper()
	ctx := context.Background()
	url := pgtest.NewDatabaseURL(b)
	d, err := db.Open(ctx, db.Options{URL: url, MaxConns: 32})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(d.Close)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := tfstate.New(d, tfstate.Options{SessionURL: url, Logger: quiet, Keys: keys})
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
		if _, _, err := st.ProjectCreate(ctx, tfstate.Actor{Name: "bench"}, fmt.Sprintf("p%02d", i), tfstate.ProjectOptions{Encryption: keys != nil}); err != nil {
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

// benchState is a state of n terraform_data resources, each with a 64-byte attribute (about
// 300 bytes per resource), the size range of a small to medium real workspace.
func benchState(serial, n int) []byte {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `{"version":4,"terraform_version":"1.11.4","serial":%d,"lineage":"bench","outputs":{"x":{"value":"y","type":"string"}},"resources":[`, serial)
	for i := range n {
		if i > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `{"mode":"managed","type":"terraform_data","name":"r%d","provider":"provider[\"terraform.io/builtin/terraform\"]","instances":[{"schema_version":0,"attributes":{"id":"%08d-0000-0000-0000-000000000000","input":"%064d"}}]}`, i, i, i)
	}
	buf.WriteString("]}\n")
	return buf.Bytes()
}

// BenchmarkStateGetPost measures the http backend's GET and POST of a state of about 30 KB
// (100 resources), on a plain project and on an encrypted one (AES-256-GCM seal on write,
// open on read, and the versions trigger fed the plaintext's metadata), one client.
// docs/benchmarks.md, "Encrypted projects", records the ratios.
func BenchmarkStateGetPost(b *testing.B) {
	raw := make([]byte, secret.KeySize)
	for i := range raw {
		raw[i] = byte(i)
	}
	key, err := secret.NewKey(raw)
	if err != nil {
		b.Fatal(err)
	}
	keys, err := secret.NewKeyring(key)
	if err != nil {
		b.Fatal(err)
	}
	for _, encrypted := range []bool{false, true} {
		var ring *secret.Keyring
		if encrypted {
			ring = keys
		}
		b.Run(fmt.Sprintf("op=GET/encrypted=%v", encrypted), func(b *testing.B) {
			s := newStateBenchKeys(b, 1, ring)
			c := &http.Client{}
			s.call(b, c, "POST", "/v1/state/p00/default", benchState(1, 100), 200)
			b.ResetTimer()
			for range b.N {
				s.call(b, c, "GET", "/v1/state/p00/default", nil, 200)
			}
		})
		b.Run(fmt.Sprintf("op=POST/encrypted=%v", encrypted), func(b *testing.B) {
			s := newStateBenchKeys(b, 1, ring)
			c := &http.Client{}
			bodies := make([][]byte, 0, 64)
			for i := range 64 {
				bodies = append(bodies, benchState(i+1, 100))
			}
			serial := 0
			b.ResetTimer()
			for range b.N {
				serial++
				var body []byte
				if serial <= len(bodies) {
					body = bodies[serial-1]
				} else {
					b.StopTimer()
					body = benchState(serial, 100)
					b.StartTimer()
				}
				s.call(b, c, "POST", "/v1/state/p00/default", body, 200)
			}
		})
	}
}
