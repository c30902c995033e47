package robustness

import (
	"context"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// This file holds the search that decides whether a history is linearizable. It is the
// search Porcupine runs (Wing and Gong's, with Lowe's cache of configurations already
// explored), plus one rule that Porcupine lacks and that long histories with a paused
// replica need: an operation that can never change the model's state — a refusal, a read
// that cannot learn anything (filters, below) — is linearized as soon as it fits without
// narrowing the current set of states, and the search never tries the orders where it
// waits.
//
// Why that rule is sound and complete. Let G be such an operation: at every state its step
// gives that state back or nothing (a filter). Say G fits now and leaves the current set of
// states S as it is. Take any linearization of the rest that places G later, at a set S'.
// Placing G now instead keeps real-time order (everything that returned before G's call is
// already linearized when the search reaches G's call), leaves every set before S' as it
// was (G changed nothing), and at S' leaves S' instead of G's filtered subset of it; a step
// of a larger set is a larger set, so every operation that fitted there still fits. So if
// any linearization exists, one with G placed now exists. Both conditions matter: an
// operation that changes some states (a PUT of a membership that is already there is a
// no-op only at that state) or one that narrows the current set may have to wait.
//
// Why it matters: a replica paused for seconds leaves dozens of its clients' requests
// pending on every key, and on the other replicas many requests wait behind the row lock a
// paused transaction holds. Those mostly end as refusals (404, 409) whose intervals all
// overlap. When the search has placed a write too early and finds out only seconds later,
// Porcupine tries every subset of those pending refusals before it takes the write back:
// 2^k configurations that differ only in which refusals are done, each a new entry in its
// cache. A 947-operation key of a 3-minute run with 96 clients did not finish within four
// minutes; with the rule it checks in milliseconds (docs/robustness.md).

// event is a call or a return in the time-ordered list the search walks.
type event struct {
	id         int // the operation's index in its partition
	call       bool
	time       int64
	match      *event // a call's return
	prev, next *event
}

// lift takes a linearized operation's call and return out of the list.
func lift(e *event) {
	e.prev.next = e.next
	e.next.prev = e.prev
	r := e.match
	r.prev.next = r.next
	if r.next != nil {
		r.next.prev = r.prev
	}
}

// unlift puts them back, in the reverse order of lift.
func unlift(e *event) {
	r := e.match
	r.prev.next = r
	if r.next != nil {
		r.next.prev = r
	}
	e.prev.next = e
	e.next.prev = e
}

// bitset is the set of operations linearized so far.
type bitset []uint64

func (b bitset) set(i int)   { b[i/64] |= 1 << (uint(i) % 64) }
func (b bitset) clear(i int) { b[i/64] &^= 1 << (uint(i) % 64) }

func (b bitset) hash() uint64 {
	h := uint64(14695981039346656037)
	for _, w := range b {
		h ^= w
		h *= 1099511628211
	}
	return h
}

func (b bitset) equal(o bitset) bool {
	for i := range b {
		if b[i] != o[i] {
			return false
		}
	}
	return true
}

// explored is a configuration the search has visited: what was linearized and the state
// it led to. One that is visited again has already failed (a configuration on the current
// path cannot recur: the set of linearized operations only grows along it).
type explored struct {
	linearized bitset
	state      interface{}
}

// searchFrame is one linearized operation on the search's path: its call, the state
// before it, and whether it was placed by the rule above (then taking it back means its
// predecessor must be taken back too).
type searchFrame struct {
	e      *event
	before interface{}
	eager  bool
}

// searchPartition reports whether one partition's operations have an order that respects
// real time and that model accepts. filter says which inputs never change a state (nil:
// none); done is false when ctx ended first.
func searchPartition(ctx context.Context, model porcupine.Model, filter func(input interface{}) bool, ops []porcupine.Operation) (ok, done bool) {
	n := len(ops)
	evs := make([]*event, 0, 2*n)
	for i, op := range ops {
		c := &event{id: i, call: true, time: op.Call}
		r := &event{id: i, time: op.Return}
		c.match = r
		evs = append(evs, c, r)
	}
	// Calls before returns at the same instant: two operations that touch are concurrent.
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].time != evs[j].time {
			return evs[i].time < evs[j].time
		}
		return evs[i].call && !evs[j].call
	})
	head := &event{id: -1}
	prev := head
	for _, e := range evs {
		prev.next, e.prev = e, prev
		prev = e
	}

	step := model.Step
	hashState := model.Hash
	if hashState == nil {
		hashState = func(interface{}) uint64 { return 0 }
	}
	linearized := make(bitset, (n+63)/64)
	cache := map[uint64][]explored{}
	seen := func(state interface{}) bool {
		key := linearized.hash() ^ hashState(state)
		for _, c := range cache[key] {
			if c.linearized.equal(linearized) && model.Equal(c.state, state) {
				return true
			}
		}
		cache[key] = append(cache[key], explored{append(bitset(nil), linearized...), state})
		return false
	}
	state := model.Init()
	var path []searchFrame
	e := head.next
	for steps := 0; head.next != nil; steps++ {
		if steps%4096 == 0 && ctx.Err() != nil {
			return false, false
		}
		if e.call {
			op := ops[e.id]
			if fits, next := step(state, op.Input, op.Output); fits {
				eager := filter != nil && filter(op.Input) && model.Equal(next, state)
				linearized.set(e.id)
				if !seen(next) {
					path = append(path, searchFrame{e: e, before: state, eager: eager})
					state = next
					lift(e)
					e = head.next
					continue
				}
				linearized.clear(e.id)
				if !eager {
					e = e.next
					continue
				}
				// An unchanged state already explored with this operation done: that
				// configuration failed, so this one fails too. Take back.
			} else {
				e = e.next
				continue
			}
		}
		// A return whose operation is not linearized (or a failed eager placement): take
		// back the last choice that had an alternative.
		for {
			if len(path) == 0 {
				return false, true
			}
			top := path[len(path)-1]
			path = path[:len(path)-1]
			state = top.before
			linearized.clear(top.e.id)
			unlift(top.e)
			if !top.eager {
				e = top.e.next
				break
			}
		}
	}
	return true, true
}

// checkHistory is porcupine.CheckOperations with the search above: every partition of the
// model checked on its own, in parallel, within timeout in all. The result is Unknown
// when the time ran out before a partition failed.
func checkHistory(model porcupine.Model, filter func(input interface{}) bool, history []porcupine.Operation, timeout time.Duration) porcupine.CheckResult {
	parts := [][]porcupine.Operation{history}
	if model.Partition != nil {
		parts = model.Partition(history)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	work := make(chan []porcupine.Operation)
	var mu sync.Mutex
	result, checked := porcupine.Ok, 0
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for part := range work {
				ok, done := searchPartition(ctx, model, filter, part)
				mu.Lock()
				switch {
				case !done && result == porcupine.Ok:
					result = porcupine.Unknown
				case done && !ok:
					result = porcupine.Illegal
					cancel() // one failing partition decides
				case done:
					checked++
				}
				mu.Unlock()
			}
		}()
	}
	for _, part := range parts {
		if ctx.Err() != nil {
			break
		}
		work <- part
	}
	close(work)
	wg.Wait()
	if result == porcupine.Ok && checked < len(parts) {
		return porcupine.Unknown
	}
	return result
}
