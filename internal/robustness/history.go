package robustness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Outcome is what a client knows about an operation when it returns.
type Outcome int

const (
	// OK: the server answered with success; the operation took effect.
	OK Outcome = iota
	// Failed: the server answered with a refusal (409, 412, 404, …) or a failure that
	// promises nothing was written (a 503 without "outcome": "unknown"): the operation did
	// not take effect.
	Failed
	// Unknown: no answer (transport error), a 504, or a 503 whose problem says the outcome
	// is unknown; the write may or may not have committed, possibly after the client gave up.
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Failed:
		return "failed"
	}
	return "unknown"
}

// MarshalText writes the outcome as its name, so history files are readable.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText reads an outcome's name.
func (o *Outcome) UnmarshalText(b []byte) error {
	switch string(b) {
	case "ok":
		*o = OK
	case "failed":
		*o = Failed
	case "unknown":
		*o = Unknown
	default:
		return fmt.Errorf("unknown outcome %q", b)
	}
	return nil
}

// Never is the return time of an operation that never returned (its outcome is unknown):
// the operation may take effect at any moment after its call.
const Never = int64(math.MaxInt64)

// Op is one client operation: what was asked, when, and what came back. One type for every
// model keeps the history one file of JSON lines.
type Op struct {
	ID     int    `json:"id"`
	Client int    `json:"client"`
	Family string `json:"family"` // object, pillar, lock, member
	Key    string `json:"key"`    // the partition: kind/org/name, node/category, project/workspace, org/group/node
	Kind   string `json:"kind"`   // create, put, patch, delete, get; put, get, render; lock, unlock, write, pglock, pgunlock, pglost; add, remove, get
	// Replica is the replica that served the request (-1: a pg-backend client).
	Replica   int    `json:"replica"`
	RequestID string `json:"requestId,omitempty"`
	Marker    string `json:"marker,omitempty"` // the unique value this write stores
	// Precondition: a resourceVersion (objects, 0: none), an ETag (pillars, "": none).
	PrecondRV int64  `json:"precondRV,omitempty"`
	IfMatch   string `json:"ifMatch,omitempty"`
	LockID    string `json:"lockId,omitempty"` // lock, unlock, write: the lock id; pg ops: the session
	Serial    int64  `json:"serial,omitempty"` // state writes: the state's serial

	Call    int64   `json:"call"`
	Return  int64   `json:"return"`
	Outcome Outcome `json:"outcome"`
	Status  int     `json:"status"` // HTTP status; 0 for transport errors and pg clients
	// Results: the resourceVersion (objects) or ETag (pillars) after a write or read, and
	// what a read saw.
	RV         int64  `json:"rv,omitempty"`
	ETag       string `json:"etag,omitempty"`
	Exists     bool   `json:"exists,omitempty"`
	ReadMarker string `json:"readMarker,omitempty"`
	Granted    bool   `json:"granted,omitempty"` // pglock, pgunlock: what PostgreSQL answered
	Err        string `json:"err,omitempty"`
	Resolved   string `json:"resolved,omitempty"` // how Resolve settled an unknown outcome
	// PrevRV is, for an object write that succeeded at a version the ground truth holds with
	// the write's own marker, the key's version just before it when the key existed then
	// (Resolve): the write took effect on that version and on no other.
	PrevRV int64 `json:"prevRV,omitempty"`
	// Holder is, for a refused LOCK (423), the ID of the LockInfo the answer named: "strata-replica"
	// says no lock row was in the way, only another replica's keeper still holding the key
	// (an UNLOCK it committed but has not let go, docs/terraform.md).
	Holder string `json:"holder,omitempty"`
}

// IsWrite says whether the operation can change its key's state.
func (o *Op) IsWrite() bool {
	switch o.Kind {
	case "get", "render":
		return false
	}
	return true
}

func (o *Op) String() string {
	ret := "never"
	if o.Return != Never {
		ret = fmt.Sprintf("%.3fms", float64(o.Return)/1e6)
	}
	s := fmt.Sprintf("#%d c%d r%d %s %s [%.3fms→%s] %s status=%d", o.ID, o.Client, o.Replica, o.Kind, o.Key,
		float64(o.Call)/1e6, ret, o.Outcome, o.Status)
	if o.Marker != "" {
		s += " marker=" + o.Marker
	}
	if o.PrecondRV != 0 {
		s += fmt.Sprintf(" if-rv=%d", o.PrecondRV)
	}
	if o.IfMatch != "" {
		s += " if-match=" + o.IfMatch
	}
	if o.LockID != "" {
		s += " lock=" + o.LockID
	}
	if o.Serial != 0 {
		s += fmt.Sprintf(" serial=%d", o.Serial)
	}
	if o.RV != 0 {
		s += fmt.Sprintf(" → rv=%d", o.RV)
	}
	if o.ETag != "" {
		s += " → etag=" + o.ETag
	}
	if !o.IsWrite() {
		s += fmt.Sprintf(" → exists=%v read=%q", o.Exists, o.ReadMarker)
	}
	if o.Kind == "pglock" || o.Kind == "pgunlock" {
		s += fmt.Sprintf(" → granted=%v", o.Granted)
	}
	if o.Resolved != "" {
		s += " (" + o.Resolved + ")"
	}
	if o.Err != "" {
		s += " err=" + o.Err
	}
	return s
}

// Recorder collects operations against one monotonic base time. It is safe for concurrent
// use by every client goroutine.
type Recorder struct {
	base    time.Time
	mu      sync.Mutex
	ops     []*Op
	nextID  atomic.Int64
	clients atomic.Int64
}

// NewRecorder starts the clock: every time recorded is nanoseconds since now, read from
// Go's monotonic clock.
func NewRecorder() *Recorder { return &Recorder{base: time.Now()} }

// Now is the time since the recorder's base, on the monotonic clock.
func (r *Recorder) Now() int64 { return int64(time.Since(r.base)) }

// NewClient hands out a fresh client id. A client takes a new one after an operation with
// an unknown outcome, since that operation never returns and a client is sequential.
func (r *Recorder) NewClient() int { return int(r.clients.Add(1) - 1) }

// Begin records the call of op (its call time and id) and returns it.
func (r *Recorder) Begin(op *Op) *Op {
	op.ID = int(r.nextID.Add(1))
	op.Call = r.Now()
	return op
}

// End records op's return: outcome Unknown keeps Return = Never.
func (r *Recorder) End(op *Op) {
	if op.Outcome == Unknown {
		op.Return = Never
	} else {
		op.Return = r.Now()
	}
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// Ops returns the recorded operations in call order.
func (r *Recorder) Ops() []*Op {
	r.mu.Lock()
	out := append([]*Op(nil), r.ops...)
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Call < out[j].Call })
	return out
}

// WriteHistory writes ops as JSON lines to path, so a failing run keeps its whole history.
func WriteHistory(path string, ops []*Op) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadHistory reads a history WriteHistory wrote.
func ReadHistory(path string) ([]*Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ops []*Op
	dec := json.NewDecoder(f)
	for dec.More() {
		op := &Op{}
		if err := dec.Decode(op); err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	return ops, nil
}
