package auth

import (
	"context"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
)

// ErrTokenEnded ends a long request whose token was revoked or expired after it began.
var ErrTokenEnded = &fault.Error{Kind: fault.KindUnauthenticated, Detail: "the token of this request was revoked or has expired since it began: authenticate again (a watch resumes from the last resourceVersion it received)"}

// StillValid re-checks, for a request that outlives its token's verification (a watch
// stream), that the principal's token is still in force: not expired by this service's clock
// or the database's, not revoked on any replica. It asks the database every time, never the
// verification cache, so a stream learns of a revocation within its own re-check interval.
// A principal without a token (Salt's legacy clients) is always valid.
func (s *Service) StillValid(ctx context.Context, p *Principal) error {
	if p == nil || p.TokenID == "" {
		return nil
	}
	if s.ended.has(tokenKey(p.TokenID)) {
		return ErrTokenEnded
	}
	if p.ExpiresAt != nil && !s.now().Before(*p.ExpiresAt) {
		return ErrTokenEnded
	}
	var ok bool
	if err := s.db.QueryRow(ctx, q.Get("TokenStillValid"), p.TokenID).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return ErrTokenEnded
	}
	return nil
}

// ErrSessionEnded ends a console request whose session ended after it began: signed out,
// expired, or its token revoked or expired.
var ErrSessionEnded = &fault.Error{Kind: fault.KindUnauthenticated, Detail: "the console session of this request has ended (signed out, expired, or its token revoked): sign in again"}

// SessionStillValid is StillValid for a console request (a console watch stream): the
// session must not have been signed out (on this replica: EndedHere; on any other: the
// database), must not have expired by this service's clock or the database's, and its token
// must still be in force.
func (s *Service) SessionStillValid(ctx context.Context, sess Session) error {
	if s.EndedHere(sess.Principal, &sess) || !s.now().Before(sess.ExpiresAt) {
		return ErrSessionEnded
	}
	if err := s.StillValid(ctx, sess.Principal); err != nil {
		if err == ErrTokenEnded {
			return ErrSessionEnded
		}
		return err // the database did not answer: the stream reports that, as for a token
	}
	var ok bool
	if err := s.db.QueryRow(ctx, q.Get("SessionStillValid"), db.Bytes(sess.hash[:])).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return ErrSessionEnded
	}
	return nil
}

// EndedHere reports, without asking the database, whether this replica has revoked p's
// token or (for a console request, sess not nil) signed sess out, or whether sess has
// expired by this service's clock. Long requests ask it before each event they send: cheap
// enough for every event, and it makes a revocation or sign-out on this replica take effect
// before the next event. Other replicas' revocations arrive through StillValid's re-checks.
func (s *Service) EndedHere(p *Principal, sess *Session) bool {
	if p != nil && p.TokenID != "" && s.ended.has(tokenKey(p.TokenID)) {
		return true
	}
	if sess != nil && (s.ended.has(sessionKey(sess.hash)) || !s.now().Before(sess.ExpiresAt)) {
		return true
	}
	return false
}

// Endings returns a channel that is closed at the next revocation or sign-out on this
// replica, so a waiting stream can wake and ask EndedHere instead of waiting for its next
// event or re-check.
func (s *Service) Endings() <-chan struct{} { return s.ended.signal() }
