package merge

import (
	"slices"
	"strings"
)

// mergeSorted appends the merge of objs — objects' members with keys in byte order and no
// duplicates, in merge order; a member's value is canonical (canon: what a Memo holds) or as
// its row wrote it, rewritten only when it is copied — as MergeJSON would encode it, without
// building maps: the members are walked in key order across the layers,
// as a k-way merge of sorted lists, and a key's value is the fold of its values in layer
// order under Salt's recurse strategy without list merging (a later value replaces the
// result unless both are objects, which merge). So the result of a key is its last value
// when that is not an object, or the merge of the run of objects that ends the sequence;
// a run of one is copied as it is. MergeJSONMemo takes this path for every render whose
// layers are all canonical and whose lists are not merged (Options.MergeLists).
func (m *rawMerger) mergeSorted(out []byte, objs [][]rawMember) ([]byte, error) {
	out = append(out, '{')
	pos := make([]int, len(objs))
	vals := make([]rawMember, 0, len(objs))
	first := true
	for {
		if m.step() {
			return nil, m.err
		}
		// The smallest key not yet written, among every layer's next member.
		key, found := "", false
		for i, ms := range objs {
			if pos[i] < len(ms) && (!found || strings.Compare(ms[pos[i]].key, key) < 0) {
				key, found = ms[pos[i]].key, true
			}
		}
		if !found {
			return append(out, '}'), nil
		}
		vals = vals[:0]
		for i, ms := range objs {
			if pos[i] < len(ms) && ms[pos[i]].key == key {
				vals = append(vals, ms[pos[i]])
				pos[i]++
			}
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = appendString(out, key)
		out = append(out, ':')
		last := len(vals) - 1
		start := last
		if vals[last].value[0] == '{' {
			for start > 0 && vals[start-1].value[0] == '{' {
				start--
			}
		}
		if start == last {
			if vals[last].canon {
				out = append(out, vals[last].value...)
				continue
			}
			var err error
			if out, err = canonical(out, vals[last].value, 0); err != nil {
				return nil, err
			}
			continue
		}
		sub := make([][]rawMember, 0, last-start+1)
		for _, v := range vals[start:] {
			if v.split {
				sub = append(sub, v.kids)
				continue
			}
			ms, err := objectMembers(v.value, v.canon)
			if err != nil {
				return nil, err
			}
			if !v.canon { // a canonical object's members are in key order already
				slices.SortFunc(ms, func(a, b rawMember) int { return strings.Compare(a.key, b.key) })
			}
			sub = append(sub, ms)
		}
		var err error
		if out, err = m.mergeSorted(out, sub); err != nil {
			return nil, err
		}
	}
}
