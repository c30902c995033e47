package auth

import (
	"sync"
	"time"
)

// endings are the tokens this replica revoked and the console sessions it signed out, kept
// in memory so that long requests (watch streams) can ask before every event, without a
// database round trip, whether their authority ended here (Service.EndedHere). A mark is
// made before the revocation or sign-out commits, so no event committed after it can reach
// such a stream on this replica; each mark also wakes waiting streams (signal).
//
// Marks are kept for a day and then forgotten once there are many: by then every stream has
// re-checked against the database (StillValid, at most every watch re-check interval), which
// is where other replicas' revocations are learnt as well.
type endings struct {
	mu    sync.Mutex
	marks map[string]time.Time
	wake  chan struct{}
}

// endingsKept bounds the marks kept before older ones are forgotten.
const endingsKept = 10000

func tokenKey(id string) string { return "t:" + id }

func sessionKey(hash [32]byte) string { return "s:" + string(hash[:]) }

// mark records key as ended and wakes waiting streams. The returned undo takes the mark back
// (the revocation did not happen); it leaves a mark made meanwhile by another call alone.
func (e *endings) mark(key string) (undo func()) {
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.marks == nil {
		e.marks = map[string]time.Time{}
	}
	if len(e.marks) >= endingsKept {
		for k, at := range e.marks {
			if now.Sub(at) > 24*time.Hour {
				delete(e.marks, k)
			}
		}
	}
	_, had := e.marks[key]
	e.marks[key] = now
	if e.wake != nil {
		close(e.wake)
		e.wake = nil
	}
	return func() {
		if had {
			return
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if at, ok := e.marks[key]; ok && at.Equal(now) {
			delete(e.marks, key)
		}
	}
}

func (e *endings) has(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.marks[key]
	return ok
}

// signal returns a channel closed at the next mark.
func (e *endings) signal() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.wake == nil {
		e.wake = make(chan struct{})
	}
	return e.wake
}
