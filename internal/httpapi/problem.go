package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/fault"
)

// ProblemTypeBase prefixes every problem "type"; the suffix is stable and documented in
// docs/api.md, so clients may switch on it.
const ProblemTypeBase = "https://strata.dev/problems/"

// handlerFunc is the shape of every handler: it writes a success response itself and
// returns any error, which serve turns into exactly one problem response. There is no way
// to forget a return after writing an error.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

type kindInfo struct {
	status int
	slug   string
	title  string
}

var kinds = map[fault.Kind]kindInfo{
	fault.KindInternal:           {http.StatusInternalServerError, "internal", "Internal server error"},
	fault.KindInvalid:            {http.StatusBadRequest, "validation", "Invalid request"},
	fault.KindUnauthenticated:    {http.StatusUnauthorized, "unauthenticated", "Authentication required"},
	fault.KindForbidden:          {http.StatusForbidden, "forbidden", "Forbidden"},
	fault.KindNotFound:           {http.StatusNotFound, "not-found", "Not found"},
	fault.KindConflict:           {http.StatusConflict, "conflict", "Conflict"},
	fault.KindPreconditionFailed: {http.StatusPreconditionFailed, "precondition-failed", "Precondition failed"},
	fault.KindTooLarge:           {http.StatusRequestEntityTooLarge, "too-large", "Request body too large"},
	fault.KindUnprocessable:      {http.StatusUnprocessableEntity, "unprocessable", "Unprocessable request"},
	fault.KindLocked:             {http.StatusLocked, "locked", "Locked"},
	fault.KindUnavailable:        {http.StatusServiceUnavailable, "unavailable", "Service unavailable"},
	fault.KindMethodNotAllowed:   {http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed"},
	fault.KindGone:               {http.StatusGone, "gone", "Gone"},
	fault.KindTooNew:             {http.StatusGatewayTimeout, "resource-version-too-large", "Resource version too large"},
}

// classify maps any error to a fault.Error, so the one writer below has a single input.
// Errors that are not categorised by the capability packages are recognised here: request
// bodies that are too large (413); errors that know their fault (the database layer's:
// fault.Faulter, so this package knows nothing of the database) and context errors (a
// timed-out request is a 503); everything else is a 500 whose cause is logged, never shown.
func classify(err error) *fault.Error {
	var fe *fault.Error
	if errors.As(err, &fe) {
		return fe
	}
	var maxErr *http.MaxBytesError
	if errors.As(err, &maxErr) {
		return &fault.Error{Kind: fault.KindTooLarge, Detail: fmt.Sprintf("request body is larger than the limit of %d bytes", maxErr.Limit), Err: err}
	}
	var fr fault.Faulter
	if errors.As(err, &fr) {
		if f := fr.Fault(); f != nil {
			return f
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fault.Unavailable(fault.ReasonUnavailable, err, "the request timed out")
	case errors.Is(err, context.Canceled):
		return fault.Unavailable(fault.ReasonUnavailable, err, "the request was cancelled")
	}
	return &fault.Error{Kind: fault.KindInternal, Detail: "internal error; the server log has the details", Err: err}
}

// writeError writes err as an RFC 9457 problem document (or, for protocol-specific errors
// such as Terraform's 423, the body the protocol expects).
func writeError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	fe := classify(err)
	info, ok := kinds[fe.Kind]
	if !ok {
		info = kinds[fault.KindInternal]
	}
	if fe.Kind == fault.KindInternal || fe.Kind == fault.KindUnavailable {
		logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "status", info.status, "err", err)
	}
	if fe.Kind == fault.KindUnauthenticated {
		// Basic is offered only where the clients that need it call (Terraform's http
		// backend, Salt's http_json): a browser that meets Basic anywhere else would ask for
		// credentials and send them with every later request, cross-site ones included.
		if strings.HasPrefix(r.URL.Path, "/v1/state/") || strings.HasPrefix(r.URL.Path, "/v1/salt/") {
			w.Header().Set("WWW-Authenticate", `Bearer realm="strata", Basic realm="strata"`)
		} else {
			w.Header().Set("WWW-Authenticate", `Bearer realm="strata"`)
		}
	}
	if fe.Kind == fault.KindUnavailable && w.Header().Get("Retry-After") == "" {
		// Seconds: a database that refuses writes (read-only, disk full) is not back in one.
		retry := "1"
		if r := fault.ReasonOf(fe); r == fault.ReasonReadOnly || r == fault.ReasonDiskFull {
			retry = "10"
		}
		w.Header().Set("Retry-After", retry)
	}
	if fe.Body != nil {
		ct := fe.ContentType
		if ct == "" {
			ct = "application/json"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(info.status)
		_, _ = w.Write(fe.Body)
		return
	}
	p := api.Problem{
		Type:     ProblemTypeBase + info.slug,
		Title:    info.title,
		Status:   info.status,
		Detail:   fe.Detail,
		Instance: r.URL.Path,
	}
	for _, f := range fe.Fields {
		p.Errors = append(p.Errors, api.FieldError{Field: f.Field, Message: f.Message})
	}
	var doc any = p
	if len(fe.Extensions) > 0 {
		m := map[string]any{}
		if b, err := json.Marshal(p); err == nil && json.Unmarshal(b, &m) == nil {
			for k, v := range fe.Extensions {
				if _, taken := m[k]; !taken {
					m[k] = v
				}
			}
			doc = m
		}
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(info.status)
	_ = json.NewEncoder(w).Encode(doc)
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
	return nil
}

// writeRawJSON answers b, which is JSON already (a render's encoded pillar).
func writeRawJSON(w http.ResponseWriter, status int, b []byte) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	_, _ = w.Write([]byte{'\n'})
	return nil
}

// decodeJSON reads a JSON request body into v. Unknown fields, trailing data, a wrong
// content type and malformed JSON are 400s that say where the problem is; a body over the
// limit is a 413. Numbers decode into json.RawMessage/json.Number fields verbatim, so large
// integers keep their precision.
func decodeJSON(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !isJSONContentType(ct) {
		return &fault.Error{Kind: fault.KindInvalid, Detail: fmt.Sprintf("Content-Type must be application/json, not %q", ct)}
	}
	// A body of null decodes into the zero request without an error: PUT would replace an
	// object with an empty one. Every request body is an object, so null is refused.
	br := bufio.NewReader(r.Body)
	if isJSONNull(br) {
		return fault.Invalid("", "expected a JSON object, got JSON null")
	}
	dec := json.NewDecoder(br)
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return err
		}
		return fault.Invalid("", "the request body must hold exactly one JSON value")
	}
	return nil
}

// isJSONNull reports whether the next JSON value of br is the literal null, reading none of
// it (whitespace aside).
func isJSONNull(br *bufio.Reader) bool {
	for {
		b, err := br.Peek(1)
		if err != nil {
			return false
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			_, _ = br.ReadByte()
			continue
		}
		lit, _ := br.Peek(4)
		return string(lit) == "null"
	}
}

// isJSONContentType accepts JSON media types, and application/x-www-form-urlencoded because
// that is what `curl -d` sends unless told otherwise; the body must still be JSON. Anything
// else (XML, multipart, text) is refused with a 400 that names the type. Form bodies from a
// browser or with Basic credentials never get here: refuseCrossSite refuses them first.
func isJSONContentType(ct string) bool {
	ct = strings.ToLower(strings.TrimSpace(strings.SplitN(ct, ";", 2)[0]))
	return ct == "application/json" || strings.HasSuffix(ct, "+json") || ct == "application/x-www-form-urlencoded"
}

// jsonError turns a decoding error into a 400 (or passes a MaxBytesError through for 413).
func jsonError(err error) error {
	var maxErr *http.MaxBytesError
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	var timeErr *time.ParseError
	switch {
	case errors.As(err, &maxErr):
		return err
	case errors.Is(err, io.EOF):
		return fault.Invalid("", "the request body is empty; a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fault.Invalid("", "the request body ends in the middle of a JSON value")
	case errors.As(err, &syntaxErr):
		return fault.Invalid("", "malformed JSON at byte %d: %v", syntaxErr.Offset, syntaxErr)
	case errors.As(err, &typeErr):
		field := ""
		if typeErr.Field != "" {
			field = "/" + strings.ReplaceAll(typeErr.Field, ".", "/")
		}
		return fault.Invalid(field, "expected %s, got JSON %s", jsonKind(typeErr.Type), typeErr.Value)
	case errors.As(err, &timeErr):
		return fault.Invalid("", "a time must be in RFC 3339 form, such as 2026-11-22T06:00:00Z: %q is not", strings.Trim(timeErr.Value, `"`))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := fault.Truncate(strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`), 200)
		return fault.Invalid("/"+name, "unknown field %q", name)
	}
	return fault.Invalid("", "invalid JSON: %v", err)
}

// jsonKind names a Go type the way a JSON client thinks of it.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		if t == reflect.TypeFor[time.Time]() {
			return "an RFC 3339 time string"
		}
		return "a JSON object"
	case reflect.Slice, reflect.Array:
		return "a JSON array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "a value"
}
