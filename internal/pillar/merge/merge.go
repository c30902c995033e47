// Package merge folds pillar layers (global, org, group, node rows) into the pillar one node
// sees, with exactly the semantics of Salt 3006's "recurse" strategy
// (salt.utils.dictupdate.update, also used by the postgres ext_pillar with as_json), because
// strata's output is merged again by Salt and users migrating from Salt must see the values
// they saw before. It also explains the result, leaf by leaf, since "which layer set this
// value, and what did it override" is the question operators ask most.
//
// The package is pure: no database, no I/O. Values are decoded JSON (json.Decoder.UseNumber),
// so numbers are json.Number and keep their exact text through a merge. It is the one merge of
// the project: package pillar folds a node's rows with it, and package pillar/sls folds SLS
// includes with it (Recurse).
//
// Semantics, folding each layer onto the result of the earlier ones, starting from {}:
//
//   - object onto object: merged key by key with these same rules;
//   - list onto list: the higher list replaces the lower one; with Options.MergeLists the
//     result is the lower list followed by the higher list's items that are not equal to any
//     item of the lower list (duplicates inside either list are kept, as in Salt);
//   - anything else (scalar, null, a change of type): the higher value replaces the lower one.
//     null replaces too: it is a value, not a deletion and not "inherit";
//   - a key absent from the higher layer keeps the lower value, so an empty object onto an
//     object changes nothing, while an empty object onto a scalar, list or null replaces it
//     (Salt's dict-onto-dict test fails, so the higher value wins).
//
// List-item equality for MergeLists follows Python's ==, which is what Salt uses: objects
// compare by keys and values, lists item by item, and numbers by value, integers exactly
// (1 equals 1.0; 12345678901234567890123 equals only itself; an integer and a float are
// compared exactly, as Python does). One deliberate difference: booleans equal only booleans,
// while Python treats true as 1, because that is an artefact of Python's bool being an int and
// JSON (and PostgreSQL's jsonb) keep them apart.
//
// Renders do not decode their rows: MergeJSON merges the rows' JSON text with the same
// semantics and writes json.Marshal's bytes of the result (raw.go); with a Memo, the rows many
// renders share are split and rewritten into canonical form once per replica, and layers that
// are all canonical are merged by walking their sorted members, without maps (memo.go,
// sorted.go). Every one of these paths is compared with Merge on the Salt-golden vectors,
// generated stacks and fuzz input.
package merge

import (
	"context"
	"slices"
	"strings"
)

// Layer is one pillar row in merge order: where it comes from and its data (a JSON object).
type Layer struct {
	Target   string         // e.g. "global", "org/acme", "group/acme/web", "node/web01"
	Category string         // e.g. "general", "formula-apache"
	Data     map[string]any // decoded with UseNumber
}

// Options of a merge; MergeLists is Salt's pillar_merge_lists (as_list of the SQL ext_pillar).
type Options struct{ MergeLists bool }

// Source names one layer.
type Source struct {
	Target   string `json:"target"`
	Category string `json:"category"`
}

// Explanation says, for one leaf path of the merged pillar, which layer set it and which ones
// it overrode.
//
// A leaf is a value that is not an object (a scalar, null or a list, lists being replaced or
// appended to as a whole) or an empty object; the root object itself is never a leaf, so an
// empty pillar has no explanations.
//
// Overridden lists, in merge order, every earlier layer that had a value at this path or at a
// path above it that was later replaced by another value (by a scalar, a null, a list or a
// change of type), including layers replaced before the value that in turn was replaced: when
// global sets /ntp/servers, org replaces /ntp with a string and group sets /ntp/servers again,
// /ntp/servers names group as SetBy and global and org as Overridden. A layer whose value was
// merged into, not replaced, is not overridden.
//
// With Options.MergeLists a list can hold items of several layers: SetBy is then the last
// layer that appended at least one item (or the layer that placed the list, if none appended)
// and MergedFrom lists the earlier layers whose list this one was appended to, in merge order.
// They are kept apart from Overridden because their items are still in the list. A layer whose
// list appended nothing (all its items were already present) changed nothing and, like an
// empty object merged onto an object, is named nowhere.
type Explanation struct {
	Path       Pointer  `json:"path"`                 // JSON pointer (RFC 6901) of the leaf, e.g. "/apache/port"
	SetBy      Source   `json:"setBy"`                // the layer whose value is at Path
	Overridden []Source `json:"overridden,omitempty"` // earlier layers whose value at this path (or above it) was replaced, in merge order
	MergedFrom []Source `json:"mergedFrom,omitempty"` // with MergeLists: earlier layers whose list items this list keeps, in merge order
}

// Merge folds layers in order onto {} with Salt's recurse strategy and returns the result.
// The result shares nothing with the layers (Salt's does, by reference), so callers may cache
// layers and modify results freely; nil Data is an empty layer.
func Merge(layers []Layer, opts Options) map[string]any {
	out, _ := MergeContext(context.Background(), layers, opts)
	return out
}

// MergeContext is Merge that stops when ctx is done, answering ctx's error: a render is
// cancelled with its request (a client gone, the Salt route's timeout), so a pathological
// stack cannot keep a CPU busy for nobody.
func MergeContext(ctx context.Context, layers []Layer, opts Options) (map[string]any, error) {
	m := &merger{mergeLists: opts.MergeLists, ctx: ctx}
	out := map[string]any{}
	for i := range layers {
		m.mergeObject(out, layers[i].Data, nil, i)
		if m.err != nil {
			return nil, m.err
		}
	}
	return out, nil
}

// Explain merges like Merge and also returns one Explanation per leaf of the result, sorted
// by Path (byte order, so every subtree is one contiguous run). The leaves of one object share
// their parent's Pointer, so explaining costs time and space linear in the result even when
// many leaves sit below one long key.
func Explain(layers []Layer, opts Options) (map[string]any, []Explanation) {
	out, expl, _ := ExplainContext(context.Background(), layers, opts)
	return out, expl
}

// ExplainContext is Explain that stops when ctx is done, answering ctx's error.
func ExplainContext(ctx context.Context, layers []Layer, opts Options) (map[string]any, []Explanation, error) {
	m := &merger{mergeLists: opts.MergeLists, ctx: ctx}
	out := map[string]any{}
	root := &node{setBy: -1, children: map[string]*node{}}
	for i := range layers {
		m.mergeObject(out, layers[i].Data, root, i)
		if m.err != nil {
			return nil, nil, m.err
		}
	}
	e := explainer{layers: layers}
	e.walk(out, root, nil, nil)
	return out, e.out, nil
}

// node is the provenance of one value of the result, kept beside it while Explain merges, so
// that explaining costs one pass over the layers rather than a replay per leaf. Layers are
// named by index because two layers may carry the same Source.
type node struct {
	setBy      int              // the layer that placed this value (-1 for the root)
	replaced   []int            // layers whose value at exactly this path was replaced, ascending
	mergedFrom []int            // lists only: earlier layers whose items this list keeps, ascending
	children   map[string]*node // objects only: one node per key
}

// merger holds one merge's options and its progress: every checkEvery steps (an object key
// or a list item) it looks at ctx, and once ctx is done it stops and keeps the error.
type merger struct {
	mergeLists bool
	ctx        context.Context
	err        error
	steps      int
	// comparisons counts the equality tests of list merges, so a test can tell a linear
	// merge from a quadratic one without timing it.
	comparisons int
}

// checkEvery is how many merge steps pass between two looks at the context: often enough
// that a cancelled request stops within microseconds, rarely enough to cost nothing.
const checkEvery = 1024

// step counts one unit of work and reports whether the merge must stop.
func (m *merger) step() bool {
	if m.err != nil {
		return true
	}
	m.steps++
	if m.steps%checkEvery == 0 {
		if err := m.ctx.Err(); err != nil {
			m.err = err
			return true
		}
	}
	return false
}

// mergeObject folds src onto dst, which the result owns. prov is dst's provenance, nil when
// no explanation is wanted.
func (m *merger) mergeObject(dst, src map[string]any, prov *node, layer int) {
	for k, v := range src {
		if m.step() {
			return
		}
		cur, exists := dst[k]
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := cur.(map[string]any); ok {
				var child *node
				if prov != nil {
					child = prov.children[k]
				}
				m.mergeObject(dm, sm, child, layer)
				continue
			}
		}
		if m.mergeLists {
			if sl, ok := v.([]any); ok {
				if dl, ok := cur.([]any); ok {
					merged := m.appendNew(dl, sl)
					if m.err != nil {
						return
					}
					dst[k] = merged
					if prov != nil && len(merged) > len(dl) {
						c := prov.children[k]
						c.mergedFrom = append(c.mergedFrom, c.setBy)
						c.setBy = layer
					}
					continue
				}
			}
		}
		dst[k] = deepCopy(v)
		if prov != nil {
			n := newNode(v, layer)
			if exists {
				n.replaced = prov.children[k].layers()
			}
			prov.children[k] = n
		}
	}
}

// appendNew is Salt's list merge: the lower list, then each item of the higher list that
// equals no item of the lower list. Membership is tested against the lower list only, so
// duplicates inside the higher list are all appended. The lower list's items go into a hash
// set first, so two lists of n items cost O(n), not the O(n²) of comparing every pair.
func (m *merger) appendNew(lower, higher []any) []any {
	out := make([]any, len(lower), len(lower)+len(higher))
	copy(out, lower)
	if len(higher) == 0 {
		return out
	}
	set := newItemSet(lower)
	defer func() { m.comparisons += set.compared }()
	for _, x := range higher {
		if m.step() {
			return nil
		}
		if !set.contains(x) {
			out = append(out, deepCopy(x))
		}
	}
	return out
}

// deepCopy copies objects and lists so the result never aliases a layer; other values are
// immutable (strings, json.Number, bools, nil).
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, c := range t {
			out[k] = deepCopy(c)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, c := range t {
			out[i] = deepCopy(c)
		}
		return out
	default:
		return v
	}
}

// newNode is the provenance of v placed whole by layer.
func newNode(v any, layer int) *node {
	n := &node{setBy: layer}
	if m, ok := v.(map[string]any); ok {
		n.children = make(map[string]*node, len(m))
		for k, c := range m {
			n.children[k] = newNode(c, layer)
		}
	}
	return n
}

// layers returns every layer that contributed to the subtree at n, ascending and without
// repeats: all of them are overridden when the subtree is replaced.
func (n *node) layers() []int {
	var out []int
	var collect func(*node)
	collect = func(n *node) {
		if n.setBy >= 0 {
			out = append(out, n.setBy)
		}
		out = append(out, n.replaced...)
		out = append(out, n.mergedFrom...)
		for _, c := range n.children {
			collect(c)
		}
	}
	collect(n)
	slices.Sort(out)
	return slices.Compact(out)
}

type explainer struct {
	layers []Layer
	out    []Explanation
}

// walk emits the explanations of the subtree v at path, whose provenance is n; above holds
// the layers replaced at the paths above it, ascending. Every member of an object gets one
// pointerNode linked to path (nil: the root), so a pointer costs its last token only, and
// members are visited in the byte order of their pointers: the explanations come out sorted
// without building or comparing whole paths.
func (e *explainer) walk(v any, n *node, path *pointerNode, above []int) {
	over := above
	if len(n.replaced) > 0 {
		over = slices.Concat(above, n.replaced)
		slices.Sort(over)
		over = slices.Compact(over)
	}
	m, isObject := v.(map[string]any)
	if isObject && (len(m) > 0 || n.setBy < 0) {
		type member struct {
			key, token string
			inner      bool // explained below it: its explanations' pointers go on with "/"
		}
		members := make([]member, 0, len(m))
		for k, c := range m {
			cm, ok := c.(map[string]any)
			members = append(members, member{key: k, token: escapeToken(k), inner: ok && len(cm) > 0})
		}
		// "/a" < "/a!" < "/a/x": a member explained below it sorts as its token followed by
		// "/", which is how its descendants' pointers compare with a sibling's.
		slices.SortFunc(members, func(a, b member) int {
			if c := strings.Compare(a.token, b.token); c == 0 || (!strings.HasPrefix(a.token, b.token) && !strings.HasPrefix(b.token, a.token)) {
				return c
			}
			short, long, sign := a, b, 1
			if len(a.token) > len(b.token) {
				short, long, sign = b, a, -1
			}
			if !short.inner { // "/a" is a prefix of "/ab…"
				return -sign
			}
			return sign * strings.Compare("/", long.token[len(short.token):len(short.token)+1])
		})
		for _, mb := range members {
			e.walk(m[mb.key], n.children[mb.key], path.child(mb.token), over)
		}
		return
	}
	e.out = append(e.out, Explanation{
		Path:       Pointer{path},
		SetBy:      e.source(n.setBy),
		Overridden: e.sources(over),
		MergedFrom: e.sources(n.mergedFrom),
	})
}

func (e *explainer) source(i int) Source {
	return Source{Target: e.layers[i].Target, Category: e.layers[i].Category}
}

func (e *explainer) sources(idx []int) []Source {
	if len(idx) == 0 {
		return nil
	}
	out := make([]Source, len(idx))
	for i, l := range idx {
		out[i] = e.source(l)
	}
	return out
}

// escapeToken escapes one reference token of a JSON pointer (RFC 6901 §3): "~" first, so the
// "~" of an escaped "/" is not escaped again.
func escapeToken(k string) string {
	if !strings.ContainsAny(k, "~/") {
		return k
	}
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// Recurse merges higher onto lower with Salt's recurse strategy (dictupdate.update) and
// returns the result, sharing nothing with either: the two-layer case of Merge, as Salt's
// SLS includes use it.
func Recurse(lower, higher map[string]any, mergeLists bool) map[string]any {
	return Merge([]Layer{{Data: lower}, {Data: higher}}, Options{MergeLists: mergeLists})
}

// Copy returns a deep copy of a decoded JSON value.
func Copy(v any) any { return deepCopy(v) }
