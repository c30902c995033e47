package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/stratahq/strata/internal/fault"
)

// healthz answers while the process runs; it never touches the database, so an orchestrator
// does not restart replicas because PostgreSQL is briefly away.
func (a *API) healthz(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 only when the database is reachable and its schema is current.
func (a *API) readyz(w http.ResponseWriter, r *http.Request) error {
	if a.ready == nil {
		return writeJSON(w, http.StatusOK, map[string]any{"status": "ready"})
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	warnings, err := a.ready(ctx)
	if err != nil {
		return fault.Wrap(fault.KindUnavailable, err, "not ready: %v", err)
	}
	body := map[string]any{"status": "ready"}
	if len(warnings) > 0 {
		body["warnings"] = warnings
	}
	return writeJSON(w, http.StatusOK, body)
}

func (a *API) versionInfo(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, map[string]string{"version": a.version})
}
