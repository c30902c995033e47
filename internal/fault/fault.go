// Package fault defines the error categories that capability packages return and the HTTP
// layer turns into responses. A capability package never chooses an HTTP status; it says
// what went wrong (not found, invalid, conflict, locked, …) and httpapi maps the category to
// a status and an RFC 9457 problem document in one place.
package fault

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Kind is an error category.
type Kind int

// The categories, with the HTTP status httpapi gives each.
const (
	KindInternal           Kind = iota // 500; the cause is logged, never shown
	KindInvalid                        // 400 (422 for a well-formed body that breaks a rule)
	KindUnauthenticated                // 401
	KindForbidden                      // 403
	KindNotFound                       // 404
	KindConflict                       // 409
	KindPreconditionFailed             // 412
	KindTooLarge                       // 413
	KindUnprocessable                  // 422
	KindLocked                         // 423
	KindUnavailable                    // 503
	KindMethodNotAllowed               // 405
	KindGone                           // 410
	// KindTooNew: a resourceVersion beyond every committed one (504
	// resource-version-too-large, as Kubernetes answers a watch from the future).
	KindTooNew // 504
)

// FieldError names one offending field by JSON pointer and says why.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is a categorised error. Detail is shown to the client; Err is logged only.
type Error struct {
	Kind   Kind
	Detail string
	Fields []FieldError
	// Body, when set, replaces the problem document: some clients expect a protocol-specific
	// body (Terraform's http backend reads the lock holder's LockInfo from a 423).
	Body        []byte
	ContentType string
	// Extensions are extra members of the problem document (RFC 9457 §3.2), e.g. the
	// compatibility report of a refused kind registration.
	Extensions map[string]any
	Err        error
}

// Faulter is an error that knows its fault: the database layer's errors are, so the HTTP
// layer turns them into problems knowing only this package.
type Faulter interface {
	Fault() *Error
}

// Unavailability reasons, the "reason" member of a 503 problem: what a load balancer or an
// operator needs to tell a database that refuses writes from one that is gone.
const (
	ReasonReadOnly    = "read-only"
	ReasonDiskFull    = "disk-full"
	ReasonConnections = "connections"
	ReasonUnavailable = "unavailable"
	// ReasonKeys: the database holds values sealed under keys this replica lacks (it is not
	// ready, and its secret reads and writes are refused) — a restart with the key files
	// mends it, another replica may serve meanwhile.
	ReasonKeys = "keys"
	// ReasonShuttingDown ends the streams (watches, audit follows) of a replica that stops:
	// nothing failed, the client resumes on another replica.
	ReasonShuttingDown = "shutting-down"
)

// Unavailable is a 503 with a reason (one of the Reason constants).
func Unavailable(reason string, err error, format string, args ...any) *Error {
	return &Error{Kind: KindUnavailable, Detail: fmt.Sprintf(format, args...), Extensions: map[string]any{"reason": reason}, Err: err}
}

// ReasonOf is the reason of a 503 (ReasonUnavailable when it names none), or "".
func ReasonOf(e *Error) string {
	if e == nil || e.Kind != KindUnavailable {
		return ""
	}
	if r, ok := e.Extensions["reason"].(string); ok {
		return r
	}
	return ReasonUnavailable
}

func (e *Error) Error() string {
	msg := e.Detail
	if len(e.Fields) > 0 {
		msg = fmt.Sprintf("%s: %s: %s", msg, e.Fields[0].Field, e.Fields[0].Message)
	}
	if e.Err != nil {
		return msg + ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the category of err: the Kind of the outermost *Error in its chain, or
// KindInternal.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}

// New builds an error of kind with a client-facing detail.
func New(kind Kind, format string, args ...any) error {
	return &Error{Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

// Wrap categorises a cause, keeping it for the logs.
func Wrap(kind Kind, err error, format string, args ...any) error {
	return &Error{Kind: kind, Detail: fmt.Sprintf(format, args...), Err: err}
}

// Invalid is a 400 naming one field (a JSON pointer such as /metadata/name) and the reason.
// The detail is the reason itself (the problem's title already says the request is
// invalid); a request that is wrong as a whole (field "", e.g. a body that is not JSON) has
// no field entry, so that clients printing both never show the same sentence twice.
func Invalid(field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	e := &Error{Kind: KindInvalid, Detail: msg}
	if field != "" {
		e.Fields = []FieldError{{Field: field, Message: msg}}
	}
	return e
}

// InvalidFields is a 400 listing several field errors.
func InvalidFields(detail string, fields []FieldError) error {
	return &Error{Kind: KindInvalid, Detail: detail, Fields: fields}
}

// NotFound says a named thing does not exist.
func NotFound(format string, args ...any) error { return New(KindNotFound, format, args...) }

// Conflict says the request conflicts with the current state (exists already, stale version).
func Conflict(format string, args ...any) error { return New(KindConflict, format, args...) }

// Gone says that what was asked for existed once and is no longer kept (a watch resuming
// from a resourceVersion older than the retained change log).
func Gone(format string, args ...any) error { return New(KindGone, format, args...) }

// Forbidden says the caller is authenticated but not allowed.
func Forbidden(format string, args ...any) error { return New(KindForbidden, format, args...) }

// UnprocessableFields returns a 422 for a well-formed request that breaks rules, naming every
// offending field (e.g. each invalid label key).
func UnprocessableFields(detail string, fields []FieldError) error {
	return &Error{Kind: KindUnprocessable, Detail: detail, Fields: fields}
}

// Truncate shortens s to at most n bytes (cut at a character boundary) followed by "…", for
// quoting user input in a message without echoing a megabyte of it back.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
