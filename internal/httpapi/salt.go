package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/pillar"
)

// DefaultSaltRenderTimeout bounds one Salt-facing render: Salt itself waits up to an hour
// (http_request_timeout), and a compile that hangs that long is worse than one that fails.
const DefaultSaltRenderTimeout = 10 * time.Second

// serveSalt serves GET /v1/salt/pillar/{minion}, the URL Salt's http_json ext_pillar calls
// (url: http://HOST:7400/v1/salt/pillar/%s). Salt turns every non-2xx answer, refused
// connection and timeout into a silently empty pillar, but records a 2xx body that is not
// JSON in the pillar's _errors, which makes it refuse to apply states. So every failure here —
// no or a bad token, a missing scope, an unknown minion when the setting says so, a database
// that is down, a render slower than the bound — is a 200 with a text body that names the
// problem, and only a computed pillar is a JSON object (never an array, which would crash
// Salt's whole compile).
func (a *API) serveSalt(rt route) http.Handler {
	return a.serve(func(w http.ResponseWriter, r *http.Request) error {
		minion := r.PathValue("minion")
		fail := func(reason string, err error) error {
			a.metrics.renderFailures.WithLabelValues("salt", reason).Inc()
			if fe := classify(err); fe.Kind == fault.KindInternal || fe.Kind == fault.KindUnavailable {
				a.logger.ErrorContext(r.Context(), "salt pillar render failed", "minion", minion, "reason", reason, "err", err)
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusOK)
			_, _ = fmt.Fprintf(w, "strata: the pillar of minion %q is not available (%s): %s\n", minion, reason, classify(err).Detail)
			return nil
		}
		p, err := a.saltPrincipal(r)
		if err != nil {
			return fail("authentication", err)
		}
		if err := p.Check(rt.family, rt.verb, rt.scopeName(minion)); err != nil {
			return fail("authorization", err)
		}
		ctx, cancel := context.WithTimeout(r.Context(), a.saltTimeout)
		defer cancel()
		out, err := a.pillars.Render(ctx, a.resources, minion, false)
		if fault.KindOf(err) == fault.KindNotFound {
			unknown, serr := a.pillars.UnknownMinion(ctx)
			if serr != nil {
				return fail("database", serr)
			}
			if unknown == pillar.UnknownEmpty {
				return writeJSON(w, http.StatusOK, map[string]any{})
			}
			return fail("unknown minion", err)
		}
		if err != nil {
			reason := "database"
			if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
				reason = "timeout"
				err = fault.New(fault.KindUnavailable, "the render took longer than %s", a.saltTimeout)
			}
			return fail(reason, err)
		}
		w.Header().Set("ETag", out.ETag)
		return writeJSON(w, http.StatusOK, out.Pillar)
	})
}

// saltPrincipal authenticates a Salt master: a token as Bearer or as the Basic password (what
// Salt 3006's http_json sends with username/password), or — only when --salt-legacy-clients
// lists the caller's address, for Salt 3005 and older, which cannot send credentials — a
// principal that may only render pillars.
func (a *API) saltPrincipal(r *http.Request) (*auth.Principal, error) {
	if secret := bearerOrBasic(r); secret != "" {
		p, err := a.tokens.Verify(r.Context(), secret)
		if err != nil {
			return nil, err
		}
		if slot, ok := r.Context().Value(principalSlot{}).(*principalHolder); ok {
			slot.p = p
		}
		return p, nil
	}
	if addr, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		for _, pfx := range a.saltLegacy {
			if pfx.Contains(addr.Addr().Unmap()) {
				scope, _ := auth.ParseScope("pillars:render:*")
				return &auth.Principal{Name: "salt-legacy@" + addr.Addr().String(), Scopes: []auth.Scope{scope}}, nil
			}
		}
	}
	return nil, auth.ErrUnauthenticated
}

// ParseSaltLegacyClients parses --salt-legacy-clients: comma-separated addresses or CIDR
// prefixes allowed to render pillars without a token.
func ParseSaltLegacyClients(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			addr, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("salt legacy client %q: %w", f, err)
			}
			out = append(out, netip.PrefixFrom(addr, addr.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("salt legacy client %q: %w", f, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// newRenderMetrics counts pillar renders that failed: path "api" (answered 5xx) or "salt"
// (answered with an error text Salt records in _errors), by reason.
func newRenderMetrics(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_pillar_render_failures_total",
		Help: "Pillar renders that failed, by path (api: a 5xx answer; salt: an error text Salt records in _errors) and reason.",
	}, []string{"path", "reason"})
	reg.MustRegister(c)
	return c
}

// saltCredentials creates (or re-keys) the database role a Salt master's postgres ext_pillar
// logs in with — it may only execute node_pillars — and answers a ready master configuration.
// The password is shown only in this answer.
func (a *API) saltCredentials(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	o, err := a.pillars.Options(r.Context())
	if err != nil {
		return err
	}
	c, err := a.pillars.SaltCredentials(r.Context(), "", o.MergeLists, p.Actor(), remoteAddr(r))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, c)
}
