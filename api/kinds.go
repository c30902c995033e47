package api

import (
	"encoding/json"
	"time"
)

// KindRequest registers a revision of a kind's schema (PUT /v1/kinds/{kind}).
type KindRequest struct {
	// Scope is "org" (objects live in an org, /v1/orgs/{org}/resources/{kind}) or "global"
	// (/v1/resources/{kind}). Required on the first registration; it cannot change later.
	Scope string `json:"scope,omitempty"`
	// Schema is a JSON Schema (2020-12, strata's structural subset) describing spec.
	Schema json.RawMessage `json:"schema"`
	// Acknowledge names the changes the caller accepts knowingly.
	Acknowledge []KindAck `json:"acknowledge,omitempty"`
}

// KindAck acknowledges one change of a registration report by its path and rule (or ack name).
type KindAck struct {
	Path string `json:"path"`
	Rule string `json:"rule"`
}

// KindImpact is what the data-aware check found for one change.
type KindImpact struct {
	Count  int      `json:"count"`
	Sample []string `json:"sample"`
}

// KindFinding is one classified change of a registration report.
type KindFinding struct {
	Path         string      `json:"path"`
	Field        string      `json:"field"`
	Rule         string      `json:"rule"`
	Row          int         `json:"row"`
	Verdict      string      `json:"verdict"`
	Acknowledged bool        `json:"acknowledged,omitempty"`
	Ack          string      `json:"ack,omitempty"`
	Message      string      `json:"message"`
	WayForward   string      `json:"wayForward,omitempty"`
	Impact       *KindImpact `json:"impact,omitempty"`
	Against      int         `json:"against,omitempty"`
	// Earlier marks a change that an earlier registration already made (the latest revision
	// differs from the older revision Against in the same way): shown as context, and
	// never asked to be acknowledged again.
	Earlier bool `json:"earlier,omitempty"`
}

// KindReport is the compatibility report of a registration.
type KindReport struct {
	Compatible bool          `json:"compatible"`
	Changes    []KindFinding `json:"changes"`
	// Scanned is how many stored objects the data-aware checks examined.
	Scanned int `json:"scanned"`
	// Against lists the revisions the schema was compared with: the latest and every older
	// one stored objects still reference.
	Against []int `json:"against"`
	// Filtered: the reader may not read every object of the kind, so the impacts list only
	// the objects it may read (and count only those) and Scanned is 0.
	Filtered bool `json:"filtered,omitempty"`
	// RedundantAcks are the request's acknowledgements that no change of this registration
	// needed: one for a change an earlier registration already decided, for a change whose
	// verdict is accept or reject, or any on a kind's first registration. They do not refuse
	// the registration (a script re-running an apply with the acks it once needed still
	// works); they are listed so that an acknowledgement is never taken silently.
	RedundantAcks []KindRedundantAck `json:"redundantAcks,omitempty"`
}

// KindRedundantAck is an acknowledgement a registration did not need, and why.
type KindRedundantAck struct {
	Path   string `json:"path"`
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
}

// KindResult answers a registration.
type KindResult struct {
	Kind     string `json:"kind"`
	Scope    string `json:"scope"`
	Revision int    `json:"revision"`
	// Unchanged: the schema equals the current revision's; nothing was registered.
	Unchanged bool `json:"unchanged,omitempty"`
	// DryRun: the report of a registration that was not made.
	DryRun bool       `json:"dryRun,omitempty"`
	Report KindReport `json:"report"`
}

// KindInfo describes a kind (GET /v1/kinds, GET /v1/kinds/{kind}).
type KindInfo struct {
	Name      string          `json:"name"`
	Scope     string          `json:"scope"`
	Builtin   bool            `json:"builtin"`
	Revision  int             `json:"revision"`
	Schema    json.RawMessage `json:"schema,omitempty"`
	CreatedAt time.Time       `json:"createdAt"`
	UpdatedAt time.Time       `json:"updatedAt"`
}

// KindRevision is one immutable revision of a kind.
type KindRevision struct {
	Kind      string          `json:"kind"`
	Revision  int             `json:"revision"`
	Schema    json.RawMessage `json:"schema"`
	Report    KindReport      `json:"report"`
	CreatedBy string          `json:"createdBy"`
	CreatedAt time.Time       `json:"createdAt"`
}
