package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/metadata"
	"github.com/stratahq/strata/internal/resource"
)

// DefaultWatchBookmarkInterval is how often a watch sends a BOOKMARK when none is configured.
const DefaultWatchBookmarkInterval = 30 * time.Second

// watchWriteTimeout bounds one write of a watch stream. Each write sets its own deadline, so
// the server's WriteTimeout (which would otherwise cut every stream a few minutes in) does
// not apply, while a client that stops reading still ends its stream instead of holding a
// goroutine forever.
const watchWriteTimeout = time.Minute

// watchEvent is one line of a watch stream.
type watchEvent struct {
	Type   string `json:"type"`
	Object any    `json:"object"`
}

// isWatch reports whether a list request asks for a watch (?watch=true); a value that is
// not a boolean is a 400.
func isWatch(r *http.Request) (bool, error) {
	raw := r.URL.Query().Get("watch")
	if raw == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(raw)
	if err != nil {
		return false, fault.Invalid("watch", "watch must be true or false, not %q", truncateParam(raw))
	}
	return b, nil
}

// watchList serves ?watch=true on the list route of kind k: newline-delimited JSON events
// {"type": "ADDED|MODIFIED|DELETED|BOOKMARK|ERROR", "object": …}, flushed one by one, in
// resourceVersion order. With ?resourceVersion=N the stream holds the changes after N (410
// when the log no longer reaches back to N); without it (or with 0) it starts with every
// current object as ADDED, read in one snapshot, then the changes after that snapshot. The
// auth filter and the label selector apply to every event (EventFor: entering the selector
// is ADDED, leaving it DELETED). A BOOKMARK every bookmark interval carries the version
// through which the stream is complete. The stream ends when the client goes, when the
// replica shuts down, or with an ERROR event (its object a problem document) when the
// watcher fell too far behind or its history was pruned; the client then resumes from the
// last version it received.
func (a *API) watchList(w http.ResponseWriter, r *http.Request, k *resource.Kind, org string, filter auth.Filter, sel metadata.Selector) error {
	if a.watch == nil {
		return fault.New(fault.KindUnavailable, "watch is not available on this replica")
	}
	ctx := r.Context()
	var (
		from    int64
		initial []client.Object
	)
	switch raw := r.URL.Query().Get("resourceVersion"); raw {
	case "", "0":
		list, err := a.resources.ListSnapshot(ctx, k.Name, org, filter, sel)
		if err != nil {
			return err
		}
		initial = list.Items
		if from, err = strconv.ParseInt(list.ResourceVersion, 10, 64); err != nil {
			return err
		}
	default:
		n, err := resource.ParseResourceVersion("resourceVersion", raw)
		if err != nil {
			return err
		}
		from = n
	}
	sub, err := a.watch.Subscribe(ctx, k.Name, org, from)
	if err != nil {
		return err
	}
	defer sub.Close()

	// The server's ReadTimeout does not reach here (net/http clears the read deadline once
	// the request is read); its WriteTimeout would, and each write below moves it.
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	send := func(ev watchEvent) error {
		if err := rc.SetWriteDeadline(time.Now().Add(watchWriteTimeout)); err != nil {
			return err
		}
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			return err
		}
		return rc.Flush()
	}
	for _, obj := range initial {
		if err := send(watchEvent{Type: "ADDED", Object: obj}); err != nil {
			return nil // the client went away; nothing can be reported to it
		}
	}
	if len(initial) == 0 {
		// Headers out now, so a client knows the watch is established before any event.
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
	interval := a.bookmarkInterval
	next := time.Now().Add(interval)
	bookmark := func() error {
		next = time.Now().Add(interval)
		rv := strconv.FormatInt(sub.Progress(), 10)
		return send(watchEvent{Type: "BOOKMARK", Object: map[string]any{
			"kind": k.Name, "metadata": map[string]string{"resourceVersion": rv}}})
	}
	for {
		nctx, cancel := context.WithDeadline(ctx, next)
		c, err := sub.Next(nctx)
		waited := nctx.Err() != nil // before cancel, which sets it too
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil // the client went away
			}
			if waited {
				if err := bookmark(); err != nil {
					return nil
				}
				continue
			}
			_ = send(watchEvent{Type: "ERROR", Object: a.problemOf(r, err)})
			return nil
		}
		if typ, ok := resource.EventFor(c, sel); ok && filter.Allows(c.Name) {
			if err := send(watchEvent{Type: typ, Object: c.Object}); err != nil {
				return nil
			}
		}
		// Bookmarks keep their rhythm while events flow too (a busy stream of changes the
		// selector filters out would otherwise send nothing at all).
		if !time.Now().Before(next) {
			if err := bookmark(); err != nil {
				return nil
			}
		}
	}
}
