// Package httpapi is strata's HTTP API. Every route is a row of the table in this file
// ({pattern, family, verb, name source, handler}); serveRoute authorizes a request as its row
// says before the handler runs, so no route can be added without saying who may call it. The
// routes of orgs, nodes, groups (and later user kinds) are derived from their kind
// descriptors and served by one set of generic handlers (resources.go); one adapter (serve)
// turns the errors handlers return into RFC 9457 problem documents.
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
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/kind"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
	"github.com/stratahq/strata/internal/secret"
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
	// BulkBufferBytes bounds the input one bulk apply holds before it is written
	// (DefaultBulkBufferBytes when zero); see bulkBudget.
	BulkBufferBytes int64
	Tokens          *auth.Service
	Resources       *resource.Service
	// Kinds is the schema registry; nil builds one over Resources' database and connects it
	// to Resources (UseSchemas). When given, the caller has connected it.
	Kinds   *kind.Service
	Pillars *pillar.Service
	// Keys are the replica's key-encryption keys, for GET /v1/keys and rotations (nil: none).
	Keys *secret.Keyring
	// KeyRecord is the database's record of the keys its values reference (package keyref),
	// for GET /v1/keys and rotations (nil: the counts alone).
	KeyRecord KeyRecord
	// SaltLegacyClients may render pillars through /v1/salt/pillar without a token (Salt
	// 3005 and older cannot send one); empty by default.
	SaltLegacyClients []netip.Prefix
	// TrustedProxies are the peers (load balancers, reverse proxies) whose X-Forwarded-For
	// or Forwarded header names the client; from any other peer the header is ignored.
	TrustedProxies []netip.Prefix
	// SaltRenderTimeout bounds a Salt-facing render (DefaultSaltRenderTimeout when zero).
	SaltRenderTimeout time.Duration
	State             *tfstate.Service
	Ready             Readiness
	// Status reports the replica's checks for GET /v1/status (admin); nil answers 404.
	Status  func(ctx context.Context) (any, error)
	Version string

	// Watch is the replica's change poller; nil answers ?watch=true with 503.
	Watch *resource.Hub
	// WatchBookmarkInterval is how often a watch sends a BOOKMARK
	// (DefaultWatchBookmarkInterval when zero).
	WatchBookmarkInterval time.Duration
	// WatchMaxDuration is the shortest lifetime of a watch stream; each stream gets a random
	// one in [d, 2d) (DefaultWatchMaxDuration when zero).
	WatchMaxDuration time.Duration
	// WatchRecheckInterval is how often an open watch re-checks its token (auth.CacheTTL
	// when zero).
	WatchRecheckInterval time.Duration
	// WatchHeadWait is how long a watch from beyond the newest committed resourceVersion
	// waits for it before answering 504 (DefaultWatchHeadWait when zero).
	WatchHeadWait time.Duration
}

// API is the HTTP handler of a strata replica.
type API struct {
	logger   *slog.Logger
	metrics  *httpMetrics
	registry *prometheus.Registry
	maxBody  int64
	maxState int64
	// bulkInputPeak is the most line bytes any bulk apply has held (see bulkBudget.input).
	bulkInputPeak atomic.Int64
	// bulkBuffer is the budget of one bulk apply; bulkPeak the most any has held.
	bulkBuffer int64
	bulkPeak   atomic.Int64
	tokens     *auth.Service
	resources  *resource.Service
	kinds      *kind.Service
	pillars    *pillar.Service
	// keys are the replica's key-encryption keys (nil: none).
	keys        *secret.Keyring
	keyRecord   KeyRecord
	saltLegacy  []netip.Prefix
	trusted     []netip.Prefix
	status      func(ctx context.Context) (any, error)
	saltTimeout time.Duration
	state       *tfstate.Service
	ready       Readiness
	version     string
	handler     http.Handler
	mux         *http.ServeMux
	// probe is the route table's authorization without its handlers (console.go, mayCall).
	probe *http.ServeMux

	watch *resource.Hub
	// bookmarkInterval is how often a watch sends a BOOKMARK.
	bookmarkInterval time.Duration
	// watchMax, watchRecheck and watchHeadWait: see Options.
	watchMax, watchRecheck, watchHeadWait time.Duration
	// watchJitter draws the random part of a stream's lifetime in [0, d) (nil: rand.N); see
	// watchLifetime.
	watchJitter func(d time.Duration) time.Duration

	// openAPIBody is the OpenAPI document, built on its first request (openapi.go).
	openAPIOnce sync.Once
	openAPIBody []byte
	openAPIErr  error
}

// New builds the API and its routes.
func New(opts Options) *API {
	a := &API{
		logger:      opts.Logger,
		registry:    opts.Registry,
		maxBody:     opts.MaxBodyBytes,
		maxState:    opts.MaxStateBytes,
		bulkBuffer:  opts.BulkBufferBytes,
		tokens:      opts.Tokens,
		resources:   opts.Resources,
		kinds:       opts.Kinds,
		pillars:     opts.Pillars,
		keys:        opts.Keys,
		keyRecord:   opts.KeyRecord,
		saltLegacy:  opts.SaltLegacyClients,
		trusted:     opts.TrustedProxies,
		status:      opts.Status,
		saltTimeout: opts.SaltRenderTimeout,
		state:       opts.State,
		ready:       opts.Ready,
		version:     opts.Version,
	}
	if a.bulkBuffer <= 0 {
		a.bulkBuffer = DefaultBulkBufferBytes
	}
	a.watch, a.bookmarkInterval = opts.Watch, opts.WatchBookmarkInterval
	if a.bookmarkInterval <= 0 {
		a.bookmarkInterval = DefaultWatchBookmarkInterval
	}
	a.watchMax, a.watchRecheck, a.watchHeadWait = opts.WatchMaxDuration, opts.WatchRecheckInterval, opts.WatchHeadWait
	if a.watchMax <= 0 {
		a.watchMax = DefaultWatchMaxDuration
	}
	if a.watchRecheck <= 0 {
		a.watchRecheck = auth.CacheTTL
	}
	if a.watchHeadWait <= 0 {
		a.watchHeadWait = DefaultWatchHeadWait
	}
	if a.logger == nil {
		a.logger = slog.Default()
	}
	if a.kinds == nil && a.resources != nil {
		// One registry per resource service: the service validates every write with it.
		a.kinds = kind.NewService(a.resources.DB())
		a.resources.UseSchemas(a.kinds)
	}
	if a.saltTimeout <= 0 {
		a.saltTimeout = DefaultSaltRenderTimeout
	}
	if a.maxState < a.maxBody {
		a.maxState = a.maxBody
	}
	if a.registry == nil {
		a.registry = prometheus.NewRegistry()
	}
	a.metrics = newHTTPMetrics(a.registry)
	a.mux = a.routes()
	a.probe = a.probeMux()
	a.handler = a.observe(a.mux)
	return a
}

// ServeHTTP serves the API.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.handler.ServeHTTP(w, r) }

// nameSource says which name a route's authorization check is about.
type nameSource int

const (
	// fromPath authorizes the path parameter route.param (the org, for kinds inside an org).
	fromPath nameSource = iota
	// fromBody authorizes metadata.name of the JSON body (creations of global kinds).
	fromBody
	// listed routes are lists: the wrapper puts p.ListFilter(family, verb) in the request's
	// context and the list query binds it, so pages hold only visible rows.
	listed
	// fixedName authorizes route.name, a name fixed by the route ("global" for global
	// pillars, "*" for settings every target shares).
	fixedName
	// byHandler routes decide in the handler, because the decision depends on more than one
	// name: token creation (the new token's scopes), the audit log (all or nothing) and
	// state reads (full or outputs-only).
	byHandler
)

// route is one row of the API's table. Authorization is part of the row: serveRoute checks
// it before the handler runs, so a route cannot be added without saying who may call it,
// and TestEveryRouteIsAuthorized walks this table.
type route struct {
	pattern string
	family  string
	verb    string
	source  nameSource
	// param is the path parameter naming what is authorized; parameters joined with "/"
	// ("org/group") name it together (group/acme/web).
	param string
	name  string
	// target is the target kind of a family whose scopes name one (auth.TargetKinds): the
	// name checked is target/<name> ("node/web01"), and lists filter by the scopes of that
	// target kind only.
	target  string
	handler func(w http.ResponseWriter, r *http.Request, p *auth.Principal) error
	// salt routes are Salt's: they authenticate and fail in the way Salt can see (serveSalt).
	salt bool
	// stateBody routes take Terraform state documents, limited by MaxStateBytes instead of
	// MaxBodyBytes; stream routes read NDJSON without a size limit.
	stateBody, stream bool
}

// table lists every authenticated route strata serves.
func (a *API) table() []route {
	rs := []route{
		// Tokens and audit.
		{pattern: "POST /v1/tokens", family: "tokens", verb: "write", source: byHandler, handler: a.tokenCreate},
		{pattern: "GET /v1/tokens", family: "tokens", verb: "read", source: listed, handler: a.tokenList},
		{pattern: "DELETE /v1/tokens/{id}", family: "tokens", verb: "delete", source: byHandler, handler: a.tokenRevoke},
		{pattern: "GET /v1/audit", family: "audit", verb: "read", source: byHandler, handler: a.auditList},
		{pattern: "GET /v1/status", family: "status", verb: "read", source: byHandler, handler: a.statusGet},
		// Encryption keys (admin): what references each key, and a rotation's batches.
		{pattern: "GET /v1/keys", family: "status", verb: "read", source: byHandler, handler: a.keysGet},
		{pattern: "POST /v1/keys:rotate", family: "status", verb: "write", source: byHandler, handler: a.keysRotate},

		// Terraform/OpenTofu projects and state (the http backend protocol).
		{pattern: "GET /v1/projects", family: "projects", verb: "read", source: listed, handler: a.projectList},
		{pattern: "PUT /v1/projects/{project}", family: "projects", verb: "write", param: "project", handler: a.projectPut},
		{pattern: "GET /v1/projects/{project}", family: "projects", verb: "read", param: "project", handler: a.projectGet},
		{pattern: "DELETE /v1/projects/{project}", family: "projects", verb: "delete", param: "project", handler: a.projectDelete},
		{pattern: "POST /v1/projects/{project}/encrypt", family: "projects", verb: "write", param: "project", handler: a.projectEncrypt},
		{pattern: "POST /v1/projects/{project}/credentials", family: "projects", verb: "credentials", param: "project", handler: a.projectCredentials},
		{pattern: "GET /v1/state/{project}", family: "state", verb: "read", param: "project", handler: a.workspaceList},
		{pattern: "GET /v1/state/{project}/{workspace}", family: "state", verb: "read", source: byHandler, handler: a.stateGet},
		{pattern: "POST /v1/state/{project}/{workspace}", family: "state", verb: "write", param: "project", handler: a.stateWrite, stateBody: true},
		{pattern: "PUT /v1/state/{project}/{workspace}", family: "state", verb: "write", param: "project", handler: a.stateWrite, stateBody: true},
		{pattern: "DELETE /v1/state/{project}/{workspace}", family: "state", verb: "delete", param: "project", handler: a.stateDelete},
		{pattern: "LOCK /v1/state/{project}/{workspace}", family: "state", verb: "lock", param: "project", handler: a.stateLock},
		{pattern: "UNLOCK /v1/state/{project}/{workspace}", family: "state", verb: "lock", param: "project", handler: a.stateUnlock},
		{pattern: "GET /v1/state/{project}/{workspace}/lock", family: "state", verb: "read", param: "project", handler: a.stateLockStatus},
		{pattern: "POST /v1/state/{project}/{workspace}/lock", family: "state", verb: "lock", param: "project", handler: a.stateLock},
		{pattern: "DELETE /v1/state/{project}/{workspace}/lock", family: "state", verb: "lock", param: "project", handler: a.stateUnlock},
		{pattern: "GET /v1/state/{project}/{workspace}/versions", family: "state", verb: "read", param: "project", handler: a.versionList},
		{pattern: "GET /v1/state/{project}/{workspace}/versions/{n}", family: "state", verb: "read", param: "project", handler: a.versionGet},
		{pattern: "POST /v1/state/{project}/{workspace}/versions/{n}/restore", family: "state", verb: "write", param: "project", handler: a.versionRestore},

		// Group membership and the bulk node apply.
		{pattern: "GET /v1/orgs/{org}/groups/{group}/members", family: "groups", verb: "read", param: "org", handler: a.memberList},
		{pattern: "PUT /v1/orgs/{org}/groups/{group}/members/{node}", family: "groups", verb: "write", param: "org", handler: a.memberPut},
		{pattern: "DELETE /v1/orgs/{org}/groups/{group}/members/{node}", family: "groups", verb: "write", param: "org", handler: a.memberDelete},
		{pattern: "POST /v1/nodes:apply", family: "nodes", verb: "write", source: byHandler, handler: a.nodeApply, stream: true},
	}
	// Every kind's routes come from its descriptor: one code path for all kinds, built-in
	// (their own paths) and user-defined (/resources/{kind}, resolved per request).
	if a.resources != nil {
		for _, k := range a.resources.Kinds().All() {
			rs = append(rs, a.kindRoutes(k)...)
		}
		rs = append(rs, a.userKindRoutes()...)
		rs = append(rs, a.kindRegistryRoutes()...)
	}
	// Pillars: the rows of the four targets, the merged render, the shared merge setting.
	rs = append(rs, a.pillarRoutes()...)
	return rs
}

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
	// The API's OpenAPI document: the one /v1 route without a token (it depends only on the
	// release, and describes user kinds generically; openapi.go).
	mux.Handle("GET "+OpenAPIPath, a.serve(a.openAPIJSON))

	// The web console: cookie sessions, pages that call the routes below in-process
	// (console.go). Its own paths are all under /ui.
	a.uiRoutes(mux)

	for _, rt := range a.table() {
		if rt.salt {
			mux.Handle(rt.pattern, a.serveSalt(rt))
			continue
		}
		mux.Handle(rt.pattern, a.serveRoute(rt))
	}

	// Everything else under /v1 still needs a token (401 before 404, so the API's shape is
	// not revealed to anonymous callers); outside /v1 it is a plain 404.
	mux.Handle("/v1/", a.authed(func(w http.ResponseWriter, r *http.Request, _ *auth.Principal) error {
		return a.unmatched(w, r)
	}))
	mux.Handle("/", a.serve(a.unmatched))
	return mux
}

// Patterns returns the patterns of every authenticated route, for the authorization test.
func (a *API) Patterns() []string {
	var out []string
	for _, rt := range a.table() {
		out = append(out, rt.pattern)
	}
	return out
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
