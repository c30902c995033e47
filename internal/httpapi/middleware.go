package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/resource"
)

// statusRecorder remembers the status and size of a response for logs and metrics.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += n
	return n, err
}

// Flush lets streaming handlers (watch) flush through the recorder.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController access to the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// observe wraps the whole mux: request id, panic recovery (a panic is a bug: logged with its
// stack, answered 500), a JSON request log line, and HTTP metrics labelled by the matched
// route pattern (never the raw path, which would explode the label space).
func (a *API) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		holder := &principalHolder{}
		// The request id is always the server's: a client's X-Request-Id, which any client
		// can set to another request's id, is kept apart (clientRequestID).
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		reqID := hex.EncodeToString(b)
		clientID := clientRequestID(r)
		rec.Header().Set("X-Request-Id", reqID)
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				a.logger.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "request_id", reqID, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if rec.status == 0 {
					writeError(rec, r, a.logger, fmt.Errorf("panic: %v", p))
				}
			}
			status := rec.status
			if status == 0 {
				status = http.StatusOK
			}
			route := r.Pattern
			if route == "" {
				route = "unmatched"
			}
			d := time.Since(start)
			a.metrics.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
			a.metrics.duration.WithLabelValues(route).Observe(d.Seconds())
			actor := ""
			if holder.p != nil {
				actor = holder.p.TokenID
			}
			level := slog.LevelInfo
			if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || r.URL.Path == "/metrics" {
				level = slog.LevelDebug
			}
			attrs := []any{"method", r.Method, "path", r.URL.Path, "route", route, "status", status,
				"bytes", rec.bytes, "duration_ms", float64(d.Microseconds()) / 1000,
				"remote", a.clientAddr(r), "request_id", reqID, "token", actor}
			if clientID != "" {
				attrs = append(attrs, "client_request_id", clientID)
			}
			a.logger.Log(r.Context(), level, "request", attrs...)
		}()
		ctx := context.WithValue(r.Context(), principalSlot{}, holder)
		ctx = context.WithValue(ctx, requestIDKey{}, reqID)
		ctx = context.WithValue(ctx, clientRequestIDKey{}, clientID)
		ctx = context.WithValue(ctx, clientAddrKey{}, a.clientAddr(r))
		inner := r.WithContext(ctx)
		if err := a.refuseCrossSite(inner); err != nil {
			writeError(rec, inner, a.logger, err)
			return
		}
		defer func() { r.Pattern = inner.Pattern }() // runs first: the mux sets Pattern on inner
		next.ServeHTTP(rec, inner)
	})
}

// serve adapts a handlerFunc: it limits the body, runs the handler and writes its error.
func (a *API) serve(h handlerFunc) http.Handler { return a.serveLimit(a.maxBody, h) }

func (a *API) serveLimit(limit int64, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && limit > 0 {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		if err := h(w, r); err != nil {
			writeError(w, r, a.logger, err)
		}
	})
}

// authed adapts a handler that needs an authenticated principal: 401 without a valid token.
func (a *API) authed(h func(w http.ResponseWriter, r *http.Request, p *auth.Principal) error) http.Handler {
	return a.authedLimit(a.maxBody, h)
}

// authedState is authed with the state size limit instead of the general body limit:
// Terraform states are often larger than any other request.
func (a *API) authedState(h func(w http.ResponseWriter, r *http.Request, p *auth.Principal) error) http.Handler {
	return a.authedLimit(a.maxState, h)
}

func (a *API) authedLimit(limit int64, h func(w http.ResponseWriter, r *http.Request, p *auth.Principal) error) http.Handler {
	return a.serveLimit(limit, func(w http.ResponseWriter, r *http.Request) error {
		// A console page's in-process request carries its session's principal (consoleCall);
		// requests from the network never do, and are authenticated by their token.
		p, _ := r.Context().Value(consoleKey{}).(*auth.Principal)
		if p == nil {
			secret := bearerOrBasic(r)
			if secret == "" {
				return auth.ErrUnauthenticated
			}
			var err error
			if p, err = a.tokens.Verify(r.Context(), secret); err != nil {
				return err
			}
		}
		if slot, ok := r.Context().Value(principalSlot{}).(*principalHolder); ok {
			slot.p = p
		}
		// The principal also authorizes what bodies reach beyond the path (a node's spec.org,
		// a member of another org): the generic write path asks it (resource.Reference).
		r = r.WithContext(resource.WithAuthorizer(auth.WithPrincipal(r.Context(), p), p))
		// Who acts, from where, in which request: every write deeper down records it (the
		// audit log, the changes log).
		r = r.WithContext(auth.WithAuditActor(r.Context(), auditActor(r, p)))
		return h(w, r, p)
	})
}

// principalSlot lets the outer log line learn the principal an inner handler resolved.
type principalSlot struct{}

type principalHolder struct{ p *auth.Principal }

// bearerOrBasic extracts the token from "Authorization: Bearer <token>" or from the
// password of HTTP Basic auth (Terraform's http backend and Salt's http_json send Basic; the
// user name is ignored).
func bearerOrBasic(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if scheme, tok, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(tok) // auth schemes are case-insensitive (RFC 9110)
	}
	if _, pass, ok := r.BasicAuth(); ok {
		return pass
	}
	return ""
}

// clientAddrKey carries the request's client address (clientAddr) in its context.
type clientAddrKey struct{}

// remoteAddr is the request's client address, without port: the one the outer middleware
// worked out (clientAddr), or the peer's.
func remoteAddr(r *http.Request) string {
	if a, ok := r.Context().Value(clientAddrKey{}).(string); ok {
		return a
	}
	return peerAddr(r)
}

// peerAddr is the address of the connection's other end, without port.
func peerAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// clientAddr is who sent the request. From a trusted proxy (--trusted-proxies) it is the
// nearest address in X-Forwarded-For (or, without it, Forwarded's for=) that is not itself
// a trusted proxy, read from the right, since a client can put anything at the left; from
// any other peer the headers are ignored and it is the peer.
func (a *API) clientAddr(r *http.Request) string {
	peer := peerAddr(r)
	if !a.isTrusted(peer) {
		return peer
	}
	var hops []string
	for _, h := range r.Header.Values("X-Forwarded-For") {
		for _, f := range strings.Split(h, ",") {
			hops = append(hops, strings.TrimSpace(f))
		}
	}
	if len(hops) == 0 {
		for _, h := range r.Header.Values("Forwarded") {
			for _, elem := range strings.Split(h, ",") {
				for _, pair := range strings.Split(elem, ";") {
					if k, v, ok := strings.Cut(strings.TrimSpace(pair), "="); ok && strings.EqualFold(k, "for") {
						v = strings.Trim(v, `"`)
						if host, _, err := net.SplitHostPort(v); err == nil {
							v = host
						}
						hops = append(hops, strings.Trim(v, "[]"))
					}
				}
			}
		}
	}
	for i := len(hops) - 1; i >= 0; i-- {
		addr, err := netip.ParseAddr(hops[i])
		if err != nil {
			return peer // a hop that is no address: trust nothing further left
		}
		if !a.isTrusted(addr.String()) {
			return addr.String()
		}
	}
	return peer
}

func (a *API) isTrusted(host string) bool {
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	for _, p := range a.trusted {
		if p.Contains(addr.Unmap()) || p.Contains(addr) {
			return true
		}
	}
	return false
}

// refuseCrossSite is the API's one defence against cross-site request forgery (issue 27,
// finding 8f). The /v1 API authenticates by token only, but a browser may hold Basic
// credentials for the server (Terraform's and Salt's routes offer Basic) and sends them with
// any request a page on another site makes, including a form post, which needs no CORS
// preflight. So every /v1 request a browser marks as made on another site's behalf is
// refused before it is authenticated: Sec-Fetch-Site cross-site or same-site, or an Origin
// that is not this server's own (ownOrigin, as seen through trusted proxies). A form-encoded
// body, which browsers send without asking, is accepted only from clients that are no
// browser (neither header) and send no Basic credentials: `curl -d` with a Bearer token.
// The console's in-process requests do not pass here (they call the mux directly) and the
// console has its own CSRF tokens.
func (a *API) refuseCrossSite(r *http.Request) error {
	if r.URL.Path != "/v1" && !strings.HasPrefix(r.URL.Path, "/v1/") {
		return nil
	}
	site := strings.ToLower(strings.TrimSpace(r.Header.Get("Sec-Fetch-Site")))
	if site == "cross-site" || site == "same-site" {
		return fault.Forbidden("Sec-Fetch-Site: %s: the API does not answer requests a browser makes on another site's behalf; call it from a client such as curl or strata, or use the console", site)
	}
	origins := r.Header.Values("Origin")
	if len(origins) > 0 {
		own := a.ownOrigin(r)
		for _, o := range origins {
			if normalOrigin(o) != own {
				return fault.Forbidden("Origin %q is not this server's own origin (%s): the API does not answer requests a browser makes on another site's behalf", fault.Truncate(o, 200), own)
			}
		}
	}
	if isFormContentType(r.Header.Get("Content-Type")) {
		if len(origins) > 0 || site != "" {
			return fault.Forbidden("Content-Type application/x-www-form-urlencoded is not accepted from a browser (the request carries Origin or Sec-Fetch-Site): send the JSON body as application/json")
		}
		if _, _, basic := r.BasicAuth(); basic {
			return fault.Forbidden("Content-Type application/x-www-form-urlencoded is not accepted with Basic credentials: send the JSON body as application/json, or the token as Authorization: Bearer")
		}
	}
	return nil
}

// isFormContentType reports whether ct is application/x-www-form-urlencoded, the body type
// curl -d sends and an HTML form posts without a CORS preflight.
func isFormContentType(ct string) bool {
	return strings.EqualFold(strings.TrimSpace(strings.SplitN(ct, ";", 2)[0]), "application/x-www-form-urlencoded")
}

// ownOrigin is the origin a browser uses for this server: the request's scheme and Host, or,
// from a trusted proxy (--trusted-proxies), what the proxy names: X-Forwarded-Proto and
// X-Forwarded-Host (the first value of each: the client-facing proxy's), or proto= and host=
// of the first Forwarded element. Headers from any other peer are ignored.
func (a *API) ownOrigin(r *http.Request) string {
	scheme, host := "http", r.Host
	if r.TLS != nil {
		scheme = "https"
	}
	if a.isTrusted(peerAddr(r)) {
		if p := forwardedValue(r, "X-Forwarded-Proto", "proto"); p != "" {
			scheme = p
		}
		if h := forwardedValue(r, "X-Forwarded-Host", "host"); h != "" {
			host = h
		}
	}
	return normalOrigin(scheme + "://" + host)
}

// overTLS reports whether the client reached this server over TLS: the connection is TLS,
// or a trusted proxy says the client's was (X-Forwarded-Proto or Forwarded proto=https).
func (a *API) overTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	return a.isTrusted(peerAddr(r)) && strings.EqualFold(forwardedValue(r, "X-Forwarded-Proto", "proto"), "https")
}

// forwardedValue is the first value of the X-Forwarded-* header xf, or, without it, the
// parameter param of the first element of Forwarded (RFC 7239). Callers trust it only from
// a trusted proxy.
func forwardedValue(r *http.Request, xf, param string) string {
	if v := r.Header.Get(xf); v != "" {
		first, _, _ := strings.Cut(v, ",")
		return strings.TrimSpace(first)
	}
	elem, _, _ := strings.Cut(r.Header.Get("Forwarded"), ",")
	for _, pair := range strings.Split(elem, ";") {
		if k, v, ok := strings.Cut(strings.TrimSpace(pair), "="); ok && strings.EqualFold(k, param) {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// normalOrigin writes an origin the way comparisons need it: scheme and host in lower case,
// without a default port (https://a.example:443 is https://a.example). Anything that is no
// scheme://host origin (such as "null", which sandboxed and privacy-sensitive contexts send)
// comes back as it is and so matches no server.
func normalOrigin(o string) string {
	scheme, host, ok := strings.Cut(strings.TrimSpace(o), "://")
	if !ok || host == "" || strings.ContainsAny(host, "/?#@") {
		return o
	}
	scheme, host = strings.ToLower(scheme), strings.ToLower(host)
	if (scheme == "http" && strings.HasSuffix(host, ":80")) || (scheme == "https" && strings.HasSuffix(host, ":443")) {
		host = host[:strings.LastIndexByte(host, ':')]
	}
	return scheme + "://" + host
}

// auditActor names the caller for the audit log.
func auditActor(r *http.Request, p *auth.Principal) auth.AuditActor {
	cid, _ := r.Context().Value(clientRequestIDKey{}).(string)
	return auth.AuditActor{Actor: p.Actor(), RemoteAddr: remoteAddr(r), RequestID: RequestID(r.Context()), ClientRequestID: cid}
}

// clientRequestIDKey carries the X-Request-Id a client sent (clientRequestID) in its
// request's context.
type clientRequestIDKey struct{}

// clientRequestID is the X-Request-Id the client sent, kept so a client can find its own
// requests in the log and the audit log, but never as the request's id. One that is longer
// than 64 bytes or holds anything but printable ASCII is not kept ("").
func clientRequestID(r *http.Request) string {
	id := r.Header.Get("X-Request-Id")
	if len(id) > 64 {
		return ""
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return ""
		}
	}
	return id
}

// httpMetrics are the HTTP-level Prometheus metrics.
type httpMetrics struct {
	requests       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	renderFailures *prometheus.CounterVec
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_http_requests_total", Help: "HTTP requests by route pattern and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "strata_http_request_duration_seconds", Help: "HTTP request durations by route pattern.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
	}
	reg.MustRegister(m.requests, m.duration)
	m.renderFailures = newRenderMetrics(reg)
	return m
}

// notFound answers unmatched paths with a problem document.
func notFound(w http.ResponseWriter, r *http.Request) error {
	return fault.NotFound("no route for %s %s", r.Method, r.URL.Path)
}
