package merge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// RawLayer is one pillar row in merge order with its data as JSON text (an object), as
// PostgreSQL hands it over: MergeJSON merges such layers without decoding them first.
type RawLayer struct {
	Target   string
	Category string
	Data     []byte
	// Shared marks a row many renders read — a global, org or group row, and never a secret
	// row's plaintext — which is all a Memo remembers: a node's own row serves that node's
	// renders only (remembering it would push the shared rows out), and plaintext must not
	// outlive the render that opened it. The others are rewritten for the merge alone.
	Shared bool
}

// MergeJSON merges layers as Merge does and returns the result encoded exactly as
// json.Marshal encodes Merge's result (keys in byte order, no spaces, Go's string escaping,
// numbers as their text), without decoding what it need not: a value only one layer sets,
// or one a later layer replaces whole, is copied from its layer's text, only rewritten into
// that canonical form (keys sorted, spaces dropped, strings escaped as Go does); only objects
// that several layers set are split into members, and only lists merged with
// Options.MergeLists are decoded (their items are compared by value). A cold render spent
// as much time decoding rows into maps and encoding the result again as in the rest of its
// work together (docs/benchmarks.md, issue 31); this does neither for the common pillar whose
// layers set different top-level keys.
//
// Every layer's text is checked as DecodeObject-style input would be: valid UTF-8, one JSON
// value, an object; an invalid layer is an error naming it. It stops when ctx is done.
func MergeJSON(ctx context.Context, layers []RawLayer, opts Options) ([]byte, error) {
	return MergeJSONMemo(ctx, layers, opts, nil)
}

// MergeJSONMemo is MergeJSON with the Shared layers' texts split and rewritten through memo
// (nil: none), the others rewritten for this merge alone. Without list merging the
// canonical layers are then merged by mergeSorted, which walks their sorted members and
// builds no maps; with it, by the ordinary path. The result is the same bytes.
func MergeJSONMemo(ctx context.Context, layers []RawLayer, opts Options, memo *Memo) ([]byte, error) {
	m := &rawMerger{merger: merger{mergeLists: opts.MergeLists, ctx: ctx}}
	if memo != nil && !opts.MergeLists {
		if out, ok, err := m.mergeCanonical(layers, memo); ok || err != nil {
			return out, err
		}
	}
	root := rawObject{}
	size := 0
	for i := range layers {
		var (
			members []rawMember
			ok      bool
			err     error
		)
		if memo != nil && layers[i].Shared {
			members, ok = memo.members(m, layers[i].Data)
		}
		if !ok {
			members, err = m.members(layers[i].Data)
		}
		if err != nil {
			return nil, fmt.Errorf("pillar %s %s: %w", layers[i].Target, layers[i].Category, err)
		}
		size += len(layers[i].Data)
		if err := m.mergeMembers(root, members); err != nil {
			return nil, err
		}
	}
	out := make([]byte, 0, size)
	out, err := m.encodeObject(out, root)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// mergeCanonical merges layers with mergeSorted: the Shared ones as memo's canonical members,
// the others split into members in key order, rewritten as mergeSorted copies them. ok is false, with no error,
// when one of them does not rewrite: the caller then takes the ordinary path, which reports
// the error as it always has.
func (m *rawMerger) mergeCanonical(layers []RawLayer, memo *Memo) (out []byte, ok bool, err error) {
	objs := make([][]rawMember, len(layers))
	size := 2
	for i := range layers {
		if layers[i].Shared {
			objs[i], ok = memo.members(m, layers[i].Data)
		} else {
			// A row merged once: its members in key order, each value rewritten (copied)
			// or split (merged) only when mergeSorted comes to it.
			var err error
			if objs[i], err = m.members(layers[i].Data); err != nil {
				return nil, false, nil
			}
			slices.SortFunc(objs[i], func(a, b rawMember) int { return strings.Compare(a.key, b.key) })
			ok = true
		}
		if !ok {
			return nil, false, nil
		}
		size += len(layers[i].Data)
	}
	out, err = m.mergeSorted(make([]byte, 0, size), objs)
	return out, err == nil, err
}

// rawValue is one value of a raw merge's result: a layer's text (raw), an object merged from
// several layers (obj), or a list merged with MergeLists (list, decoded).
type rawValue struct {
	raw    []byte
	obj    rawObject
	list   []any
	isList bool
	canon  bool // raw is already in canonical form (it came from a Memo)
}

type rawObject map[string]rawValue

// rawMember is one member of an object as its layer wrote it: the decoded key and the
// value's text.
type rawMember struct {
	key   string
	value []byte
	canon bool // value is already in canonical form (a Memo's)
	// split says kids holds the members of value, an object (canonicalMembers splits every
	// object of a canonical text once, so merges need not split it again).
	split bool
	kids  []rawMember
}

type rawMerger struct {
	merger
}

// errDepth is the answer for text nested deeper than encoding/json decodes.
var errDepth = errors.New("exceeded max depth")

// maxDepth is encoding/json's nesting limit, so the raw merge accepts what Merge's input
// (DecodeObject) accepts.
const maxDepth = 10000

// members checks that data is one JSON object (valid UTF-8) and returns its members, the
// last of duplicate keys winning, as decoding into a map does.
func (m *rawMerger) members(data []byte) ([]rawMember, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("invalid UTF-8")
	}
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, errors.New("not a JSON object")
	}
	end, err := skipValue(data, i, 0)
	if err != nil {
		return nil, err
	}
	if skipSpace(data, end) != len(data) {
		return nil, errors.New("more than one JSON value")
	}
	return objectMembers(data[i:end], false)
}

// objectMembers splits a valid JSON object's text into its members (keys decoded), the last
// of duplicate keys winning; canon marks the members of a canonical text as canonical.
func objectMembers(obj []byte, canon bool) ([]rawMember, error) {
	out := make([]rawMember, 0, 8)
	i := skipSpace(obj, 1)
	if obj[i] == '}' {
		return out, nil
	}
	var seen map[string]int
	for {
		kEnd, _ := skipString(obj, i)
		key, err := decodeString(obj[i:kEnd])
		if err != nil {
			return nil, err
		}
		i = skipSpace(obj, kEnd) + 1 // the colon
		i = skipSpace(obj, i)
		vEnd, _ := skipValue(obj, i, 0)
		mb := rawMember{key: key, value: obj[i:vEnd], canon: canon}
		if seen == nil && len(out) >= 8 {
			seen = make(map[string]int, 2*len(out))
			for j, o := range out {
				seen[o.key] = j
			}
		}
		dup := -1
		if seen != nil {
			if j, ok := seen[key]; ok {
				dup = j
			} else {
				seen[key] = len(out)
			}
		} else {
			dup = slices.IndexFunc(out, func(o rawMember) bool { return o.key == key })
		}
		if dup >= 0 {
			out[dup] = mb
		} else {
			out = append(out, mb)
		}
		i = skipSpace(obj, vEnd)
		if obj[i] == '}' {
			return out, nil
		}
		i = skipSpace(obj, i+1) // the comma
	}
}

// mergeMembers folds one layer's members onto dst with Salt's recurse strategy (Merge's
// mergeObject, on text).
func (m *rawMerger) mergeMembers(dst rawObject, src []rawMember) error {
	for _, mb := range src {
		if m.step() {
			return m.err
		}
		cur, exists := dst[mb.key]
		first := mb.value[0]
		if exists && first == '{' && cur.isObject() {
			into := cur.obj
			if into == nil {
				ms, err := objectMembers(cur.raw, cur.canon)
				if err != nil {
					return err
				}
				into = make(rawObject, len(ms))
				for _, c := range ms {
					into[c.key] = rawValue{raw: c.value, canon: c.canon}
				}
			}
			ms, err := objectMembers(mb.value, mb.canon)
			if err != nil {
				return err
			}
			if err := m.mergeMembers(into, ms); err != nil {
				return err
			}
			dst[mb.key] = rawValue{obj: into}
			continue
		}
		if exists && m.mergeLists && first == '[' && cur.isArray() {
			lower := cur.list
			if !cur.isList {
				var err error
				if lower, err = decodeList(cur.raw); err != nil {
					return err
				}
			}
			higher, err := decodeList(mb.value)
			if err != nil {
				return err
			}
			merged := m.appendNew(lower, higher)
			if m.err != nil {
				return m.err
			}
			dst[mb.key] = rawValue{list: merged, isList: true}
			continue
		}
		dst[mb.key] = rawValue{raw: mb.value, canon: mb.canon}
	}
	return nil
}

func (v rawValue) isObject() bool { return v.obj != nil || (len(v.raw) > 0 && v.raw[0] == '{') }
func (v rawValue) isArray() bool  { return v.isList || (len(v.raw) > 0 && v.raw[0] == '[') }

// decodeList decodes a list's text as DecodeObject decodes values (numbers as json.Number).
func decodeList(raw []byte) ([]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var l []any
	if err := dec.Decode(&l); err != nil {
		return nil, err
	}
	return l, nil
}

// encodeObject appends o as json.Marshal would encode it decoded: members in byte order of
// their keys.
func (m *rawMerger) encodeObject(out []byte, o rawObject) ([]byte, error) {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out = append(out, '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendString(out, k)
		out = append(out, ':')
		v := o[k]
		var err error
		switch {
		case v.obj != nil:
			out, err = m.encodeObject(out, v.obj)
		case v.isList:
			var b []byte
			b, err = json.Marshal(v.list)
			out = append(out, b...)
		case v.canon:
			out = append(out, v.raw...)
		default:
			out, err = canonical(out, v.raw, 0)
		}
		if err != nil {
			return nil, err
		}
	}
	return append(out, '}'), nil
}

// canonical appends the valid JSON value v as json.Marshal encodes it once decoded (with
// numbers as json.Number): object members sorted by key (the last of duplicates kept), no
// spaces, strings escaped as Go escapes them, numbers and literals as written.
func canonical(out, v []byte, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, errDepth
	}
	switch v[0] {
	case '{':
		ms, err := objectMembers(v, false)
		if err != nil {
			return nil, err
		}
		slices.SortFunc(ms, func(a, b rawMember) int { return strings.Compare(a.key, b.key) })
		out = append(out, '{')
		for i, mb := range ms {
			if i > 0 {
				out = append(out, ',')
			}
			out = appendString(out, mb.key)
			out = append(out, ':')
			if out, err = canonical(out, mb.value, depth+1); err != nil {
				return nil, err
			}
		}
		return append(out, '}'), nil
	case '[':
		out = append(out, '[')
		i := skipSpace(v, 1)
		if v[i] == ']' {
			return append(out, ']'), nil
		}
		for n := 0; ; n++ {
			end, _ := skipValue(v, i, 0)
			if n > 0 {
				out = append(out, ',')
			}
			var err error
			if out, err = canonical(out, v[i:end], depth+1); err != nil {
				return nil, err
			}
			i = skipSpace(v, end)
			if v[i] == ']' {
				return append(out, ']'), nil
			}
			i = skipSpace(v, i+1)
		}
	case '"':
		if plainString(v) {
			return append(out, v...), nil
		}
		s, err := decodeString(v)
		if err != nil {
			return nil, err
		}
		return appendString(out, s), nil
	default:
		return append(out, v...), nil
	}
}

// plainString reports whether the quoted string q is already as Go would write it: no
// escapes, no bytes Go escapes (<, >, &, controls) and no U+2028 or U+2029.
func plainString(q []byte) bool {
	for i := 1; i < len(q)-1; i++ {
		switch c := q[i]; {
		case c == '\\' || c == '<' || c == '>' || c == '&' || c < 0x20:
			return false
		case c == 0xE2 && i+2 < len(q) && q[i+1] == 0x80 && (q[i+2] == 0xA8 || q[i+2] == 0xA9):
			return false
		}
	}
	return true
}

// decodeString decodes a valid quoted JSON string.
func decodeString(q []byte) (string, error) {
	if plainString(q) || !bytes.ContainsRune(q[1:len(q)-1], '\\') {
		return string(q[1 : len(q)-1]), nil
	}
	var s string
	err := json.Unmarshal(q, &s)
	return s, err
}

// appendString appends s, valid UTF-8 (decoded from checked text), quoted as json.Marshal
// quotes it.
func appendString(out []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\\' || c == '"' || c == '<' || c == '>' || c == '&' || c < 0x20 || c == 0xE2 {
			plain = false
			break
		}
	}
	if plain {
		out = append(out, '"')
		out = append(out, s...)
		return append(out, '"')
	}
	b, _ := json.Marshal(s) // a string always encodes
	return append(out, b...)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

var errSyntax = errors.New("the body is not JSON")

// skipValue checks the JSON value starting at b[i] (no leading space) and returns where it
// ends. It checks the whole grammar, so text it accepts decodes.
func skipValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return 0, errSyntax
	}
	if depth > maxDepth {
		return 0, errDepth
	}
	switch c := b[i]; {
	case c == '{':
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return 0, errSyntax
			}
			end, err := skipString(b, i)
			if err != nil {
				return 0, err
			}
			i = skipSpace(b, end)
			if i >= len(b) || b[i] != ':' {
				return 0, errSyntax
			}
			if i, err = skipValue(b, skipSpace(b, i+1), depth+1); err != nil {
				return 0, err
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return 0, errSyntax
			}
			if b[i] == '}' {
				return i + 1, nil
			}
			if b[i] != ',' {
				return 0, errSyntax
			}
			i = skipSpace(b, i+1)
		}
	case c == '[':
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = skipValue(b, i, depth+1); err != nil {
				return 0, err
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return 0, errSyntax
			}
			if b[i] == ']' {
				return i + 1, nil
			}
			if b[i] != ',' {
				return 0, errSyntax
			}
			i = skipSpace(b, i+1)
		}
	case c == '"':
		return skipString(b, i)
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i)
	}
	return 0, errSyntax
}

func literal(b []byte, i int, lit string) (int, error) {
	if !bytes.HasPrefix(b[i:], []byte(lit)) {
		return 0, errSyntax
	}
	return i + len(lit), nil
}

// skipString checks the string starting at b[i] and returns where it ends.
func skipString(b []byte, i int) (int, error) {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, nil
		case c < 0x20:
			return 0, errSyntax
		case c == '\\':
			i++
			if i >= len(b) {
				return 0, errSyntax
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return 0, errSyntax
				}
				for _, h := range b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return 0, errSyntax
					}
				}
				i += 4
			default:
				return 0, errSyntax
			}
		}
	}
	return 0, errSyntax
}

// skipNumber checks the number starting at b[i] (JSON's grammar) and returns where it ends.
func skipNumber(b []byte, i int) (int, error) {
	digits := func() bool {
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > start
	}
	if b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if !digits() {
		return 0, errSyntax
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return 0, errSyntax
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return 0, errSyntax
		}
	}
	return i, nil
}
