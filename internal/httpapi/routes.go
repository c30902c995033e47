// Package httpapi is strata's HTTP API: every route is registered in this file, one file
// per resource family holds its handlers, and one adapter (serve) turns the errors handlers
// return into RFC 9457 problem documents.
//
// Handlers never import pgx and never choose a status for a failure: they return errors
// categorised by internal/fault (or by internal/db for database availability) and
// writeError maps the category in one table. Success bodies are the wire types of the public
// client package, so the server and the Go client cannot drift apart.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/resource"
)

// Readiness reports whether this replica can serve: nil when ready, otherwise why not.
// Warnings are conditions that do not stop serving but that operators must see (for
// example that pg clients are not excluded because no session connection is configured).
type Readiness func(ctx context.Context) (warnings []string, err error)

// Options assemble the API from the capability services.
type Options struct {
	Logger       *slog.Logger
	Registry     *prometheus.Registry
	MaxBodyBytes int64
	Tokens       *auth.Service
	Resources    *resource.Service
	Ready        Readiness
	Version      string
}

// API is the HTTP handler of a strata replica.
type API struct {
	logger    *slog.Logger
	metrics   *httpMetrics
	registry  *prometheus.Registry
	maxBody   int64
	tokens    *auth.Service
	resources *resource.Service
	ready     Readiness
	version   string
	handler   http.Handler
}

// New builds the API and its routes.
func New(opts Options) *API {
	a := &API{
		logger:    opts.Logger,
		registry:  opts.Registry,
		maxBody:   opts.MaxBodyBytes,
		tokens:    opts.Tokens,
		resources: opts.Resources,
		ready:     opts.Ready,
		version:   opts.Version,
	}
	if a.logger == nil {
		a.logger = slog.Default()
	}
	if a.registry == nil {
		a.registry = prometheus.NewRegistry()
	}
	a.metrics = newHTTPMetrics(a.registry)
	a.handler = a.observe(a.problemForMuxErrors(a.routes()))
	return a
}

// ServeHTTP serves the API.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.handler.ServeHTTP(w, r) }

// routes registers every route strata serves. Go's ServeMux matches methods (including
// Terraform's LOCK and UNLOCK) and answers a known path with a wrong method with 405 and
// an Allow header.
func (a *API) routes() *http.ServeMux {
	mux := http.NewServeMux()

	// Operations: no token needed.
	mux.Handle("GET /healthz", a.serve(a.healthz))
	mux.Handle("GET /readyz", a.serve(a.readyz))
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{}))
	mux.Handle("GET /v1/version", a.serve(a.versionInfo))

	// Tokens and audit.
	mux.Handle("POST /v1/tokens", a.authed(a.tokenCreate))
	mux.Handle("GET /v1/tokens", a.authed(a.tokenList))
	mux.Handle("DELETE /v1/tokens/{id}", a.authed(a.tokenRevoke))
	mux.Handle("GET /v1/audit", a.authed(a.auditList))

	// Orgs.
	mux.Handle("GET /v1/orgs", a.authed(a.orgList))
	mux.Handle("POST /v1/orgs", a.authed(a.orgCreate))
	mux.Handle("GET /v1/orgs/{org}", a.authed(a.orgGet))
	mux.Handle("PUT /v1/orgs/{org}", a.authed(a.orgPut))
	mux.Handle("PATCH /v1/orgs/{org}", a.authed(a.orgPatch))
	mux.Handle("DELETE /v1/orgs/{org}", a.authed(a.orgDelete))

	// Everything else under /v1 still needs a token (401 before 404, so the API's shape is
	// not revealed to anonymous callers); outside /v1 it is a plain 404.
	mux.Handle("/v1/", a.authed(func(w http.ResponseWriter, r *http.Request, _ *auth.Principal) error {
		return notFound(w, r)
	}))
	mux.Handle("/", a.serve(notFound))
	return mux
}

// problemForMuxErrors makes the mux's own answers (405 with an Allow header) problem
// documents too. Every path is matched by some pattern ("/" catches the rest), so a request
// without a pattern is one the mux answers itself.
func (a *API) problemForMuxErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(&muxErrorWriter{ResponseWriter: w, r: r, logger: a.logger}, r)
	})
}

type muxErrorWriter struct {
	http.ResponseWriter
	r        *http.Request
	logger   *slog.Logger
	replaced bool
}

func (m *muxErrorWriter) WriteHeader(code int) {
	if code == http.StatusMethodNotAllowed {
		m.replaced = true
		m.Header().Del("Content-Length")
		writeError(m.ResponseWriter, m.r, m.logger, fault.New(fault.KindMethodNotAllowed, "method %s is not allowed on %s (allowed: %s)", m.r.Method, m.r.URL.Path, m.Header().Get("Allow")))
		return
	}
	m.ResponseWriter.WriteHeader(code)
}

func (m *muxErrorWriter) Write(b []byte) (int, error) {
	if m.replaced {
		return len(b), nil
	}
	return m.ResponseWriter.Write(b)
}
