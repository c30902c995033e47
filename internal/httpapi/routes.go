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
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/resource"
	"github.com/stratahq/strata/internal/tfstate"
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
	// MaxStateBytes limits Terraform state writes (they bypass MaxBodyBytes).
	MaxStateBytes int64
	Tokens        *auth.Service
	Resources     *resource.Service
	State         *tfstate.Service
	Ready         Readiness
	Version       string
}

// API is the HTTP handler of a strata replica.
type API struct {
	logger    *slog.Logger
	metrics   *httpMetrics
	registry  *prometheus.Registry
	maxBody   int64
	maxState  int64
	tokens    *auth.Service
	resources *resource.Service
	state     *tfstate.Service
	ready     Readiness
	version   string
	handler   http.Handler
	mux       *http.ServeMux
}

// New builds the API and its routes.
func New(opts Options) *API {
	a := &API{
		logger:    opts.Logger,
		registry:  opts.Registry,
		maxBody:   opts.MaxBodyBytes,
		maxState:  opts.MaxStateBytes,
		tokens:    opts.Tokens,
		resources: opts.Resources,
		state:     opts.State,
		ready:     opts.Ready,
		version:   opts.Version,
	}
	if a.logger == nil {
		a.logger = slog.Default()
	}
	if a.maxState < a.maxBody {
		a.maxState = a.maxBody
	}
	if a.registry == nil {
		a.registry = prometheus.NewRegistry()
	}
	a.metrics = newHTTPMetrics(a.registry)
	a.mux = a.routes()
	a.handler = a.observe(a.mux)
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
	mux.Handle("GET /version", a.serve(a.versionInfo))

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

	// Terraform/OpenTofu projects and state (the http backend protocol).
	mux.Handle("GET /v1/projects", a.authed(a.projectList))
	mux.Handle("PUT /v1/projects/{project}", a.authed(a.projectPut))
	mux.Handle("GET /v1/projects/{project}", a.authed(a.projectGet))
	mux.Handle("DELETE /v1/projects/{project}", a.authed(a.projectDelete))
	mux.Handle("POST /v1/projects/{project}/credentials", a.authed(a.projectCredentials))
	mux.Handle("GET /v1/state/{project}", a.authed(a.workspaceList))
	mux.Handle("GET /v1/state/{project}/{workspace}", a.authed(a.stateGet))
	mux.Handle("POST /v1/state/{project}/{workspace}", a.authedState(a.stateWrite))
	mux.Handle("PUT /v1/state/{project}/{workspace}", a.authedState(a.stateWrite))
	mux.Handle("DELETE /v1/state/{project}/{workspace}", a.authed(a.stateDelete))
	mux.Handle("LOCK /v1/state/{project}/{workspace}", a.authed(a.stateLock))
	mux.Handle("UNLOCK /v1/state/{project}/{workspace}", a.authed(a.stateUnlock))
	mux.Handle("GET /v1/state/{project}/{workspace}/lock", a.authed(a.stateLockStatus))
	mux.Handle("POST /v1/state/{project}/{workspace}/lock", a.authed(a.stateLock))
	mux.Handle("DELETE /v1/state/{project}/{workspace}/lock", a.authed(a.stateUnlock))
	mux.Handle("GET /v1/state/{project}/{workspace}/versions", a.authed(a.versionList))
	mux.Handle("GET /v1/state/{project}/{workspace}/versions/{n}", a.authed(a.versionGet))
	mux.Handle("POST /v1/state/{project}/{workspace}/versions/{n}/restore", a.authed(a.versionRestore))

	// Everything else under /v1 still needs a token (401 before 404, so the API's shape is
	// not revealed to anonymous callers); outside /v1 it is a plain 404.
	mux.Handle("/v1/", a.authed(func(w http.ResponseWriter, r *http.Request, _ *auth.Principal) error {
		return a.unmatched(w, r)
	}))
	mux.Handle("/", a.serve(a.unmatched))
	return mux
}

// probeMethods are the methods the catch-all routes probe to tell "no such path" (404) from
// "no such method on this path" (405 with Allow).
var probeMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "LOCK", "UNLOCK"}

// unmatched answers requests no specific route took. The catch-all patterns match every
// method, so ServeMux never produces its own 405; this does, as a problem document.
func (a *API) unmatched(w http.ResponseWriter, r *http.Request) error {
	var allowed []string
	for _, m := range probeMethods {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := a.mux.Handler(probe); pattern != "" && pattern != "/" && pattern != "/v1/" {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		return fault.New(fault.KindMethodNotAllowed, "method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allowed, ", "))
	}
	return notFound(w, r)
}
