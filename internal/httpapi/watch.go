package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/metadata"
	"github.com/stratahq/strata/internal/resource"
)

// DefaultWatchBookmarkInterval is how often a watch sends a BOOKMARK when none is configured.
const DefaultWatchBookmarkInterval = 30 * time.Second

// DefaultWatchMaxDuration is the shortest lifetime of a watch stream when none is
// configured; each stream lives a random duration in [d, 2d), as Kubernetes spreads its
// --min-request-timeout, so streams opened together do not all end (and reconnect) together.
const DefaultWatchMaxDuration = 30 * time.Minute

// DefaultWatchHeadWait is how long a watch from a resourceVersion beyond the newest
// committed one waits for writes in flight before answering 504, as Kubernetes waits (3 s).
const DefaultWatchHeadWait = 3 * time.Second

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
// auth filter, the label selector and ?org= (inOrg) apply to every event (EventIn: entering
// the selector or the org is ADDED, leaving it DELETED). A BOOKMARK every bookmark interval carries the version
// through which the stream is complete. The stream ends when the client goes, when the
// replica shuts down, or with an ERROR event (its object a problem document) when the
// watcher fell too far behind or its history was pruned; the client then resumes from the
// last version it received.
//
// Streams follow access: every recheck interval the stream asks whether its token is still
// in force, and ends with an ERROR event (status 401) when it was revoked or has expired; a
// console stream asks the same of its session (signed out, expired). A revocation or
// sign-out on this replica ends the stream before its next event (an initial ADDED event
// too), and wakes it if it
// waits; the token's or session's expiry is a re-check of its own. A
// stream ends cleanly (no ERROR: the chunked answer just ends) after its lifetime, a random
// duration in [max, 2·max); clients resume from the last resourceVersion they received. A
// resourceVersion beyond the newest committed one waits up to the head wait for writes in
// flight, then answers 504 resource-version-too-large with currentResourceVersion.
func (a *API) watchList(w http.ResponseWriter, r *http.Request, p *auth.Principal, k *resource.Kind, org string, filter auth.Filter, sel metadata.Selector, inOrg string) error {
	if a.watch == nil {
		return fault.New(fault.KindUnavailable, "watch is not available on this replica")
	}
	ctx := r.Context()
	var (
		from    int64
		initial []api.Object
	)
	switch raw := r.URL.Query().Get("resourceVersion"); raw {
	case "", "0":
		list, err := a.resources.ListSnapshot(ctx, k.Name, org, filter, sel, inOrg)
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
		if err := a.awaitHead(ctx, from); err != nil {
			return err
		}
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
	acc := a.streamAccess(r, p)
	for _, obj := range initial {
		// The snapshot's events are events too: asked before each, like every later one, so
		// a revocation, sign-out or expiry between the request's authentication and its
		// snapshot sends none of it.
		if acc.endedHere() {
			_ = send(watchEvent{Type: "ERROR", Object: a.problemOf(r, acc.endedErr())})
			return nil
		}
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
	end := time.Now().Add(a.watchLifetime())
	authCtx, stopAuth := acc.watch(ctx)
	defer stopAuth()
	recheck := acc.nextRecheck(time.Now())
	// due runs what is due when a wait ends or an event was handled: false ends the stream.
	due := func() bool {
		now := time.Now()
		if !now.Before(end) {
			return false // the stream's lifetime is over: end it cleanly, the client resumes
		}
		if !now.Before(recheck) {
			recheck = acc.nextRecheck(now)
			if err := acc.stillValid(ctx); err != nil {
				if ctx.Err() == nil {
					_ = send(watchEvent{Type: "ERROR", Object: a.streamProblem(r, "watch", err)})
				}
				return false
			}
		}
		if !now.Before(next) {
			return bookmark() == nil
		}
		return true
	}
	for {
		wake := next
		if recheck.Before(wake) {
			wake = recheck
		}
		if end.Before(wake) {
			wake = end
		}
		nctx, cancel := context.WithDeadline(authCtx, wake)
		c, err := sub.Next(nctx)
		waited := nctx.Err() != nil // before cancel, which sets it too
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil // the client went away
			}
			if authCtx.Err() != nil {
				_ = send(watchEvent{Type: "ERROR", Object: a.problemOf(r, acc.endedErr())})
				return nil
			}
			if waited {
				if !due() {
					return nil
				}
				continue
			}
			_ = send(watchEvent{Type: "ERROR", Object: a.streamProblem(r, "watch", err)})
			return nil
		}
		if typ, ok := resource.EventIn(c, sel, k.OrgMember, inOrg); ok && filter.Allows(c.Name) {
			// Asked before every event: a revocation or sign-out on this replica was marked
			// before it committed, so no event committed after it gets through.
			if acc.endedHere() {
				_ = send(watchEvent{Type: "ERROR", Object: a.problemOf(r, acc.endedErr())})
				return nil
			}
			if err := send(watchEvent{Type: typ, Object: c.Object}); err != nil {
				return nil
			}
		}
		// Bookmarks, the token's re-check and the lifetime keep their rhythm while events
		// flow too (a busy stream of changes the selector filters out would otherwise never
		// wait long enough to see them due).
		if !due() {
			return nil
		}
	}
}

// awaitHead returns once the newest committed resourceVersion reaches from, waiting up to
// the head wait for writes in flight (a client may have learnt a version from another
// replica a moment before this one's database shows it); after that, 504.
func (a *API) awaitHead(ctx context.Context, from int64) error {
	deadline := time.Now().Add(a.watchHeadWait)
	for {
		head, err := a.resources.HeadVersion(ctx)
		if err != nil {
			return err
		}
		if head >= from {
			return nil
		}
		if !time.Now().Before(deadline) {
			return &fault.Error{Kind: fault.KindTooNew,
				Detail:     fmt.Sprintf("resourceVersion %d is beyond the newest committed version %d: watch from a version a list or an event gave you, or from 0", from, head),
				Extensions: map[string]any{"currentResourceVersion": strconv.FormatInt(head, 10)}}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(50*time.Millisecond, time.Until(deadline))):
		}
	}
}

// streamAccess is the authority a long request (a watch stream, the audit follow) runs on:
// its token, and for a console request also the console session it was made in.
type streamAccess struct {
	tokens   *auth.Service // nil: nothing to check
	p        *auth.Principal
	session  *auth.Session
	interval time.Duration
}

func (a *API) streamAccess(r *http.Request, p *auth.Principal) streamAccess {
	acc := streamAccess{tokens: a.tokens, p: p, interval: a.watchRecheck}
	if s, ok := r.Context().Value(consoleSessionKey{}).(auth.Session); ok {
		acc.session = &s
	}
	return acc
}

// stillValid asks the database whether the stream's authority is still in force.
func (acc streamAccess) stillValid(ctx context.Context) error {
	switch {
	case acc.tokens == nil:
		return nil
	case acc.session != nil:
		return acc.tokens.SessionStillValid(ctx, *acc.session)
	}
	return acc.tokens.StillValid(ctx, acc.p)
}

// endedHere is the check before every event: revoked or signed out on this replica, or the
// session expired. It asks no database.
func (acc streamAccess) endedHere() bool {
	return acc.tokens != nil && acc.tokens.EndedHere(acc.p, acc.session)
}

// endedErr is what the stream's ERROR event says when its authority ended.
func (acc streamAccess) endedErr() error {
	if acc.session != nil {
		return auth.ErrSessionEnded
	}
	return auth.ErrTokenEnded
}

// nextRecheck is when the stream asks the database again after now: one interval later, or
// at the expiry of its token or session if that comes first, so a stream ends when they
// expire rather than up to an interval after.
func (acc streamAccess) nextRecheck(now time.Time) time.Time {
	next := now.Add(acc.interval)
	for _, exp := range []*time.Time{expiryOf(acc.p), sessionExpiry(acc.session)} {
		if exp != nil && exp.After(now) && exp.Before(next) {
			next = *exp
		}
	}
	return next
}

func expiryOf(p *auth.Principal) *time.Time {
	if p == nil {
		return nil
	}
	return p.ExpiresAt
}

func sessionExpiry(s *auth.Session) *time.Time {
	if s == nil {
		return nil
	}
	return &s.ExpiresAt
}

// watch returns a context that is cancelled as soon as the stream's authority ends on this
// replica (a revocation or sign-out here wakes it: auth.Service.Endings), so a waiting stream
// ends at once instead of at its next event or re-check; stop releases it.
func (acc streamAccess) watch(ctx context.Context) (context.Context, func()) {
	if acc.tokens == nil {
		return ctx, func() {}
	}
	actx, cancel := context.WithCancel(ctx)
	go func() {
		for {
			sig := acc.tokens.Endings() // before the check: no mark can fall between them
			if acc.endedHere() {
				cancel()
				return
			}
			select {
			case <-sig:
			case <-actx.Done():
				return
			}
		}
	}()
	return actx, cancel
}

// watchLifetime is a new stream's lifetime, in [watchMax, 2·watchMax): as Kubernetes does,
// spread so that the streams opened together (after a restart, a failover) do not all end,
// and come back, at once. watchJitter draws the random part (rand.N unless a test sets its
// own source, which makes the spread checkable without chance).
func (a *API) watchLifetime() time.Duration {
	jitter := a.watchJitter
	if jitter == nil {
		jitter = rand.N[time.Duration]
	}
	return a.watchMax + jitter(a.watchMax)
}
