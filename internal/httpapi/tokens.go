package httpapi

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
)

func requireAdmin(p *auth.Principal) error {
	if !p.IsAdmin() {
		return fault.Forbidden("token %q lacks scope admin", p.Name)
	}
	return nil
}

func tokenOut(t auth.Token) api.Token {
	return api.Token{ID: t.ID, Name: t.Name, Scopes: t.Scopes, CreatedAt: t.CreatedAt, CreatedBy: t.CreatedBy,
		ExpiresAt: t.ExpiresAt, RevokedAt: t.RevokedAt, LastUsedAt: t.LastUsedAt}
}

// tokenCreate needs admin: a token can carry any scope, so creating one is as strong as
// holding admin.
func (a *API) tokenCreate(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if err := requireAdmin(p); err != nil {
		return err
	}
	var req api.TokenCreateRequest
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

// tokenList lists the tokens whose names the caller's tokens:read scopes cover (all of them
// for tokens:read:* and admin), never secrets. The filter is part of the query.
func (a *API) tokenList(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	f := p.ListFilter("tokens", "read")
	if f.Empty() {
		return fault.Forbidden("token %q lacks scope tokens:read:<name>", p.Name)
	}
	pg, err := a.page(r, "tokens", maxTokenList, maxTokenList)
	if err != nil {
		return err
	}
	var after *auth.TokenPos
	if err := pg.open(&after); err != nil {
		return err
	}
	toks, more, err := a.tokens.List(r.Context(), auth.TokenListOptions{Filter: f, After: after, Limit: pg.limit})
	if err != nil {
		return err
	}
	out := api.TokenList{Items: []api.Token{}}
	for _, t := range toks {
		out.Items = append(out.Items, tokenOut(t))
	}
	if more {
		last := toks[len(toks)-1]
		if out.Continue, err = pg.next(true, auth.TokenPos{CreatedAt: last.CreatedAt, ID: last.ID}); err != nil {
			return err
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// maxTokenList is the largest (and default) page of GET /v1/tokens.
const maxTokenList = 1000

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

// auditList pages through the audit log, newest first: ?limit=, ?action=<prefix>, and
// ?continue= (or the older ?before=<id>). Audit records name any object, so reading them
// needs audit:read:* (or admin): the list is all or nothing.
func (a *API) auditList(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if !p.ListFilter("audit", "read").All {
		return fault.Forbidden("token %q lacks scope audit:read:*", p.Name)
	}
	qv := r.URL.Query()
	action := qv.Get("action")
	if qv.Get("watch") == "true" {
		return a.auditFollow(w, r, p, action)
	}
	// The action filter is part of the list's identity: a continue token from an unfiltered
	// list does not continue a filtered one.
	pg, err := a.page(r, "audit?action="+action, 100, 1000)
	if err != nil {
		return err
	}
	var before int64
	if s := qv.Get("before"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			return fault.Invalid("before", "before must be a positive audit record id")
		}
		if pg.token != "" {
			return fault.Invalid("continue", "continue and before cannot be combined")
		}
		before = n
	}
	if err := pg.open(&before); err != nil {
		return err
	}
	recs, err := a.tokens.ListAudit(r.Context(), before, action, pg.limit+1)
	if err != nil {
		return err
	}
	more := len(recs) > pg.limit
	if more {
		recs = recs[:pg.limit]
	}
	out := api.AuditList{Items: []api.AuditRecord{}}
	for _, rec := range recs {
		out.Items = append(out.Items, api.AuditRecord{ID: rec.ID, At: rec.At.UTC(), Actor: rec.Actor, Action: rec.Action, RequestID: rec.RequestID, ClientRequestID: rec.ClientRequestID,
			Target: rec.Target, RemoteAddr: rec.RemoteAddr, Detail: rec.Detail})
	}
	if more {
		last := recs[len(recs)-1].ID
		out.Next = last
		if out.Continue, err = pg.next(true, last); err != nil {
			return err
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// auditFollow streams the audit log as it is written (GET /v1/audit?watch=true), one
// {"type":"ADDED","object":<record>} line per record, in the order of auth.FollowAudit: a
// record never arrives after one that follows it, whatever order transactions commit in.
// ?after=<cursor> resumes after a record received (each carries its cursor); without it the
// stream starts now. It polls every pollEvery when idle, re-checks the token as watches do
// (a revoked token ends it with an ERROR 401) and ends after the watch lifetime.
func (a *API) auditFollow(w http.ResponseWriter, r *http.Request, p *auth.Principal, action string) error {
	ctx := r.Context()
	var cur auth.AuditCursor
	var err error
	if after := r.URL.Query().Get("after"); after != "" {
		cur, err = auth.ParseAuditCursor(after)
	} else {
		cur, err = a.tokens.AuditFollowStart(ctx)
	}
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return nil
	}
	const pollEvery = 500 * time.Millisecond
	end := time.Now().Add(a.watchMax + rand.N(a.watchMax))
	acc := a.streamAccess(r, p)
	recheck := acc.nextRecheck(time.Now())
	for time.Now().Before(end) {
		if !time.Now().Before(recheck) {
			recheck = acc.nextRecheck(time.Now())
			if err := acc.stillValid(ctx); err != nil {
				if ctx.Err() == nil {
					b, _ := json.Marshal(watchEvent{Type: "ERROR", Object: a.streamProblem(r, "audit follow", err)})
					_, _ = w.Write(append(b, '\n'))
				}
				return nil
			}
		}
		recs, next, err := a.tokens.FollowAudit(ctx, cur, action, 500)
		if err != nil {
			if ctx.Err() == nil {
				b, _ := json.Marshal(watchEvent{Type: "ERROR", Object: a.streamProblem(r, "audit follow", err)})
				_, _ = w.Write(append(b, '\n'))
			}
			return nil
		}
		cur = next
		if len(recs) > 0 && acc.endedHere() {
			// Revoked on this replica: not one more record (the watch's rule).
			b, _ := json.Marshal(watchEvent{Type: "ERROR", Object: a.problemOf(r, acc.endedErr())})
			_, _ = w.Write(append(b, '\n'))
			return nil
		}
		for _, rec := range recs {
			b, err := json.Marshal(watchEvent{Type: "ADDED", Object: api.AuditRecord{ID: rec.ID, At: rec.At.UTC(), Actor: rec.Actor, Action: rec.Action,
				Target: rec.Target, RemoteAddr: rec.RemoteAddr, RequestID: rec.RequestID, ClientRequestID: rec.ClientRequestID, Detail: rec.Detail, Cursor: rec.Cursor.String()}})
			if err != nil {
				return nil
			}
			if err := rc.SetWriteDeadline(time.Now().Add(watchWriteTimeout)); err != nil {
				return nil
			}
			if _, err := w.Write(append(b, '\n')); err != nil {
				return nil
			}
		}
		if len(recs) > 0 {
			if err := rc.Flush(); err != nil {
				return nil
			}
			if len(recs) == 500 {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pollEvery):
		}
	}
	return nil
}
