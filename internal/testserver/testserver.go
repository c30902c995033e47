// Package testserver serves the whole strata API (objects and kinds, pillars with an
// encryption key, Terraform state, watches) on a throwaway PostgreSQL database, for the tests
// of packages that talk to strata over HTTP as its users do — the public Go client's tests and
// runnable examples. The caller's TestMain must be pgtest.Main (or call pgtest.Run).
//
// It is the real server: the same handlers, the same database. The one addition is FailNext,
// which answers the next requests with a 503 and a Retry-After as a replica that is going
// away does, so a client's retries can be tested without stopping a database.
package testserver

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
	"github.com/stratahq/strata/internal/secret"
	"github.com/stratahq/strata/internal/tfstate"
)

// Server is a running API.
type Server struct {
	// URL is the server's base URL (http://127.0.0.1:port).
	URL string
	// Token is an admin token's secret.
	Token string
	// Tokens creates more (scoped) tokens.
	Tokens *auth.Service

	srv      *httptest.Server
	stopHub  context.CancelFunc
	hubDone  chan struct{}
	failing  atomic.Int64
	failWith atomic.Value // failure
	requests atomic.Int64
	cleanups []func()
	mu       sync.Mutex
}

type failure struct {
	retryAfter, reason, outcome string
}

// Start serves the API on a fresh database until t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := start(t)
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// StartDetached serves the API on a fresh database until Close, for the code of a runnable
// example (which has no *testing.T).
func StartDetached() (*Server, error) {
	tb := &detachedTB{}
	var s *Server
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%v", r)
			}
		}()
		s, err = start(tb)
	}()
	if err != nil {
		tb.runCleanups()
		return nil, err
	}
	s.cleanups = append(s.cleanups, tb.runCleanups)
	return s, nil
}

// Close stops a detached server and drops its database.
func (s *Server) Close() {
	s.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
	s.cleanups = nil
}

func start(t testing.TB) (*Server, error) {
	ctx := context.Background()
	d := pgtest.NewDB(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	tokens := auth.NewService(d)
	admin, err := tokens.Bootstrap(ctx, "")
	if err != nil {
		return nil, err
	}
	keys, err := newKeys()
	if err != nil {
		return nil, err
	}
	pillars := pillar.NewService(d)
	pillars.UseKeys(keys)
	st, err := tfstate.New(d, tfstate.Options{Keys: keys, Logger: quiet})
	if err != nil {
		return nil, err
	}
	if err := st.Start(ctx); err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = st.Close() }) // before the database is dropped
	res := resource.NewService(d)
	hub := resource.NewHub(res, func(ctx context.Context) (*db.Session, error) { return d.OpenSession(ctx, "testserver watch") }, quiet)
	hubCtx, stopHub := context.WithCancel(context.Background())
	s := &Server{Token: admin, Tokens: tokens, stopHub: stopHub, hubDone: make(chan struct{})}
	go func() { defer close(s.hubDone); hub.Run(hubCtx) }()
	api := httpapi.New(httpapi.Options{
		Tokens: tokens, Resources: res, Pillars: pillars, Keys: keys, State: st, Watch: hub,
		// No BOOKMARK in the few seconds a test watches: what a test sees is the changes.
		WatchBookmarkInterval: time.Hour,
		MaxBodyBytes:          1 << 20,
		Version:               "test",
		Logger:                quiet,
	})
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if s.failing.Add(-1) >= 0 {
			f := s.failWith.Load().(failure)
			unavailable(w, r, f)
			return
		}
		s.failing.Store(0)
		api.ServeHTTP(w, r)
	}))
	s.URL = s.srv.URL
	return s, nil
}

// stop ends the watches (the hub first, as a replica shutting down does) and the server.
func (s *Server) stop() {
	if s.stopHub != nil {
		s.stopHub()
		<-s.hubDone
		s.stopHub = nil
	}
	if s.srv != nil {
		s.srv.Close()
		s.srv = nil
	}
}

// FailNext makes the next n requests answer 503 with Retry-After retryAfter (seconds) and the
// problem reason reason, as the server answers when it cannot serve for a moment.
func (s *Server) FailNext(n int, retryAfter, reason string) {
	s.failWith.Store(failure{retryAfter: retryAfter, reason: reason})
	s.failing.Store(int64(n))
}

// FailNextOutcomeUnknown makes the next n requests answer as a write whose COMMIT lost its
// connection: a 503 with Retry-After retryAfter and "outcome": "unknown".
func (s *Server) FailNextOutcomeUnknown(n int, retryAfter string) {
	s.failWith.Store(failure{retryAfter: retryAfter, reason: "unavailable", outcome: "unknown"})
	s.failing.Store(int64(n))
}

// Requests counts the requests the server received.
func (s *Server) Requests() int64 { return s.requests.Load() }

// unavailable writes the problem the server writes for fault.KindUnavailable.
func unavailable(w http.ResponseWriter, r *http.Request, f failure) {
	w.Header().Set("Content-Type", "application/problem+json")
	if f.retryAfter != "" {
		w.Header().Set("Retry-After", f.retryAfter)
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	problem := map[string]any{
		"type": httpapi.ProblemTypeBase + "unavailable", "title": "Service unavailable", "status": 503,
		"detail": "the server cannot serve this request now", "instance": r.URL.Path, "reason": f.reason,
	}
	if f.outcome != "" {
		problem["outcome"] = f.outcome
	}
	_ = json.NewEncoder(w).Encode(problem)
}

func newKeys() (*secret.Keyring, error) {
	raw := make([]byte, secret.KeySize)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	k, err := secret.NewKey(raw)
	if err != nil {
		return nil, err
	}
	return secret.NewKeyring(k)
}

// detachedTB is the testing.TB of a server outside any test: failures panic (StartDetached
// turns them into its error) and cleanups run at Close. pgtest uses only these methods.
type detachedTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
}

func (*detachedTB) Helper()      {}
func (*detachedTB) Name() string { return "example" }
func (*detachedTB) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
func (*detachedTB) Fatal(args ...any) { panic(fmt.Sprint(args...)) }
func (*detachedTB) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}
func (*detachedTB) Logf(format string, args ...any) {}
func (tb *detachedTB) Cleanup(f func()) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.cleanups = append(tb.cleanups, f)
}

func (tb *detachedTB) runCleanups() {
	tb.mu.Lock()
	fs := tb.cleanups
	tb.cleanups = nil
	tb.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
