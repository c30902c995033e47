package server

import (
	"context"
	"sync"
)

// Reloader carries reload requests (SIGHUP, what `systemctl reload strata` sends) from the
// process's signal handling to the running server. A server re-reads, on each request, what
// it can take without a restart: the TLS pair and the key files and key commands at their
// configured paths. Flags and environment variables (strata.env) are read once at start;
// changing them needs a restart.
type Reloader struct {
	mu      sync.Mutex
	serving int
	ch      chan struct{}
}

// NewReloader makes a Reloader; give it to Run through WithReloader.
func NewReloader() *Reloader { return &Reloader{ch: make(chan struct{}, 1)} }

// Request asks the running server to reload and reports whether one runs to do it. false
// means no server is running (a CLI command), and the caller decides what the signal means
// there. A request made while the server is still starting is carried out once it serves. Requests arriving while a reload is still
// pending are merged into it.
func (r *Reloader) Request() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.serving == 0 {
		return false
	}
	select {
	case r.ch <- struct{}{}:
	default:
	}
	return true
}

// listen marks a server as taking requests until release is called.
func (r *Reloader) listen() (requests <-chan struct{}, release func()) {
	r.mu.Lock()
	r.serving++
	r.mu.Unlock()
	return r.ch, func() {
		r.mu.Lock()
		r.serving--
		r.mu.Unlock()
	}
}

type reloaderKey struct{}

// WithReloader returns a context carrying r: Run takes reload requests from it.
func WithReloader(ctx context.Context, r *Reloader) context.Context {
	return context.WithValue(ctx, reloaderKey{}, r)
}

func reloaderFrom(ctx context.Context) *Reloader {
	r, _ := ctx.Value(reloaderKey{}).(*Reloader)
	return r
}

// reloadLoop runs reload for each request until ctx ends. A reload only logs what failed:
// whatever does not load keeps the replica on what it had, and the process never exits.
func reloadLoop(ctx context.Context, requests <-chan struct{}, reload func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-requests:
			reload()
		}
	}
}
