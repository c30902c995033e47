package httpapi

import (
	"net/http"
	"strconv"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
)

func requireAdmin(p *auth.Principal) error {
	if !p.IsAdmin() {
		return fault.Forbidden("token %q lacks scope admin", p.Name)
	}
	return nil
}

func tokenOut(t auth.Token) client.Token {
	return client.Token{ID: t.ID, Name: t.Name, Scopes: t.Scopes, CreatedAt: t.CreatedAt, CreatedBy: t.CreatedBy,
		ExpiresAt: t.ExpiresAt, RevokedAt: t.RevokedAt, LastUsedAt: t.LastUsedAt}
}

// tokenCreate needs admin: a token can carry any scope, so creating one is as strong as
// holding admin.
func (a *API) tokenCreate(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if err := requireAdmin(p); err != nil {
		return err
	}
	var req client.TokenCreateRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	tok, secret, err := a.tokens.Create(r.Context(), auditActor(r, p), auth.CreateParams{Name: req.Name, Scopes: req.Scopes, ExpiresAt: req.ExpiresAt})
	if err != nil {
		return err
	}
	out := tokenOut(tok)
	out.Secret = secret
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusCreated, out)
}

func (a *API) tokenList(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if err := p.Check("tokens", "read", "*"); err != nil {
		return err
	}
	toks, err := a.tokens.List(r.Context())
	if err != nil {
		return err
	}
	out := client.TokenList{Items: []client.Token{}}
	for _, t := range toks {
		out.Items = append(out.Items, tokenOut(t))
	}
	return writeJSON(w, http.StatusOK, out)
}

func (a *API) tokenRevoke(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if err := p.Check("tokens", "delete", "*"); err != nil {
		return err
	}
	if err := a.tokens.Revoke(r.Context(), auditActor(r, p), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// auditList pages through the audit log, newest first: ?limit=, ?before=<id>, ?action=<prefix>.
func (a *API) auditList(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if err := p.Check("audit", "read", "*"); err != nil {
		return err
	}
	qv := r.URL.Query()
	limit := 100
	if s := qv.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return fault.Invalid("limit", "limit must be an integer from 1 to 1000")
		}
		limit = n
	}
	var before int64
	if s := qv.Get("before"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			return fault.Invalid("before", "before must be a positive audit record id")
		}
		before = n
	}
	recs, err := a.tokens.ListAudit(r.Context(), before, qv.Get("action"), limit)
	if err != nil {
		return err
	}
	out := client.AuditList{Items: []client.AuditRecord{}}
	for _, rec := range recs {
		out.Items = append(out.Items, client.AuditRecord{ID: rec.ID, At: rec.At.UTC(), Actor: rec.Actor, Action: rec.Action,
			Target: rec.Target, RemoteAddr: rec.RemoteAddr, Detail: rec.Detail})
	}
	if len(recs) == limit {
		out.Next = recs[len(recs)-1].ID
	}
	return writeJSON(w, http.StatusOK, out)
}
