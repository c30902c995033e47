package httpapi

import (
	"context"
	"net/http"
	"slices"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/secret"
)

// sealer is a capability that stores sealed values: it re-wraps them with the primary key a
// batch at a time and counts them by key.
type sealer interface {
	RewrapBatch(ctx context.Context, limit int) (int, error)
	SealedByKey(ctx context.Context) (map[string]int64, error)
}

// sealers are the capabilities holding sealed values.
func (a *API) sealers() []sealer {
	var out []sealer
	if a.pillars != nil {
		out = append(out, a.pillars)
	}
	if a.state != nil {
		out = append(out, a.state)
	}
	return out
}

// KeyRecord is the database's record of the key ids its sealed values are wrapped with
// (package keyref, kept by triggers in the writing transactions): what a replica must hold to
// be ready. Prune drops the ids no value references any more, so an old key becomes
// retirable once a rotation has re-wrapped everything.
type KeyRecord interface {
	Referenced(ctx context.Context) ([]string, error)
	Prune(ctx context.Context) ([]string, error)
}

// keyStatus adds up what every sealer's values reference, after tidying the database's record
// of referenced keys: Referenced is that record, and a key it names that the replica lacks is
// Missing (as one a counted value needs is); a held key is retirable only once neither the
// record nor any value names it.
func (a *API) keyStatus(ctx context.Context) (api.KeyStatus, error) {
	st := api.KeyStatus{Keys: []string{}, Sealed: map[string]int64{}, Retirable: []string{}, Missing: []string{}, Referenced: []string{}}
	st.Primary, st.Keys = a.keys.Primary(), a.keys.IDs()
	if a.keyRecord != nil {
		if _, err := a.keyRecord.Prune(ctx); err != nil {
			return st, err
		}
		refs, err := a.keyRecord.Referenced(ctx)
		if err != nil {
			return st, err
		}
		st.Referenced = refs
		for _, id := range refs {
			if !slices.Contains(st.Keys, id) {
				st.Missing = append(st.Missing, id)
			}
		}
	}
	for _, s := range a.sealers() {
		m, err := s.SealedByKey(ctx)
		if err != nil {
			return st, err
		}
		for id, n := range m {
			st.Sealed[id] += n
		}
	}
	for id, n := range st.Sealed {
		if id != st.Primary {
			st.Remaining += n
		}
		if !slices.Contains(st.Keys, id) && !slices.Contains(st.Missing, id) {
			st.Missing = append(st.Missing, id)
		}
	}
	for _, id := range st.Keys {
		if id != st.Primary && st.Sealed[id] == 0 && !slices.Contains(st.Referenced, id) {
			st.Retirable = append(st.Retirable, id)
		}
	}
	slices.Sort(st.Missing)
	return st, nil
}

// keysGet answers GET /v1/keys (admin): which keys this replica holds and what references
// them, so an operator knows when an old key may be retired.
func (a *API) keysGet(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if !p.IsAdmin() {
		return fault.Forbidden("GET /v1/keys needs the admin scope")
	}
	st, err := a.keyStatus(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, st)
}

// keysRotate answers POST /v1/keys:rotate (admin): one batch of a rotation, re-wrapping up to
// limit values (default 1000) with this replica's primary key, audited; the CLI calls it
// until nothing remains. Stateless, so an interrupted rotation resumes by running again.
func (a *API) keysRotate(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if !p.IsAdmin() {
		return fault.Forbidden("POST /v1/keys:rotate needs the admin scope")
	}
	if err := a.keys.Require(); err != nil {
		return secret.Fault(err)
	}
	var req struct {
		Limit int `json:"limit"`
	}
	if r.ContentLength != 0 { // an empty body takes the default
		if err := decodeJSON(r, &req); err != nil {
			return err
		}
	}
	if req.Limit == 0 {
		req.Limit = 1000
	}
	if req.Limit < 1 || req.Limit > 100000 {
		return fault.Invalid("/limit", "limit must be between 1 and 100000, not %d", req.Limit)
	}
	out := api.KeyRotation{}
	for _, s := range a.sealers() {
		if out.Rewrapped >= req.Limit {
			break
		}
		n, err := s.RewrapBatch(r.Context(), req.Limit-out.Rewrapped)
		if err != nil {
			return err
		}
		out.Rewrapped += n
	}
	st, err := a.keyStatus(r.Context())
	if err != nil {
		return err
	}
	out.Remaining = st.Remaining
	return writeJSON(w, http.StatusOK, out)
}
