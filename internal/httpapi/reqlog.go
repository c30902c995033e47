package httpapi

import (
	"context"
	"log/slog"
)

// requestIDKey carries a request's id in its context, for the log.
type requestIDKey struct{}

// RequestID returns the id of the request ctx belongs to, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// LogHandler wraps h so every record logged with a request's context (logger.InfoContext,
// ErrorContext, …) carries request_id, whichever package logs it: a failed request's error
// line, a keeper warning during a LOCK, and the request line itself can be joined.
func LogHandler(h slog.Handler) slog.Handler { return requestIDHandler{h} }

type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r = r.Clone()
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
