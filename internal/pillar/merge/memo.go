package merge

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Memo remembers how layer texts split into members, each value already in the canonical
// form MergeJSON writes, so that a row many renders share (a global, org or group row: in
// bench/node-pillars.sh seven of a render's eight rows) is checked, split and rewritten once
// rather than on every cold render. It is keyed by the text itself: a row that changes is a
// different key, so nothing in it is ever invalidated and nothing it holds can be stale.
// Bounded by bytes: when an entry would pass the bound it starts over empty. Safe for
// concurrent use. It only ever sees RawLayer.Shared rows (never a secret row's plaintext).
type Memo struct {
	mu    sync.Mutex
	rows  map[string][]rawMember
	bytes int64
	max   int64

	hits, misses atomic.Int64
}

// NewMemo returns a memo of at most maxBytes (keys, canonical text and bookkeeping).
func NewMemo(maxBytes int64) *Memo {
	return &Memo{rows: map[string][]rawMember{}, max: maxBytes}
}

// Stats returns how many layer texts were found in the memo and how many were not.
func (m *Memo) Stats() (hits, misses int64) { return m.hits.Load(), m.misses.Load() }

// memoEntryBytes is what an entry costs beyond its key and its canonical text (map entry,
// slice header); memoMemberBytes what each member costs, at any depth, beyond its key (the
// rawMember itself: key, value and kids headers, flags).
const (
	memoEntryBytes  = 96
	memoMemberBytes = 80
)

// members returns data's members with canonical values, from the memo or by splitting and
// rewriting data (then remembered). ok is false when data cannot be rewritten (MergeJSON then
// takes its ordinary path, which reports the same error where it always did).
func (m *Memo) members(r *rawMerger, data []byte) ([]rawMember, bool) {
	m.mu.Lock()
	ms, found := m.rows[string(data)]
	m.mu.Unlock()
	if found {
		m.hits.Add(1)
		return ms, true
	}
	m.misses.Add(1)
	ms, cost, ok := canonicalMembers(r, data)
	if !ok || cost > m.max {
		return ms, ok
	}
	m.mu.Lock()
	if _, dup := m.rows[string(data)]; !dup {
		if m.bytes+cost > m.max {
			m.rows, m.bytes = map[string][]rawMember{}, 0
		}
		m.rows[string(data)] = ms
		m.bytes += cost
	}
	m.mu.Unlock()
	return ms, true
}

// canonicalMembers splits data (one JSON object) into its members, keys in byte order, each
// value rewritten into canonical form and every object among them split into kids, and says
// what remembering them costs. ok is false when data is not a valid object or cannot be
// rewritten.
func canonicalMembers(r *rawMerger, data []byte) (ms []rawMember, cost int64, ok bool) {
	plain, err := r.members(data)
	if err != nil {
		return nil, 0, false
	}
	slices.SortFunc(plain, func(a, b rawMember) int { return strings.Compare(a.key, b.key) })
	type span struct{ start, end int }
	spans := make([]span, len(plain))
	buf := make([]byte, 0, len(data))
	for i, mb := range plain {
		start := len(buf)
		if buf, err = canonical(buf, mb.value, 0); err != nil {
			return nil, 0, false
		}
		spans[i] = span{start, len(buf)}
	}
	ms = make([]rawMember, len(plain))
	cost = int64(memoEntryBytes + len(data) + cap(buf))
	for i, mb := range plain {
		ms[i] = rawMember{key: mb.key, value: buf[spans[i].start:spans[i].end:spans[i].end], canon: true}
		cost += int64(memoMemberBytes + len(mb.key))
	}
	kidsCost, err := splitObjects(ms)
	if err != nil {
		return nil, 0, false
	}
	return ms, cost + kidsCost, true
}

// splitObjects splits every object value among ms (canonical), at every depth, into kids,
// and says what they cost.
func splitObjects(ms []rawMember) (int64, error) {
	var cost int64
	for i := range ms {
		if ms[i].value[0] != '{' {
			continue
		}
		kids, err := objectMembers(ms[i].value, true)
		if err != nil {
			return 0, err
		}
		ms[i].kids, ms[i].split = kids, true
		for _, k := range kids {
			cost += int64(memoMemberBytes + len(k.key))
		}
		c, err := splitObjects(kids)
		if err != nil {
			return 0, err
		}
		cost += c
	}
	return cost, nil
}

// Find reports whether a remembered text or its canonical form contains needle: for tests
// that check what the memo keeps (a secret's plaintext must never be there).
func (m *Memo) Find(needle []byte) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for text, ms := range m.rows {
		if strings.Contains(text, string(needle)) {
			return true
		}
		for _, mb := range ms {
			if strings.Contains(mb.key, string(needle)) || bytes.Contains(mb.value, needle) {
				return true
			}
		}
	}
	return false
}
