package sls

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/stratahq/strata/internal/jsondepth"
)

// maxValues bounds the values one document may expand to through aliases. PyYAML shares
// an aliased object, JSON copies it, so a "billion laughs" document would otherwise turn a
// small file into an enormous pillar.
const maxValues = 1 << 20

// loader builds, from yaml.v3's node tree, the values Salt's SaltYamlSafeLoader
// (salt/utils/yamlloader.py, on top of PyYAML's SafeLoader) builds from the same text, and
// reports at its line everything JSON cannot carry faithfully or Salt's loader refuses.
// yaml.v3's own typing is YAML 1.2 and is never used: every plain scalar is resolved again
// with PyYAML's YAML 1.1 rules.
type loader struct {
	report func(line int, reason string)
	// reportAt is report with the 1-based column too (0 when unknown): a single document
	// (ReadDocument) names its problems by file:line:column, as PyYAML does.
	reportAt func(line, col int, reason string)
	// src is the document being loaded, kept to place a syntax error's column.
	src    []byte
	budget int
	// bytes, when set, is the Read's byte budget, charged for every value this loader
	// builds (aliases included, each time they are expanded); file names the document in
	// the error once it is spent.
	bytes *byteBudget
	file  string
	// aliasLine is the line of the outermost alias being expanded (0 outside one): the
	// place to name when its copies spend the budget.
	aliasLine int
	depth     int
	// path holds the reference tokens down to the value being built, and so its depth:
	// strata stores values at most jsondepth.Max levels deep.
	path   []string
	active map[*yaml.Node]bool // mappings and sequences being built, to catch recursion
	failed bool
	// anyKeys drops keys that are not strings without a report, for top.sls, whose
	// non-string targets get their own message.
	anyKeys bool
	// str, when set, rewrites every string value (never a key) once typed, at its node's
	// line: Salt's gpg renderer runs on the loaded data and decrypts values only.
	str func(line int, s string) string
}

// loadDocument parses src as Salt's yaml renderer does: exactly one document, an empty one
// reading as null. It returns the value, the document's root node (nil when empty) and
// whether everything was translated without problems; problems go to report.
func loadDocument(src []byte, report func(line int, reason string)) (any, *yaml.Node, bool) {
	return newLoader(report).load(src)
}

func (l *loader) load(src []byte) (any, *yaml.Node, bool) {
	l.src = src
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, true
		}
		l.syntaxError(err)
		return nil, nil, false
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		l.reportAt(max(next.Line, 1), next.Column, "a second YAML document: Salt's loader reads exactly one document per file")
	case !errors.Is(err, io.EOF):
		l.syntaxError(err)
	}
	l.checkAnchors(&doc)
	v := l.value(&doc)
	var root *yaml.Node
	if len(doc.Content) > 0 {
		root = deref(doc.Content[0])
	}
	return v, root, !l.failed
}

// byteBudget is what the documents of one Read may expand to, in bytes of values (strings,
// numbers, keys and one byte of punctuation per value): the request's body limit on the
// server. maxValues alone counts values, so aliases of long strings turned a 10 KB tree into
// a 100 MB row; charging bytes as values are built, each alias expansion again, stops such a
// tree as soon as it passes the limit, before any of it is copied, encoded or stored. A
// document without aliases costs at most about what it spells, so a tree that fits in the
// body fits in the budget.
//
// Copies have a budget of their own, CopyFactor times as large: an SLS listed for several
// targets is a row for each, and an include copies the included data into the including
// SLS (under a new key each time with key:), so a line of top.sls or of an include: list
// can name a copy of a whole file. Each copy is charged as it is made.
type byteBudget struct {
	limit, left             int64
	copiesLimit, copiesLeft int64
	err                     *TooLargeError
}

// CopyFactor is how many times Options.MaxBytes the rows and include copies of a tree may
// add up to: room for an SLS shared by several targets, not for one copied thousands of times.
const CopyFactor = 8

func newByteBudget(limit int64) *byteBudget {
	return &byteBudget{limit: limit, left: limit, copiesLimit: CopyFactor * limit, copiesLeft: CopyFactor * limit}
}

// spendCopy charges a copy of v to the copies budget, stopping as soon as it is spent (so the
// walk costs no more than the budget), and reports whether it fit.
func (b *byteBudget) spendCopy(v any) bool {
	b.copiesLeft--
	if b.copiesLeft < 0 {
		return false
	}
	switch t := v.(type) {
	case string:
		b.copiesLeft -= int64(len(t))
	case json.Number:
		b.copiesLeft -= int64(len(t))
	case map[string]any:
		for k, c := range t {
			b.copiesLeft -= int64(len(k))
			if !b.spendCopy(c) {
				return false
			}
		}
	case []any:
		for _, c := range t {
			if !b.spendCopy(c) {
				return false
			}
		}
	}
	return b.copiesLeft >= 0
}

// TooLargeError is a tree whose values expand past Options.MaxBytes, or whose rows and
// include copies pass CopyFactor times it (Copies): File and Line are where the budget was
// spent (for an alias, the line of the alias being expanded; for a row, its top.sls line; for
// an include, the include's line). Limit is the budget that was passed.
type TooLargeError struct {
	File   string
	Line   int
	Limit  int64
	Copies bool
}

func (e *TooLargeError) Error() string {
	if e.Copies {
		return fmt.Sprintf("%s:%d: the tree's rows and included copies add up to more than %d bytes (%d times the request body limit): an SLS listed for many targets, or included many times, is copied into each", e.File, e.Line, e.Limit, CopyFactor)
	}
	return fmt.Sprintf("%s:%d: the tree's values expand to more than %d bytes, the request body limit (YAML aliases copy what they name each time they are used)", e.File, e.Line, e.Limit)
}

// charge takes n bytes from the Read's budget for a value built at line, and reports whether
// the loader may go on. Once the budget is spent every loader of the Read stops building.
func (l *loader) charge(n int, line int) bool {
	b := l.bytes
	if b == nil {
		return true
	}
	if b.err != nil {
		l.failed = true
		return false
	}
	b.left -= int64(n)
	if b.left >= 0 {
		return true
	}
	if l.aliasLine != 0 {
		line = l.aliasLine
	}
	b.err = &TooLargeError{File: l.file, Line: line, Limit: b.limit}
	l.failed = true
	return false
}

// newLoader returns a loader reporting to report.
func newLoader(report func(line int, reason string)) *loader {
	return newLoaderAt(func(line, _ int, reason string) { report(line, reason) })
}

// newLoaderAt returns a loader reporting to report with the column of each problem (0 when
// it has none).
func newLoaderAt(report func(line, col int, reason string)) *loader {
	l := &loader{budget: maxValues, active: map[*yaml.Node]bool{}}
	l.reportAt = func(line, col int, reason string) {
		l.failed = true
		report(line, col, reason)
	}
	l.report = func(line int, reason string) { l.reportAt(line, 0, reason) }
	return l
}

// at reports reason at n's line and column.
func (l *loader) at(n *yaml.Node, reason string) { l.reportAt(n.Line, n.Column, reason) }

// syntaxError reports a yaml.v3 parse error. Its text names only a line (often that of the
// construct being parsed, not of the offending character); the column is where parsing a
// prefix of the document first fails the same way (syntaxPos), and the line with it.
func (l *loader) syntaxError(err error) {
	line, col := yamlErrorLine(err), 0
	if pl, pc, ok := syntaxPos(l.src, err); ok {
		line, col = pl, pc
	}
	l.reportAt(line, col, "YAML syntax error: "+yamlProblem(err))
}

// syntaxPos finds where in src the parse error err arises: the shortest prefix of src that
// fails with the same problem ends at the offending character, as the scanner reads from the
// left and stops at the first problem. A prefix that ends earlier fails differently (at its
// end) or not at all, so a binary search over the prefix length finds it in a few parses.
// It returns the 1-based line and column of that character.
func syntaxPos(src []byte, err error) (line, col int, ok bool) {
	if len(src) > maxSyntaxSearch {
		return 0, 0, false
	}
	want := yamlProblem(err)
	same := func(n int) bool {
		var doc yaml.Node
		dec := yaml.NewDecoder(bytes.NewReader(src[:n]))
		e := dec.Decode(&doc)
		if e == nil {
			e = dec.Decode(&doc)
		}
		return e != nil && !errors.Is(e, io.EOF) && yamlProblem(e) == want
	}
	if !same(len(src)) {
		return 0, 0, false
	}
	lo, hi := 0, len(src) // same(hi) holds
	for lo < hi {
		mid := (lo + hi) / 2
		if same(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	at := max(hi-1, 0) // the last character of the shortest failing prefix
	// A prefix cut at a line's end reads as the next line's start (the scanner needs the
	// line break to decide), so a break there is placed on the line after it.
	if at < len(src) && src[at] == '\n' {
		at++
	}
	line = 1 + bytes.Count(src[:at], []byte("\n"))
	start := bytes.LastIndexByte(src[:at], '\n') + 1
	return line, 1 + utf8.RuneCount(src[start:at]), true
}

// maxSyntaxSearch bounds the documents whose syntax errors get a column: the search parses
// about log2(size) prefixes, which is cheap for a pillar and not worth it for a huge body.
const maxSyntaxSearch = 1 << 20

// yamlProblem is a yaml.v3 error's problem without its line.
func yamlProblem(err error) string {
	return yamlLinePrefixRE.ReplaceAllString(strings.TrimPrefix(err.Error(), "yaml: "), "")
}

var yamlLinePrefixRE = regexp.MustCompile(`^line \d+: `)

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

// yamlErrorLine digs the line out of a yaml.v3 error, whose only structure is its text.
func yamlErrorLine(err error) int {
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		if n, convErr := strconv.Atoi(m[1]); convErr == nil {
			return n
		}
	}
	return 1
}

// checkAnchors reports an anchor defined twice: yaml.v3 lets the second one win, PyYAML's
// composer refuses the document ("found duplicate anchor").
func (l *loader) checkAnchors(doc *yaml.Node) {
	seen := map[string]int{}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind != yaml.AliasNode && n.Anchor != "" {
			if first, dup := seen[n.Anchor]; dup {
				l.at(n, fmt.Sprintf("anchor &%s is defined again (first on line %d): PyYAML refuses duplicate anchors", n.Anchor, first))
			} else {
				seen[n.Anchor] = n.Line
			}
		}
		if n.Kind != yaml.AliasNode {
			for _, c := range n.Content {
				walk(c)
			}
		}
	}
	walk(doc)
}

// deref follows aliases to the node they name; PyYAML's composer hands the constructor
// that very node.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 64; i++ {
		n = n.Alias
	}
	return n
}

// explicitTag returns a node's tag when the document spells one, in yaml.v3's short form.
func explicitTag(n *yaml.Node) (string, bool) {
	if n.Style&yaml.TaggedStyle == 0 {
		return "", false
	}
	t := n.Tag
	if rest, ok := strings.CutPrefix(t, "tag:yaml.org,2002:"); ok {
		t = "!!" + rest
	}
	return t, true
}

// scalarTag is the tag PyYAML constructs a scalar with: the explicit one, str for any
// quoted or block scalar, and the YAML 1.1 resolution of a plain one.
func scalarTag(n *yaml.Node) string {
	if t, ok := explicitTag(n); ok {
		return t
	}
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return tagStr
	}
	return resolvePlain(n.Value)
}

func (l *loader) value(n *yaml.Node) any {
	if n == nil {
		return nil
	}
	if !l.charge(1, n.Line) { // a value's share of JSON's punctuation
		return nil
	}
	l.budget--
	if l.budget == 0 {
		l.at(n, fmt.Sprintf("the document expands to more than %d values through aliases", maxValues))
	}
	if l.budget <= 0 {
		return nil
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil
		}
		return l.value(n.Content[0])
	case yaml.AliasNode:
		t := deref(n)
		if t == nil || t.Kind == yaml.AliasNode {
			l.at(n, "alias *"+n.Value+" names no node")
			return nil
		}
		if l.active[t] {
			l.at(n, "alias *"+n.Value+" makes a recursive structure, which JSON cannot hold")
			return nil
		}
		if l.aliasLine == 0 {
			l.aliasLine = n.Line
			defer func() { l.aliasLine = 0 }()
		}
		return l.value(t)
	case yaml.ScalarNode:
		return l.scalar(n)
	case yaml.MappingNode:
		return l.mapping(n)
	case yaml.SequenceNode:
		return l.sequence(n)
	}
	l.at(n, "a YAML node of unknown kind")
	return nil
}

func (l *loader) scalar(n *yaml.Node) any {
	tag := scalarTag(n)
	switch tag {
	case "!!binary":
		l.at(n, "a !!binary scalar is bytes in Salt, which JSON cannot hold")
		return nil
	case tagMap, tagSeq, "!!omap", "!!pairs", "!!set":
		l.at(n, fmt.Sprintf("tag %s on a scalar: Salt's loader refuses it", tag))
		return nil
	}
	v, err := constructScalar(tag, n.Value)
	if err != nil {
		l.at(n, scalarReason(n.Value, err))
		return nil
	}
	if s, ok := v.(string); ok && l.str != nil {
		v = l.str(n.Line, s)
	}
	switch t := v.(type) {
	case string:
		if !l.charge(len(t), n.Line) {
			return nil
		}
	case json.Number:
		if !l.charge(len(t), n.Line) {
			return nil
		}
	}
	return v
}

// scalarReason words a scalar the import cannot take.
func scalarReason(raw string, err error) string {
	if errors.Is(err, errNotJSON) {
		return fmt.Sprintf("value %s: %v", quoteShort(raw), err)
	}
	return fmt.Sprintf("value %s: Salt fails to load it (%v)", quoteShort(raw), err)
}

func (l *loader) sequence(n *yaml.Node) any {
	if t, ok := explicitTag(n); ok && t != tagSeq {
		l.at(n, fmt.Sprintf("a sequence tagged %s: Salt builds %s, which JSON cannot hold faithfully", t, pythonTypeOf(t)))
		return nil
	}
	if !l.enter(n) {
		return nil
	}
	l.active[n] = true
	defer delete(l.active, n)
	defer l.leave()
	out := make([]any, 0, len(n.Content))
	for i, c := range n.Content {
		l.path = append(l.path, strconv.Itoa(i))
		out = append(out, l.value(c))
		l.path = l.path[:len(l.path)-1]
	}
	return out
}

// enter starts building a mapping or sequence one level below the current one, reporting it
// when it is deeper than strata stores (jsondepth.Max levels, the document being level 1).
func (l *loader) enter(n *yaml.Node) bool {
	if l.depth < jsondepth.Max {
		l.depth++
		return true
	}
	var ptr strings.Builder
	for _, t := range l.path {
		ptr.WriteByte('/')
		ptr.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	l.at(n, fmt.Sprintf("the value at %q nests deeper than %d levels: strata stores pillar data at most %d levels deep", ptr.String(), jsondepth.Max, jsondepth.Max))
	return false
}

func (l *loader) leave() { l.depth-- }

func pythonTypeOf(tag string) string {
	switch tag {
	case "!!omap", "!!pairs":
		return "a list of tuples"
	case "!!set":
		return "a set"
	}
	return "no value (it has no constructor for the tag)"
}

type pair struct{ k, v *yaml.Node }

func (l *loader) mapping(n *yaml.Node) any {
	if t, ok := explicitTag(n); ok && t != tagMap {
		l.at(n, fmt.Sprintf("a mapping tagged %s: Salt builds %s, which JSON cannot hold faithfully", t, pythonTypeOf(t)))
		return nil
	}
	if l.active[n] {
		l.at(n, "a mapping merges itself (<<), which JSON cannot hold")
		return nil
	}
	if !l.enter(n) {
		return nil
	}
	l.active[n] = true
	defer delete(l.active, n)
	defer l.leave()
	pairs := l.flatten(n)
	out := make(map[string]any, len(pairs))
	for _, p := range pairs {
		key, ok := l.key(p.k)
		if ok && !l.charge(len(key), deref(p.k).Line) {
			return nil
		}
		l.path = append(l.path, key)
		v := l.value(p.v)
		l.path = l.path[:len(l.path)-1]
		if !ok {
			continue
		}
		if _, dup := out[key]; dup {
			l.at(deref(p.k), fmt.Sprintf("key %s appears twice in one mapping: Salt's loader refuses the file (found conflicting ID)", quoteShort(key)))
			continue
		}
		out[key] = v
	}
	return out
}

// isMergeKey reports whether a key is YAML 1.1's merge key "<<", as PyYAML tags it.
func isMergeKey(k *yaml.Node) bool {
	k = deref(k)
	return k != nil && k.Kind == yaml.ScalarNode && scalarTag(k) == tagMerge
}

// flatten is Salt's flatten_mapping: the "<<" entries are removed, the mappings they name
// (a sequence of them is taken last-first) are flattened in turn, and their entries whose
// key text the mapping itself does not spell are put before the mapping's own entries.
// Unlike PyYAML's version it does not let the first merged mapping win over a later one:
// two merged mappings sharing a key leave both entries, and construct_mapping then refuses
// the duplicate, so Salt fails on `<<: [*a, *b]` when *a and *b share a key.
func (l *loader) flatten(n *yaml.Node) []pair {
	var merge, rest []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !isMergeKey(k) {
			rest = append(rest, pair{k, v})
			continue
		}
		t := deref(v)
		switch {
		case t == nil:
			l.at(v, "a merge key (<<) whose alias names no node")
		case t.Kind == yaml.MappingNode:
			merge = append(merge, l.flattenMerged(t, v)...)
		case t.Kind == yaml.SequenceNode:
			var subs [][]pair
			for _, item := range t.Content {
				it := deref(item)
				if it == nil || it.Kind != yaml.MappingNode {
					l.at(item, "a merge key (<<) lists something other than a mapping: Salt's loader refuses it")
					continue
				}
				subs = append(subs, l.flattenMerged(it, item))
			}
			for s := len(subs) - 1; s >= 0; s-- {
				merge = append(merge, subs[s]...)
			}
		default:
			l.at(v, "a merge key (<<) needs a mapping or a list of mappings: Salt's loader refuses anything else")
		}
	}
	if len(merge) == 0 {
		return rest
	}
	// Merged mappings that merge others can multiply entries level by level; they are
	// charged to the same budget as alias expansion.
	l.budget -= len(merge)
	if l.budget <= 0 {
		if l.budget+len(merge) > 0 {
			l.at(n, fmt.Sprintf("the document expands to more than %d values through aliases", maxValues))
		}
		return nil
	}
	existing := map[string]bool{}
	for _, p := range rest {
		existing[rawKey(p.k)] = true
	}
	out := make([]pair, 0, len(merge)+len(rest))
	for _, p := range merge {
		if !existing[rawKey(p.k)] {
			out = append(out, p)
		}
	}
	return append(out, rest...)
}

func (l *loader) flattenMerged(t *yaml.Node, at *yaml.Node) []pair {
	if l.budget <= 0 {
		return nil
	}
	if l.active[t] {
		l.at(at, "a mapping merges itself (<<), which JSON cannot hold")
		return nil
	}
	l.active[t] = true
	defer delete(l.active, t)
	return l.flatten(t)
}

// rawKey is what Salt's flatten_mapping compares keys by: a scalar key's text as written
// (so "1" and 1 collide there), any other key only with itself.
func rawKey(k *yaml.Node) string {
	k = deref(k)
	if k != nil && k.Kind == yaml.ScalarNode {
		return "s\x00" + k.Value
	}
	return fmt.Sprintf("n\x00%p", k)
}

// key builds a mapping key. Salt keeps keys of any hashable type (yes: is the key True,
// 80: is the integer 80); a JSON object's keys are strings, so only keys Salt reads as
// strings are taken and the others are reported.
func (l *loader) key(k *yaml.Node) (string, bool) {
	t := deref(k)
	if t == nil {
		l.at(k, "an alias key names no node")
		return "", false
	}
	if t.Kind != yaml.ScalarNode {
		l.at(t, "a mapping or sequence used as a key: Salt refuses it (unhashable key)")
		return "", false
	}
	tag := scalarTag(t)
	if tag == tagValue { // flatten_mapping turns the "=" key into a string
		tag = tagStr
	}
	v, err := constructScalar(tag, t.Value)
	if err != nil {
		l.at(t, "key "+strings.TrimPrefix(scalarReason(t.Value, err), "value "))
		return "", false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case nil:
		if l.anyKeys {
			break
		}
		l.at(t, fmt.Sprintf("key %s is None in Salt; a JSON key is a string: quote it", quoteShort(t.Value)))
	case bool:
		if l.anyKeys {
			break
		}
		l.at(t, fmt.Sprintf("key %s is the boolean %s in Salt (YAML 1.1); a JSON key is a string: quote it", quoteShort(t.Value), pyBool(v)))
	case json.Number:
		if l.anyKeys {
			break
		}
		l.at(t, fmt.Sprintf("key %s is the number %s in Salt; a JSON key is a string: quote it", quoteShort(t.Value), v))
	}
	return "", false
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// quoteShort quotes a scalar for a message, cut so that one bad value cannot flood a
// report (and a secret in it is not echoed whole).
func quoteShort(s string) string {
	const limit = 40
	if r := []rune(s); len(r) > limit {
		s = string(r[:limit]) + "…"
	}
	return strconv.Quote(s)
}
