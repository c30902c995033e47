package httpapi

import (
	"context"
	"errors"
	"github.com/stratahq/strata/internal/auth"
	"net/http"
	"time"

	"github.com/stratahq/strata/internal/fault"
)

// healthz answers while the process runs; it never touches the database, so an orchestrator
// does not restart replicas because PostgreSQL is briefly away.
func (a *API) healthz(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 when this replica can serve reads: the database reachable, its schema
// one this release runs on, and whatever else the readiness check requires. A database that
// refuses writes (read-only, a standby, a full disk) fails only /readyz?writes=true: every
// replica shares that database, so draining them all from a balancer would refuse the reads
// they could still serve. Plain /readyz then answers 200 with "writes" naming the reason and
// a warning (docs/operations.md, "Readiness", is the one table of reasons).
func (a *API) readyz(w http.ResponseWriter, r *http.Request) error {
	writes, err := boolParam(r, "writes")
	if err != nil {
		return err
	}
	if a.ready == nil {
		return writeJSON(w, http.StatusOK, map[string]any{"status": "ready"})
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	warnings, err := a.ready(ctx)
	if err != nil {
		reason := ReadyReason(err)
		if !writes && WritesOnly(reason) {
			return writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "writes": reason,
				"warnings": append(warnings, readyReasonDetail[reason]+"; writes answer 503 (/readyz?writes=true fails)")})
		}
		// Unauthenticated callers learn the reason, not the database's address or role:
		// the details go to the log.
		a.logger.WarnContext(r.Context(), "not ready", "err", err)
		detail := readyReasonDetail[reason]
		if detail == "" {
			detail = "not ready: " + readyDetail(err)
		}
		return fault.Unavailable(reason, err, "%s", detail)
	}
	body := map[string]any{"status": "ready"}
	if len(warnings) > 0 {
		body["warnings"] = warnings
	}
	return writeJSON(w, http.StatusOK, body)
}

var readyReasonDetail = map[string]string{
	fault.ReasonReadOnly:    "not ready: the database refuses writes (read-only or a standby)",
	fault.ReasonDiskFull:    "not ready: the database's disk is full",
	fault.ReasonConnections: "not ready: the database has no connection to spare",
}

// ReadyReason is the reason a readiness error is reported under, by /readyz and by the
// strata_ready metrics alike: a fault's reason (read-only, disk-full, connections,
// unavailable, or a reason of its own) or "unavailable" for anything else.
func ReadyReason(err error) string {
	if err == nil {
		return ""
	}
	if reason := fault.ReasonOf(classify(err)); reason != "" {
		return reason
	}
	return fault.ReasonUnavailable
}

// WritesOnly reports whether a readiness reason stops only writes (a database that refuses
// them), so that it fails /readyz?writes=true and not /readyz.
func WritesOnly(reason string) bool {
	return reason == fault.ReasonReadOnly || reason == fault.ReasonDiskFull
}

func (a *API) versionInfo(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, map[string]string{"version": a.version})
}

// readyDetail says why a replica is not ready without what only operators may see: a
// database error is named by its kind, other reasons (schema, the render cache's session)
// are strata's own and are shown.
func readyDetail(err error) string {
	var fr fault.Faulter
	if errors.As(err, &fr) && fr.Fault() != nil {
		return "the database is not reachable"
	}
	return err.Error()
}

// statusGet is GET /v1/status: the replica's checks (strata doctor's, with the database's
// role and what it lacks), for admins only, since they describe the database.
func (a *API) statusGet(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if !p.IsAdmin() {
		return fault.Forbidden("GET /v1/status needs the admin scope: it describes the database and its role")
	}
	if a.status == nil {
		return fault.NotFound("this replica reports no status")
	}
	st, err := a.status(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, st)
}
