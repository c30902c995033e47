package api

import (
	"encoding/json"
	"strings"
	"time"
)

// Object is the shape of every strata resource on the wire: orgs, groups, nodes and user
// kinds.
type Object struct {
	Kind     string          `json:"kind"`
	Metadata ObjectMeta      `json:"metadata"`
	Spec     json.RawMessage `json:"spec,omitempty"`
	// Status is what the server reports about the object; clients never write it (a status
	// sent with a write is ignored). Groups report {"staticMembers": N}.
	Status json.RawMessage `json:"status,omitempty"`
}

// ObjectMeta is an object's identity and metadata. ResourceVersion is a decimal string, as
// in Kubernetes: compare it only for equality, and pass it back for optimistic concurrency.
type ObjectMeta struct {
	Name string `json:"name"`
	// UID identifies the object for its whole life, across renames; opaque and read-only
	// (a write that sets another is refused). A deleted object's successor of the same name
	// has another UID.
	UID             string            `json:"uid,omitempty"`
	Org             string            `json:"org,omitempty"`
	Labels          map[string]string `json:"labels"`
	Annotations     map[string]string `json:"annotations"`
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	// SchemaRevision is the revision of the kind's schema the object was last written under.
	SchemaRevision int        `json:"schemaRevision,omitempty"`
	CreatedAt      *time.Time `json:"createdAt,omitempty"`
	UpdatedAt      *time.Time `json:"updatedAt,omitempty"`
}

// ObjectList is one page of a list.
type ObjectList struct {
	Items           []Object `json:"items"`
	ResourceVersion string   `json:"resourceVersion"`
	Continue        string   `json:"continue,omitempty"`
}

// Problem is an RFC 9457 problem document, the body of every strata error response.
type Problem struct {
	Type     string       `json:"type"`
	Title    string       `json:"title"`
	Status   int          `json:"status"`
	Detail   string       `json:"detail,omitempty"`
	Instance string       `json:"instance,omitempty"`
	Errors   []FieldError `json:"errors,omitempty"`
	// Reason says why a 503 was answered ("read-only", "disk-full", "connections",
	// "shutting-down", "unavailable"), so a client can tell a database that refuses writes
	// from a replica that is going away; empty for other statuses.
	Reason string `json:"reason,omitempty"`
	// Outcome is "unknown" on a 503 for a write whose COMMIT lost its connection: it may or
	// may not have been applied, so read it again before retrying (the client never
	// retries such an answer by itself).
	Outcome string `json:"outcome,omitempty"`
	// Report is the compatibility report of a refused kind registration (409).
	Report *KindReport `json:"report,omitempty"`
}

// Lines returns the problem as a person reads it, each sentence once: the headline (the
// detail, without the "invalid request: " prefix older servers put before it), the field of
// the entry of errors the headline repeats ("" when it repeats none, or one naming no
// field), and the other entries. A server states a one-field refusal both as its detail
// (sometimes after a summary, "invalid metadata: <reason>") and as its only entry; printing
// both showed every such sentence twice. The headline then becomes the entry's reason, which
// its field introduces; an entry the headline merely contains is dropped.
func (p Problem) Lines() (field, headline string, rest []FieldError) {
	headline = strings.TrimPrefix(p.Detail, "invalid request: ")
	for _, f := range p.Errors {
		switch {
		case field == "" && f.Field != "" && f.Message != "" && (headline == f.Message || strings.HasSuffix(headline, ": "+f.Message)):
			field, headline = f.Field, f.Message
		case strings.Contains(headline, f.Message):
		default:
			rest = append(rest, f)
		}
	}
	return field, headline, rest
}

// FieldError names an offending field by JSON pointer and says why it was refused.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// TokenCreateRequest asks for a new API token.
type TokenCreateRequest struct {
	Name      string     `json:"name"`
	Scopes    []string   `json:"scopes"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// Token describes an API token. Secret is set only in the response that created it.
type Token struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Scopes     []string   `json:"scopes"`
	CreatedAt  time.Time  `json:"createdAt"`
	CreatedBy  string     `json:"createdBy"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
	RevokedAt  *time.Time `json:"revokedAt,omitempty"`
	LastUsedAt *time.Time `json:"lastUsedAt,omitempty"`
	Secret     string     `json:"secret,omitempty"`
}

// TokenList is the answer of GET /v1/tokens.
type TokenList struct {
	Items []Token `json:"items"`
	// Continue, when set, is passed as ?continue= to get the next page.
	Continue string `json:"continue,omitempty"`
}

// AuditRecord is one audit log entry.
type AuditRecord struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	Actor      string    `json:"actor"`
	Action     string    `json:"action"`
	Target     string    `json:"target"`
	RemoteAddr string    `json:"remoteAddr"`
	// RequestID is the id the server gave the HTTP request that made the change (the
	// answer's X-Request-Id, also on the request's log lines); empty for strata's own actions.
	RequestID string `json:"requestId,omitempty"`
	// ClientRequestID is the X-Request-Id the client sent with that request, if any: kept
	// apart from RequestID, which the server always chooses, so no client can make its
	// records look like another request's.
	ClientRequestID string          `json:"clientRequestId,omitempty"`
	Detail          json.RawMessage `json:"detail"`
	// Cursor, in a follow (GET /v1/audit?watch=true), is where to resume after this record
	// (?after=).
	Cursor string `json:"cursor,omitempty"`
}

// AuditList is one page of the audit log, newest first; pass Next as ?before= for the next.
type AuditList struct {
	Items []AuditRecord `json:"items"`
	Next  int64         `json:"next,omitempty"`
	// Continue, when set, is passed as ?continue= to get the next page (same action filter).
	Continue string `json:"continue,omitempty"`
}

// Member is one member of a group: Static when it was added by PUT …/members/{node},
// Selected when the group's spec.selector matches its labels (both may hold).
type Member struct {
	Node     string `json:"node"`
	Static   bool   `json:"static"`
	Selected bool   `json:"selected"`
}

// MemberList is one page of a group's members, in node-name order.
type MemberList struct {
	Items    []Member `json:"items"`
	Continue string   `json:"continue,omitempty"`
}

// ApplyResult reports what a bulk apply did with one line: Result is created, updated,
// unchanged or error (then Problem says why).
type ApplyResult struct {
	Line    int      `json:"line"`
	Name    string   `json:"name,omitempty"`
	Result  string   `json:"result"`
	Problem *Problem `json:"problem,omitempty"`
}

// ApplySummary closes a bulk apply's answer: the count of each result.
type ApplySummary struct {
	Lines     int `json:"lines"`
	Created   int `json:"created"`
	Updated   int `json:"updated"`
	Unchanged int `json:"unchanged"`
	Errors    int `json:"errors"`
}
