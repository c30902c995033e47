package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// WatchOptions start a watch.
type WatchOptions struct {
	// ResourceVersion, when set, streams the changes after it (a list's ResourceVersion, or
	// the last event's). Empty starts with every current object as ADDED, then the changes.
	ResourceVersion string
	// LabelSelector restricts the watch; an object that stops matching arrives as DELETED,
	// one that starts matching as ADDED.
	LabelSelector string
	// Org restricts the watch to the objects of one org, as ListOptions.Org; a node that
	// moves out of it arrives as DELETED, one that moves in as ADDED.
	Org string
}

// Watcher reads one watch stream. Call Close when done.
type Watcher struct {
	body io.ReadCloser
	sc   *bufio.Scanner
}

// maxWatchLine bounds one event line (an object is bounded by the server's body limit).
const maxWatchLine = 64 << 20

// Watch starts a watch of the objects r serves (GET …?watch=true). The stream has no
// overall timeout: it ends when ctx does, when Close is called, or when the server ends it.
// A 410 (IsGone) means the version is older than the server's change history: list again
// and watch from the list's ResourceVersion.
func (r *Resources) Watch(ctx context.Context, opts WatchOptions) (*Watcher, error) {
	q := url.Values{"watch": {"true"}}
	if opts.ResourceVersion != "" {
		q.Set("resourceVersion", opts.ResourceVersion)
	}
	if opts.LabelSelector != "" {
		q.Set("labelSelector", opts.LabelSelector)
	}
	if opts.Org != "" {
		q.Set("org", opts.Org)
	}
	// The same client without its overall timeout, which would cut a long-lived stream.
	c := *r.c
	hc := *r.c.http
	hc.Timeout = 0
	c.http = &hc
	resp, err := c.stream(ctx, Request{Method: http.MethodGet, Path: r.base, Query: q}, nil)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxWatchLine)
	return &Watcher{body: resp.Body, sc: sc}, nil
}

// Next returns the next event. When the server ends the stream with an ERROR event, Next
// returns it as an *Error (IsGone for a pruned history; 503 when the watcher fell behind or
// the server shut down: resume from the last event's ResourceVersion). io.EOF means the
// stream ended without one.
func (w *Watcher) Next() (Event, error) {
	for w.sc.Scan() {
		line := w.sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var raw struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := json.Unmarshal(line, &raw); err != nil {
			return Event{}, fmt.Errorf("watch: bad event line: %w", err)
		}
		if raw.Type == "ERROR" {
			e := &Error{}
			if err := json.Unmarshal(raw.Object, &e.Problem); err != nil {
				return Event{}, fmt.Errorf("watch: bad error event: %w", err)
			}
			e.Status = e.Problem.Status
			return Event{}, e
		}
		ev := Event{Type: raw.Type}
		if err := json.Unmarshal(raw.Object, &ev.Object); err != nil {
			return Event{}, fmt.Errorf("watch: bad %s event: %w", raw.Type, err)
		}
		return ev, nil
	}
	if err := w.sc.Err(); err != nil {
		return Event{}, err
	}
	return Event{}, io.EOF
}

// Close ends the watch.
func (w *Watcher) Close() error { return w.body.Close() }

// IsGone reports whether err is a 410: a watch's resourceVersion is older than the server
// keeps changes for.
func IsGone(err error) bool { return statusIs(err, http.StatusGone) }
