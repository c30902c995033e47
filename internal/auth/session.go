package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/stratahq/strata/internal/db"
)

// SessionTTL is how long a console session lives after sign-in (it ends sooner with its
// token or at sign-out).
const SessionTTL = 12 * time.Hour

// Session is a signed-in console: the principal it acts as (its token's scopes, read anew on
// every request) and the CSRF token its forms carry.
type Session struct {
	Principal *Principal
	CSRF      string
	// ExpiresAt is when the session ends unless it is signed out sooner.
	ExpiresAt time.Time
	// hash is the SHA-256 of the session's secret, its key in the database.
	hash [32]byte
}

// ErrNoSession is a missing, unknown or ended session (the console sends the browser to its
// sign-in page).
var ErrNoSession = errors.New("no console session")

func randomText() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// NewCSRF returns a fresh random CSRF token (the sign-in form's, before a session exists).
func NewCSRF() string { return randomText() }

// CreateSession signs a verified principal in: it stores a new session and returns its secret
// (for the cookie, never stored) and the session. Expired sessions are pruned on the way.
func (s *Service) CreateSession(ctx context.Context, actor AuditActor, p *Principal, ttl time.Duration) (string, Session, error) {
	secret, csrf := randomText(), randomText()
	h := sha256.Sum256([]byte(secret))
	var expires time.Time
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		if _, err := tx.Exec(ctx, q.Get("SessionPrune")); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, q.Get("SessionInsert"), db.Bytes(h[:]), p.TokenID, csrf, ttl.Seconds()).Scan(&expires); err != nil {
			return err
		}
		return RecordAudit(ctx, tx, AuditEntry{Actor: actor.Actor, Action: "console.login", Target: p.Name, RemoteAddr: actor.RemoteAddr, RequestID: actor.RequestID, ClientRequestID: actor.ClientRequestID})
	})
	if err != nil {
		return "", Session{}, fmt.Errorf("create console session: %w", err)
	}
	return secret, Session{Principal: p, CSRF: csrf, ExpiresAt: expires, hash: h}, nil
}

// LookupSession resolves a session secret to its session; ErrNoSession when there is none
// or it ended (expired, signed out, its token revoked or expired).
func (s *Service) LookupSession(ctx context.Context, secret string) (Session, error) {
	if secret == "" || len(secret) > 100 {
		return Session{}, ErrNoSession
	}
	h := sha256.Sum256([]byte(secret))
	var (
		p       Principal
		scopes  []string
		expires *time.Time
		csrf    string
		until   time.Time
	)
	err := s.db.QueryRow(ctx, q.Get("SessionGet"), db.Bytes(h[:])).Scan(&p.TokenID, &p.Name, &scopes, &expires, &csrf, &until)
	if errors.Is(err, db.ErrNotFound) {
		return Session{}, ErrNoSession
	}
	if err != nil {
		return Session{}, err
	}
	p.ExpiresAt = expires
	for _, raw := range scopes {
		if sc, err := ParseScope(raw); err == nil {
			p.Scopes = append(p.Scopes, sc)
		}
	}
	return Session{Principal: &p, CSRF: csrf, ExpiresAt: until, hash: h}, nil
}

// EndSession signs a session out (nothing when it is already gone).
func (s *Service) EndSession(ctx context.Context, actor AuditActor, secret string) error {
	h := sha256.Sum256([]byte(secret))
	// Marked before the sign-out commits, as Revoke marks a token: the session's streams on
	// this replica end before their next event (EndedHere).
	undo := s.ended.mark(sessionKey(h))
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		var tokenID string
		err := tx.QueryRow(ctx, q.Get("SessionDelete"), db.Bytes(h[:])).Scan(&tokenID)
		if errors.Is(err, db.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return RecordAudit(ctx, tx, AuditEntry{Actor: actor.Actor, Action: "console.logout", Target: tokenID, RemoteAddr: actor.RemoteAddr, RequestID: actor.RequestID, ClientRequestID: actor.ClientRequestID})
	})
	if err != nil {
		undo()
	}
	return err
}

// EndAllSessions ends every console session (after a restore: they belong to the
// installation the backup was taken from).
func EndAllSessions(ctx context.Context, d *db.DB) error {
	_, err := d.Exec(ctx, q.Get("SessionsEndAll"))
	return err
}
