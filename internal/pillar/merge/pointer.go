package merge

import (
	"encoding/json"
	"strings"
)

// Pointer is the JSON pointer (RFC 6901) of a leaf of an explained pillar. It is held as its
// last reference token and a link to its parent's pointer, so the leaves of one object share
// everything above them: n leaves below a key of k bytes cost O(n + k), where n pointer
// strings would cost O(n × k) — terabytes for one 8 MiB row holding a 4 MB key over 700,000
// short leaves. String and MarshalJSON spell it out; Shared says how much of it the previous
// leaf's pointer already spelled, which is how an answer writes many of them compactly.
type Pointer struct{ n *pointerNode }

// pointerNode is one reference token of a Pointer (escaped), with the length of the whole
// pointer up to and including it and how many tokens that is.
type pointerNode struct {
	parent *pointerNode
	token  string
	len    int
	depth  int
}

// child is the pointer below n by one token (already escaped).
func (n *pointerNode) child(token string) *pointerNode {
	return &pointerNode{parent: n, token: token, len: n.length() + 1 + len(token), depth: n.level() + 1}
}

// level is how many tokens the pointer ending at n has (0 for nil, the root).
func (n *pointerNode) level() int {
	if n == nil {
		return 0
	}
	return n.depth
}

// length is the byte length of the pointer ending at n (0 for nil, the root).
func (n *pointerNode) length() int {
	if n == nil {
		return 0
	}
	return n.len
}

// Len is the byte length of the pointer spelled out.
func (p Pointer) Len() int { return p.n.length() }

// String spells the pointer out: "" for the root, else "/"-separated escaped tokens.
func (p Pointer) String() string {
	b := make([]byte, p.Len())
	for n := p.n; n != nil; n = n.parent {
		copy(b[n.len-len(n.token):], n.token)
		b[n.len-len(n.token)-1] = '/'
	}
	return string(b)
}

// MarshalJSON writes the pointer as a JSON string, as an answer's "path".
func (p Pointer) MarshalJSON() ([]byte, error) { return json.Marshal(p.String()) }

// Shared is the byte length of the longest pointer above both p and q (their deepest common
// ancestor, "" at least), p and q coming from one Explain: q spelled out is p's first Shared bytes followed by q's Rest. For
// leaves taken in order its cost is the steps from each leaf up to the common ancestor, so a
// whole explanation costs time linear in the pillar's objects and leaves.
func (p Pointer) Shared(q Pointer) int {
	a, b := p.n, q.n
	for a.level() > b.level() {
		a = a.parent
	}
	for b.level() > a.level() {
		b = b.parent
	}
	for a != b {
		a, b = a.parent, b.parent
	}
	return a.length()
}

// Rest is the pointer spelled out from byte from on, from being Shared with another pointer
// (so it starts with "/"), without building the part before it.
func (p Pointer) Rest(from int) string {
	var tokens []string
	for n := p.n; n != nil && n.len > from; n = n.parent {
		tokens = append(tokens, n.token)
	}
	var b strings.Builder
	b.Grow(p.Len() - from)
	for i := len(tokens) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(tokens[i])
	}
	return b.String()
}

// PathBytes is how many bytes the explanations' paths take spelled out, each whole.
func PathBytes(expl []Explanation) int {
	n := 0
	for _, e := range expl {
		n += e.Path.Len()
	}
	return n
}

// FrontCoded writes explanations with their paths front-coded: each entry carries "shared",
// how many leading bytes of the previous entry's path its own path begins with (0 for the
// first), and "rest", the bytes that follow, in place of "path". Their size is linear in the
// explained pillar, however many leaves share a long key above them; an answer uses it when
// whole paths would take more than its budget.
type FrontCoded []Explanation

// frontCodedEntry is one FrontCoded explanation as written.
type frontCodedEntry struct {
	Shared     int      `json:"shared"`
	Rest       string   `json:"rest"`
	SetBy      Source   `json:"setBy"`
	Overridden []Source `json:"overridden,omitempty"`
	MergedFrom []Source `json:"mergedFrom,omitempty"`
}

// MarshalJSON writes the front-coded entries.
func (f FrontCoded) MarshalJSON() ([]byte, error) {
	out := make([]frontCodedEntry, len(f))
	prev := Pointer{}
	for i, e := range f {
		n := prev.Shared(e.Path)
		out[i] = frontCodedEntry{Shared: n, Rest: e.Path.Rest(n), SetBy: e.SetBy, Overridden: e.Overridden, MergedFrom: e.MergedFrom}
		prev = e.Path
	}
	return json.Marshal(out)
}
