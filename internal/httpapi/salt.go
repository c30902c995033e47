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
// connection and timeout into a silently empty pillar; a 2xx body that is not JSON reaches
// the user only as a JSON decode error; a JSON string or array crashes Salt's whole compile.
// What Salt shows its user verbatim, and still refuses to apply states over, is a 200 JSON
// object whose _errors holds text (research salt-client-behaviour.md §3a). So every failure
// here — no or a bad token, a missing scope, an unknown minion when the setting says so, a
// database that is down, a render slower than the bound — is a 200
// {"_errors": ["strata: <what failed for minion X> — <what to do>"]}, and only a computed
// pillar is any other JSON object. The texts never carry a secret or a database error's own
// words (those go to the log).
func (a *API) serveSalt(rt route) http.Handler {
	return a.serve(func(w http.ResponseWriter, r *http.Request) error {
		minion := r.PathValue("minion")
		fail := func(reason, text string, err error) error {
			a.metrics.renderFailures.WithLabelValues("salt", reason).Inc()
			if fe := classify(err); fe.Kind == fault.KindInternal || fe.Kind == fault.KindUnavailable {
				a.logger.ErrorContext(r.Context(), "salt pillar render failed", "minion", minion, "reason", reason, "err", err)
			}
			return writeJSON(w, http.StatusOK, map[string][]string{"_errors": {"strata: " + text}})
		}
		who := fmt.Sprintf("cannot render the pillar of minion %q", fault.Truncate(minion, 253))
		p, err := a.saltPrincipal(r)
		if err != nil {
			if bearerOrBasic(r) == "" {
				return fail("authentication", who+": the request carries no token — put a token with the scope pillars:render:node/* in the ext_pillar's http_json password (see `strata salt config`)", err)
			}
			return fail("authentication", who+": the token is not valid (unknown, revoked or expired) — create one with `strata token create salt-master --scope 'pillars:render:node/*'` and put it in the ext_pillar's http_json password", err)
		}
		if err := p.Check(rt.family, rt.verb, rt.scopeName(minion)); err != nil {
			need := rt.family + ":" + rt.verb + ":" + rt.scopeName(minion)
			return fail("authorization", fmt.Sprintf("%s: the token %q lacks the scope %s — use a token with pillars:render:node/* (or one covering this minion)", who, p.Name, need), err)
		}
		ctx, cancel := context.WithTimeout(r.Context(), a.saltTimeout)
		defer cancel()
		var out pillar.Rendered
		if fresh(r) {
			out, err = a.pillars.RenderFresh(ctx, a.resources, minion)
		} else {
			out, err = a.pillars.Render(ctx, a.resources, minion, false)
		}
		if fault.KindOf(err) == fault.KindNotFound {
			unknown, serr := a.pillars.UnknownMinion(ctx)
			if serr != nil {
				return fail("database", who+": strata's database is not answering — states are refused until it is back; check strata's log and /readyz", serr)
			}
			if unknown == pillar.UnknownEmpty {
				return writeJSON(w, http.StatusOK, map[string]any{})
			}
			return fail("unknown minion", fmt.Sprintf("minion %q is not a node in strata, and the pillar setting unknownMinion is \"error\" — create the node (`strata node create %s --org ORG`), or set unknownMinion to \"empty\" (`strata pillar settings set --unknown-minion empty`)", fault.Truncate(minion, 253), fault.Truncate(minion, 253)), err)
		}
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
				return fail("timeout", fmt.Sprintf("%s: the render took longer than %s (--salt-render-timeout) — check strata's log and the database's load; raise --salt-render-timeout if such renders are expected", who, a.saltTimeout), err)
			}
			if classify(err).Kind != fault.KindUnavailable {
				return fail("internal", who+": an internal error — strata's log has the details (look for this minion)", err)
			}
			return fail("database", who+": strata's database is not answering — states are refused until it is back; check strata's log and /readyz", err)
		}
		if len(out.Secrets) > 0 {
			// Salt gets the plaintext or nothing: states rendered with "(secret)" in them would
			// be applied.
			need := "pillars:read-secrets:" + rt.scopeName(minion)
			if !p.Allows("pillars", "read-secrets", rt.scopeName(minion)) && bearerOrBasic(r) == "" {
				return fail("secrets", fmt.Sprintf("%s: it holds secret categories (%s), and a legacy client (--salt-legacy-clients) sends no token, so it lacks the scope %s — upgrade the master to Salt 3006 and give it a token with pillars:render:node/* and pillars:read-secrets:node/* (see `strata salt config`)", who, strings.Join(out.Secrets, ", "), need), fault.New(fault.KindForbidden, "lacks %s", need))
			}
			if !p.Allows("pillars", "read-secrets", rt.scopeName(minion)) {
				return fail("secrets", fmt.Sprintf("%s: it holds secret categories (%s) and the token %q lacks the scope %s — give the Salt master's token pillars:read-secrets:node/* beside pillars:render:node/* (see `strata salt config`)", who, strings.Join(out.Secrets, ", "), p.Name, need), fault.New(fault.KindForbidden, "lacks %s", need))
			}
			if out, err = out.Reveal(); err != nil {
				return fail("secrets", who+": a secret category cannot be decrypted on this server — check strata's log (a missing --encryption-key-file)", err)
			}
		}
		w.Header().Set("ETag", out.ETag)
		return writeRawJSON(w, http.StatusOK, out.JSON)
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
	return ParsePrefixes("salt legacy client", s)
}

// ParsePrefixes reads comma-separated addresses or CIDR prefixes (what names them in errors).
func ParsePrefixes(what, s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			addr, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", what, f, err)
			}
			out = append(out, netip.PrefixFrom(addr, addr.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", what, f, err)
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
		Help: "Pillar renders that failed, by path (api: a 5xx answer; salt: a 200 {\"_errors\": [text]} that Salt shows and refuses states over) and reason.",
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
