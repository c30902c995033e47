package auth

import (
	"context"

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
