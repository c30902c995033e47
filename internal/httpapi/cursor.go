package httpapi

import (
	"net/http"
	"strconv"

	"github.com/stratahq/strata/internal/fault"
)

// pageRequest is one request for a page of a list: ?limit= and ?continue=. Every list
// endpoint pages through it, so continue tokens are sealed the same way everywhere
// (auth.SealCursor: AES-GCM under a key all replicas share, bound to the list's identity).
// A token reveals no name, and one issued for another list, tampered with or made up is a
// 400 problem naming continue.
type pageRequest struct {
	a     *API
	r     *http.Request
	list  string // the list's identity: family, parent and filter parameters
	limit int
	token string
}

// page reads ?limit= (1 to max, default def) and ?continue= for the list named list.
func (a *API) page(r *http.Request, list string, def, max int) (pageRequest, error) {
	pg := pageRequest{a: a, r: r, list: list, limit: def, token: r.URL.Query().Get("continue")}
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > max {
			return pg, fault.Invalid("limit", "limit must be an integer from 1 to %d, not %q", max, truncateParam(s))
		}
		pg.limit = n
	}
	return pg, nil
}

// open decodes the continue token into pos; without one, pos is left as it is (the start).
func (pg pageRequest) open(pos any) error {
	if pg.token == "" {
		return nil
	}
	return pg.a.tokens.OpenCursor(pg.r.Context(), pg.list, pg.token, pos)
}

// next returns the continue token leading past pos, the last key of the page, or "" when
// no page follows.
func (pg pageRequest) next(more bool, pos any) (string, error) {
	if !more {
		return "", nil
	}
	return pg.a.tokens.SealCursor(pg.r.Context(), pg.list, pos)
}
